"""torch.distributed backend "weft": ``import weft.torch`` registers it.

    import torch.distributed as dist
    import weft.torch
    dist.init_process_group("weft", init_method="tcp://host:port", rank=r, world_size=n)
    # or under torchrun: dist.init_process_group("weft")

The process group is a C++ c10d::ProcessGroup (weft/_torch_ext, built by
``make python``). Its creator takes the c10d store torch hands it: rank 0
of the group creates Weft's unique id and puts it in the store, so no
other address or port is needed; ``new_group(backend="weft")`` calls it
again for the subgroup. Operations run on Weft's progress thread; their
Work objects and futures complete from it, without the GIL.
"""

import datetime

import torch  # noqa: F401  (the extension needs torch's libraries loaded)
import torch.distributed as dist

from .. import _lib  # noqa: F401  (loads libweft, which the extension links)

try:
    from .. import _torch_ext
except ImportError as e:  # pragma: no cover - a clear message instead of a bare one
    raise ImportError(
        f"weft.torch: the torch extension is not built ({e}); run `make python` "
        "(it needs Debian's python3-torch, libtorch-dev and pybind11-dev)"
    ) from None

ProcessGroupWeft = _torch_ext.ProcessGroupWeft
BACKEND = "weft"


def _create(store, rank, size, timeout):
    if not isinstance(timeout, datetime.timedelta):
        timeout = datetime.timedelta(seconds=float(timeout))
    return ProcessGroupWeft(store, rank, size, timeout)


def _create_null(store, rank, size, timeout):
    return _torch_ext.ProcessGroupNull(rank, size)


def _register(name, fn):
    if name.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(name, fn)


_register(BACKEND, _create)


def register_null_backend():
    """Register "weft_null", a backend whose operations complete at once and
    move nothing: the floor of c10d's own dispatch (perf/torch_compare)."""
    _register("weft_null", _create_null)


def is_weft_group(group=None):
    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    return isinstance(pg, ProcessGroupWeft)
