"""Weft from Python: topology-aware collectives on host memory.

    import weft
    comm = weft.Comm.from_env()              # mpirun, srun, torchrun or WEFT_RANK/WEFT_NRANKS
    x = numpy.ones(1024, dtype=numpy.float32)
    comm.allreduce(x, op=weft.Op.AVG)        # in place, no copy
    req = comm.iallgather(x)                 # non-blocking: a Request
    gathered = req.wait()
    print(weft.topo(comm)["ring"])           # what weft-topo shows

``import weft.torch`` registers the torch.distributed backend "weft".
"""

import contextlib
import ctypes
import os

from ._buffers import DTYPE_NAMES
from ._comm import Comm, Op, Request, dump, get_unique_id, host, settings, topo
from ._errors import (Status, WeftError, WeftRemoteError, WeftRevokedError, WeftTimeoutError,
                      check_init)
from ._lib import LaunchInfo, lib

__all__ = ["Comm", "Op", "Request", "Status", "WeftError", "WeftRemoteError",
           "WeftRevokedError", "WeftTimeoutError", "DTYPE_NAMES", "dump", "get_unique_id",
           "group", "host", "init", "launch_info", "settings", "topo", "version"]


def _source_version():
    """The VERSION file of the source tree this package sits in
    (PYTHONPATH=python), else the loaded library's own version."""
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    try:
        with open(os.path.join(top, "VERSION"), encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return lib.weft_version().decode()


try:  # written from VERSION by make install and by pip's build (setup.py)
    from ._version import __version__
except ImportError:
    __version__ = _source_version()


def version():
    """The version of the libweft this package loaded (weft_version());
    ``weft.__version__`` is the package's. Installed together they agree."""
    return lib.weft_version().decode()


def init(*, timeout=None, progress_thread=None):
    """Comm.from_env(): a communicator of the job the launcher started."""
    return Comm.from_env(timeout=timeout, progress_thread=progress_thread)


def launch_info():
    """What the launcher's environment says (weft_launch_query): rank,
    nranks, local_rank, local_size (-1: not said) and the launcher's name."""
    info = LaunchInfo()
    info.size = ctypes.sizeof(info)
    check_init(lib.weft_launch_query(ctypes.byref(info)), "weft_launch_query")
    return {"rank": info.rank, "nranks": info.nranks, "local_rank": info.local_rank,
            "local_size": info.local_size, "launcher": info.launcher.decode()}


@contextlib.contextmanager
def group():
    """Calls inside the block are recorded and start together at its end
    (weft_group_start/end, per thread): blocking ones complete there."""
    check_init(lib.weft_group_start(), "weft_group_start")
    ok = False
    try:
        yield
        ok = True
    finally:
        st = lib.weft_group_end()
        if ok:
            check_init(st, "weft_group_end")
