"""Load libweft and declare the C functions the package calls (ctypes).

ctypes.CDLL releases the GIL around every call, so a blocking collective
lets the other Python threads run. The library is found, first match wins:

1. ``WEFT_LIBRARY``: a path to libweft.so;
2. the directory ``make install`` recorded next to the package (``_install.py``);
3. the build tree: ``build/libweft.so`` beside the ``python/`` folder this
   package was imported from (``PYTHONPATH=python``); ``WEFT_BUILD`` names
   another build directory, as it does for the C tests;
4. the dynamic loader's own search (``libweft.so.0``).

It is loaded with RTLD_GLOBAL so that the torch extension, which links
libweft.so.0, binds to this very copy.
"""

import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("WEFT_LIBRARY")
    if env:
        yield env
        return
    try:
        from . import _install  # written by `make install`

        yield os.path.join(_install.LIBDIR, "libweft.so.0")
    except ImportError:
        pass
    repo = os.path.dirname(os.path.dirname(_HERE))
    build = os.environ.get("WEFT_BUILD", "build")
    yield os.path.join(build if os.path.isabs(build) else os.path.join(repo, build), "libweft.so")
    yield "libweft.so.0"


def _load():
    tried = []
    for path in _candidates():
        if os.path.sep in path and not os.path.exists(path):
            tried.append(path + " (missing)")
            continue
        try:
            return ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        except OSError as e:
            tried.append(f"{path} ({e})")
    raise ImportError(
        "weft: cannot load libweft (build it with `make`, install it with `make install`, "
        "or set WEFT_LIBRARY=/path/to/libweft.so); tried: " + "; ".join(tried)
    )


lib = _load()

c_status = ctypes.c_int
c_comm = ctypes.c_void_p
c_request = ctypes.c_void_p
c_size = ctypes.c_size_t
c_ptr = ctypes.c_void_p
UNIQUE_ID_BYTES = 128
LAUNCHER_NAME_BYTES = 32


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * UNIQUE_ID_BYTES)]


class Config(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("timeout_seconds", ctypes.c_double),
        ("progress_thread", ctypes.c_int),
        ("compute_threads", ctypes.c_long),
    ]


class FailedRank(ctypes.Structure):
    _fields_ = [
        ("rank", ctypes.c_int),
        ("how", ctypes.c_int),
        ("seconds_ago", ctypes.c_double),
    ]


class LaunchInfo(ctypes.Structure):
    _fields_ = [
        ("size", ctypes.c_size_t),
        ("rank", ctypes.c_int),
        ("nranks", ctypes.c_int),
        ("local_rank", ctypes.c_int),
        ("local_size", ctypes.c_int),
        ("launcher", ctypes.c_char * LAUNCHER_NAME_BYTES),
    ]


_P = ctypes.POINTER
_sizes = _P(c_size)

_PROTOS = {
    "weft_status_string": (ctypes.c_char_p, [c_status]),
    "weft_datatype_size": (c_size, [ctypes.c_int]),
    "weft_version": (ctypes.c_char_p, []),
    "weft_get_unique_id": (c_status, [_P(UniqueId)]),
    "weft_comm_init_rank": (c_status, [_P(c_comm), ctypes.c_int, UniqueId, ctypes.c_int,
                                       _P(Config)]),
    "weft_comm_init_env": (c_status, [_P(c_comm), _P(Config)]),
    "weft_launch_query": (c_status, [_P(LaunchInfo)]),
    "weft_init_last_error": (ctypes.c_char_p, []),
    "weft_comm_destroy": (c_status, [c_comm]),
    "weft_comm_abort": (c_status, [c_comm]),
    "weft_comm_get_async_error": (c_status, [c_comm, _P(c_status)]),
    "weft_comm_last_error": (ctypes.c_char_p, [c_comm]),
    "weft_comm_rank": (c_status, [c_comm, _P(ctypes.c_int)]),
    "weft_comm_size": (c_status, [c_comm, _P(ctypes.c_int)]),
    "weft_comm_split": (c_status, [c_comm, ctypes.c_int, ctypes.c_int, _P(c_comm)]),
    "weft_comm_revoke": (c_status, [c_comm]),
    "weft_comm_shrink": (c_status, [c_comm, _P(ctypes.c_int), ctypes.c_int, ctypes.c_int,
                                    _P(c_comm)]),
    "weft_comm_failed_ranks": (c_status, [c_comm, _P(FailedRank), ctypes.c_int,
                                          _P(ctypes.c_int)]),
    "weft_rank_failure_string": (ctypes.c_char_p, [ctypes.c_int]),
    "weft_comm_describe": (c_status, [c_comm, _P(ctypes.c_void_p)]),
    "weft_comm_dump": (c_status, [c_comm, ctypes.c_char_p]),
    "weft_host_describe": (c_status, [_P(ctypes.c_void_p)]),
    "weft_settings_describe": (c_status, [_P(ctypes.c_void_p)]),
    "weft_describe_free": (None, [ctypes.c_void_p]),
    "weft_test": (c_status, [_P(c_request)]),
    "weft_wait": (c_status, [_P(c_request)]),
    "weft_group_start": (c_status, []),
    "weft_group_end": (c_status, []),
    "weft_barrier": (c_status, [c_comm]),
    "weft_ibarrier": (c_status, [c_comm, _P(c_request)]),
}

# (sendbuf, recvbuf, count, dtype, op) collectives and the rooted ones.
for _name in ("allreduce", "reduce_scatter"):
    _PROTOS["weft_" + _name] = (c_status, [c_ptr, c_ptr, c_size, ctypes.c_int, ctypes.c_int,
                                           c_comm])
    _PROTOS["weft_i" + _name] = (c_status, [c_ptr, c_ptr, c_size, ctypes.c_int, ctypes.c_int,
                                            c_comm, _P(c_request)])
for _name in ("allgather", "alltoall"):
    _PROTOS["weft_" + _name] = (c_status, [c_ptr, c_ptr, c_size, ctypes.c_int, c_comm])
    _PROTOS["weft_i" + _name] = (c_status, [c_ptr, c_ptr, c_size, ctypes.c_int, c_comm,
                                            _P(c_request)])
for _name in ("broadcast", "gather", "scatter"):
    _PROTOS["weft_" + _name] = (c_status, [c_ptr, c_ptr, c_size, ctypes.c_int, ctypes.c_int,
                                           c_comm])
    _PROTOS["weft_i" + _name] = (c_status, [c_ptr, c_ptr, c_size, ctypes.c_int, ctypes.c_int,
                                            c_comm, _P(c_request)])
_PROTOS["weft_reduce"] = (c_status, [c_ptr, c_ptr, c_size, ctypes.c_int, ctypes.c_int,
                                     ctypes.c_int, c_comm])
_PROTOS["weft_ireduce"] = (c_status, [c_ptr, c_ptr, c_size, ctypes.c_int, ctypes.c_int,
                                      ctypes.c_int, c_comm, _P(c_request)])
_PROTOS["weft_alltoallv"] = (c_status, [c_ptr, _sizes, _sizes, c_ptr, _sizes, _sizes,
                                        ctypes.c_int, c_comm])
_PROTOS["weft_ialltoallv"] = (c_status, [c_ptr, _sizes, _sizes, c_ptr, _sizes, _sizes,
                                         ctypes.c_int, c_comm, _P(c_request)])
for _name in ("send", "recv"):
    _PROTOS["weft_" + _name] = (c_status, [c_ptr, c_size, ctypes.c_int, ctypes.c_int, c_comm])
    _PROTOS["weft_i" + _name] = (c_status, [c_ptr, c_size, ctypes.c_int, ctypes.c_int, c_comm,
                                            _P(c_request)])

for _name, (_res, _args) in _PROTOS.items():
    _fn = getattr(lib, _name)
    _fn.restype = _res
    _fn.argtypes = _args

IN_PLACE = ctypes.c_void_p(1)  # WEFT_IN_PLACE
