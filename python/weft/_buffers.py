"""Buffers without copies: numpy arrays, CPU torch tensors and anything with
the buffer protocol, as (address, element count, Weft datatype).

Reductions need one of Weft's ten element types. Calls that only move
bytes (allgather, broadcast, alltoall(v), gather, scatter, send/recv) take
any element type: they move ``nbytes`` as uint8.
"""

import sys

import numpy as np

# weft_datatype_t, in weft.h's order.
INT8, UINT8, INT32, UINT32, INT64, UINT64, FLOAT16, BFLOAT16, FLOAT32, FLOAT64 = range(10)
DTYPE_NAMES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "bfloat16",
               "float32", "float64"]

_NUMPY = {np.dtype(name): code for code, name in enumerate(DTYPE_NAMES) if name != "bfloat16"}
_TORCH = None  # filled on first use: torch is optional here


def _torch_types():
    global _TORCH
    if _TORCH is None:
        import torch

        _TORCH = {torch.int8: INT8, torch.uint8: UINT8, torch.int32: INT32,
                  torch.int64: INT64, torch.float16: FLOAT16, torch.bfloat16: BFLOAT16,
                  torch.float32: FLOAT32, torch.float64: FLOAT64}
    return _TORCH


class Buffer:
    """One buffer of a call. ``dtype`` is None when the element type is not
    one of Weft's (such a buffer can only be moved as bytes)."""

    __slots__ = ("obj", "ptr", "count", "itemsize", "dtype", "type_name")

    def __init__(self, obj, ptr, count, itemsize, dtype, type_name):
        self.obj = obj  # keeps the memory alive while a request holds it
        self.ptr = ptr
        self.count = count
        self.itemsize = itemsize
        self.dtype = dtype
        self.type_name = type_name

    @property
    def nbytes(self):
        return self.count * self.itemsize


def _is_tensor(obj):
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def _from_tensor(t, what, writable):
    import torch

    if t.device.type != "cpu":
        raise ValueError(f"{what}: a tensor on {t.device}; Weft takes CPU tensors")
    if t.layout != torch.strided:
        raise ValueError(f"{what}: a {t.layout} tensor; Weft takes dense (strided) tensors")
    if not t.is_contiguous():
        raise ValueError(f"{what}: a non-contiguous tensor (strides {tuple(t.stride())}); "
                         "pass t.contiguous()")
    name = str(t.dtype).replace("torch.", "")
    return Buffer(t, t.data_ptr(), t.numel(), t.element_size(), _torch_types().get(t.dtype), name)


def _from_array(a, what, writable):
    if not a.flags.c_contiguous:
        raise ValueError(f"{what}: a non-contiguous array (strides {a.strides}); "
                         "pass numpy.ascontiguousarray(a)")
    if writable and not a.flags.writeable:
        raise ValueError(f"{what}: a read-only array, but Weft writes into it")
    code = _NUMPY.get(a.dtype) if a.dtype.isnative else None
    return Buffer(a, a.ctypes.data, a.size, a.itemsize, code, str(a.dtype))


def view(obj, what, writable=False):
    """The Buffer of @obj, or TypeError/ValueError naming @what."""
    if obj is None:
        raise TypeError(f"{what}: None")
    if _is_tensor(obj):
        return _from_tensor(obj, what, writable)
    if isinstance(obj, np.ndarray):
        return _from_array(obj, what, writable)
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError(f"{what}: a {type(obj).__name__}; Weft takes numpy arrays, CPU torch "
                        "tensors or objects with the buffer protocol") from None
    if writable and mv.readonly:
        raise ValueError(f"{what}: a read-only {type(obj).__name__}, but Weft writes into it")
    return _from_array(np.asarray(mv), what, writable)


def like(buf, count):
    """A new buffer of @count elements of @buf's type and kind (numpy or torch)."""
    if _is_tensor(buf.obj):
        import torch

        return torch.empty(count, dtype=buf.obj.dtype)
    return np.empty(count, dtype=buf.obj.dtype)


def need_dtype(buf, what):
    """Weft's datatype code of @buf, for a reduction."""
    if buf.dtype is None:
        raise TypeError(f"{what}: element type {buf.type_name} cannot be reduced by Weft "
                        f"(reductions take {', '.join(DTYPE_NAMES)})")
    return buf.dtype


def same_type(a, b, what):
    if a.type_name != b.type_name:
        raise TypeError(f"{what}: element types differ ({a.type_name} and {b.type_name})")
