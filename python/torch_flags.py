"""Print the compiler flags of a torch C++ extension for the Makefile.

Line 1: preprocessor and include flags (torch's headers as system headers,
so their warnings are not ours); line 2: libraries. The pybind11 ABI
macros must match the ones torch was built with, or pybind cannot hand
our process group to torch's Python classes.
"""
import sys
import sysconfig

try:
    import torch
    import torch.utils.cpp_extension as ext
except ImportError as e:
    sys.exit(f"torch_flags: torch is not importable with {sys.executable}: {e}")

incs = ext.include_paths() + [sysconfig.get_paths()["include"]]
defs = [
    "-DTORCH_API_INCLUDE_EXTENSION_H",
    "-DTORCH_EXTENSION_NAME=_torch_ext",
    f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
]
for name in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI"):
    value = getattr(torch._C, f"_PYBIND11_{name}", None)
    if value is not None:
        defs.append(f'-DPYBIND11_{name}="{value}"')
print(" ".join(defs + [f"-isystem {d}" for d in incs]))
libs = [f"-L{d}" for d in ext.library_paths()] + ["-lc10", "-ltorch", "-ltorch_cpu",
                                                  "-ltorch_python"]
print(" ".join(libs))
