"""setup.py — the build behind pyproject.toml (setuptools): the package,
its version from the VERSION file, where libweft is, and the torch
extension.

    pip install --no-build-isolation ./python
    pip wheel --no-build-isolation -w DIR ./python

The package is pure Python over libweft (ctypes). Two files are written
into the built package: _version.py (the VERSION file at the top of the
source tree) and _install.py (libweft's folder, from pkg-config weft), so
that the package loads the libweft it was built against; without weft.pc
the dynamic loader's search finds libweft.so.0 at run time instead.

The extension weft._torch_ext (python/csrc: the torch.distributed
backend) is built against the installed libweft that pkg-config finds
(PKG_CONFIG_PATH=PREFIX/lib/pkgconfig for a make install elsewhere than
/usr) when torch imports with this interpreter and its C++ headers are
there (Debian: python3-torch, libtorch-dev, pybind11-dev). The build
variable WEFT_TORCH_EXT (read here only, not by the library) decides:
"auto" (unset) builds it when everything is there and says what is
missing when not, "1" makes a missing piece an error, "0" skips it.
"""

import concurrent.futures
import glob
import os
import shlex
import subprocess
import sys
import sysconfig

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = os.path.dirname(os.path.abspath(__file__))


def read_version():
    """VERSION beside this file (an sdist) or at the top of the tree."""
    for path in (os.path.join(HERE, "VERSION"), os.path.join(HERE, "..", "VERSION")):
        if os.path.exists(path):
            with open(path, encoding="ascii") as f:
                return f.read().strip()
    sys.exit("setup.py: no VERSION file beside python/ (build from Weft's source tree)")


def pkg_config(*args):
    """pkg-config's answer for weft, split into words; None if it has none."""
    cmd = [os.environ.get("PKG_CONFIG", "pkg-config"), *args, "weft"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
    except OSError:
        return None
    return shlex.split(r.stdout) if r.returncode == 0 else None


def torch_missing():
    """Why the extension cannot be built here, or None when it can."""
    try:
        import torch  # noqa: F401
    except ImportError as e:
        return f"torch does not import with {sys.executable} ({e})"
    import torch.utils.cpp_extension as ext
    dirs = ext.include_paths() + ["/usr/include", sysconfig.get_paths()["include"]]
    for header, package in (("torch/csrc/distributed/c10d/ProcessGroup.hpp", "libtorch-dev"),
                            ("pybind11/pybind11.h", "pybind11-dev")):
        if not any(os.path.exists(os.path.join(d, header)) for d in dirs):
            return f"{header} is missing (Debian's {package})"
    if pkg_config("--exists") is None:
        return "pkg-config does not find weft (install libweft: make install or libweft-dev)"
    return None


def torch_extension():
    """The Extension, or None (after saying why) when it is not built."""
    mode = os.environ.get("WEFT_TORCH_EXT", "auto")
    if mode not in ("auto", "0", "1"):
        sys.exit(f"setup.py: WEFT_TORCH_EXT={mode}: expected auto, 0 or 1")
    if mode == "0":
        return None
    why = torch_missing()
    if why:
        if mode == "1":
            sys.exit(f"setup.py: WEFT_TORCH_EXT=1 but {why}")
        print(f"setup.py: the torch extension is not built: {why}", file=sys.stderr)
        return None
    flags = subprocess.run([sys.executable, os.path.join(HERE, "torch_flags.py")],
                           capture_output=True, text=True, check=True).stdout.splitlines()
    cflags = pkg_config("--cflags") or []
    incdirs = [f[2:] for f in cflags if f.startswith("-I")] or ["/usr/include"]
    return Extension(
        "weft._torch_ext",
        sources=sorted(glob.glob(os.path.join("csrc", "*.cpp"))),
        depends=sorted(glob.glob(os.path.join("csrc", "*.hpp")))
        + [os.path.join(d, "weft.h") for d in incdirs if os.path.exists(os.path.join(d, "weft.h"))],
        language="c++",
        # torch_flags.py's words as they are: -DPYBIND11_COMPILER_TYPE="_gcc"
        # keeps its quotes, which make the macro a string.
        extra_compile_args=["-std=c++17", "-Wall", "-Wextra", "-Wno-unused-parameter"]
        + cflags + flags[0].split(),
        extra_link_args=(pkg_config("--libs") or []) + flags[1].split(),
    )


class BuildPy(build_py):
    """The package, with _version.py and _install.py written into it."""

    def run(self):
        super().run()
        pkg = os.path.join(self.build_lib, "weft")
        with open(os.path.join(pkg, "_version.py"), "w", encoding="ascii") as f:
            f.write(f'__version__ = "{read_version()}"  # written by setup.py from VERSION\n')
        libdir = pkg_config("--variable=libdir")
        path = os.path.join(pkg, "_install.py")
        if libdir:
            with open(path, "w", encoding="ascii") as f:
                f.write(f'LIBDIR = "{libdir[0]}"  # written by setup.py (pkg-config weft)\n')
        elif os.path.exists(path):  # a copy left in the source tree by hand
            os.remove(path)


class BuildExt(build_ext):
    """Each source of the extension compiled on its own core: torch's
    headers make every one slow."""

    def build_extension(self, ext):
        compile_one = self.compiler.compile

        def compile_all(sources, **kw):
            jobs = min(len(sources), os.cpu_count() or 1)
            with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
                done = pool.map(lambda src: compile_one([src], **kw), sources)
                return [obj for objs in done for obj in objs]

        self.compiler.compile = compile_all
        try:
            super().build_extension(ext)
        finally:
            self.compiler.compile = compile_one


class Sdist(sdist):
    """An sdist carries the VERSION file it was made from (MANIFEST.in
    brings the extension's sources)."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        with open(os.path.join(base_dir, "VERSION"), "w", encoding="ascii") as f:
            f.write(read_version() + "\n")


os.chdir(HERE)
extension = torch_extension()
setup(
    version=read_version(),
    ext_modules=[extension] if extension else [],
    cmdclass={"build_py": BuildPy, "build_ext": BuildExt, "sdist": Sdist},
)
