#!/bin/bash
# test_install.sh — make install as a packager and a user meet it:
#   (a) staged: PREFIX=P with Debian's multiarch LIBDIR=P/lib/<triplet> into
#       DESTDIR=D, then moved into place: every file where the variables
#       say, and none naming D or the build tree (weft.pc, the CMake
#       files, _install.py, the programs' runpath, which is LIBDIR: not a
#       folder the loader searches by itself);
#   (b) the installed tools and man pages work from there; the library
#       needs none of what it opens with dlopen;
#   (c) a program built with pkg-config (shared, and static with
#       --static and libweft.a) and with CMake's find_package(Weft 0.1)
#       and Weft::weft (examples/cmake), each run as a 2-rank AllReduce;
#       find_package(Weft 1.0) and (Weft 0.2) refused; the CMake package
#       moved to another prefix still finds its files;
#   (d) `import weft` from elsewhere loads the installed libweft (through
#       the _install.py make install wrote) and runs a one-rank
#       allreduce; weft.torch imports when the extension was built;
#   (e) make uninstall leaves no file behind;
#   (f) the default layout (PREFIX only: LIBDIR=P/lib) gives a weft.pc
#       and a CMake package that find it.
# Exit: 0 pass, 1 fail, 77 skipped (Debian's python3 or numpy missing).
set -u -o pipefail
. "$(dirname "$0")/../lib/lib.sh"
weft_test_dirs
weft_test_python
"$PY" -c 'import numpy' 2>/dev/null || { echo "SKIP: $PY with numpy not found"; exit 77; }
weft_test_scratch install
VERSION=$(cat "$REPO/VERSION")
MA=$(cc -print-multiarch)
P=$OUT/prefix
LIB=$P/lib/$MA
export WEFT_SOCKET_IFNAME=lo
unset WEFT_BUILD WEFT_LIBRARY PKG_CONFIG_PATH

mk() { make -s -C "$REPO" BUILD="$BUILD" "$@" >"$OUT/make.log" 2>&1 || {
	cat "$OUT/make.log"
	fail "make $*"
	weft_test_end install
}; }

# (a) staged, then moved into place.
mk PREFIX="$P" LIBDIR="$LIB" DESTDIR="$OUT/stage" install
mv "$OUT/stage$P" "$P"
for f in "$LIB/libweft.so.$VERSION" "$LIB/libweft.a" "$P/include/weft.h" "$P/include/weft_fault.h" "$LIB/pkgconfig/weft.pc" \
	"$LIB/cmake/Weft/WeftConfig.cmake" "$LIB/cmake/Weft/WeftConfigVersion.cmake" \
	"$P/bin/weft-topo" "$P/bin/weft-run" "$P/bin/allreduce_perf" "$P/share/man/man7/weft.7" \
	"$P/share/man/man1/weft-topo.1" "$P/share/man/man1/weft-perf.1"; do
	[ -f "$f" ] || fail "${f#"$OUT"/} missing"
done
[ "$(readlink "$LIB/libweft.so.0")" = "libweft.so.$VERSION" ] &&
	[ "$(readlink "$LIB/libweft.so")" = libweft.so.0 ] && ok "libweft.so -> .so.0 -> .so.$VERSION" ||
	fail "the library's links: $(ls -l "$LIB"/libweft.so*)"
[ "$(readlink "$P/share/man/man1/allreduce_perf.1")" = weft-perf.1 ] && ok "allreduce_perf(1) -> weft-perf(1)" ||
	fail "allreduce_perf.1 is not a link to weft-perf.1"
if grep -rlF -e "$OUT/stage" -e "$BUILD" "$P" >"$OUT/leaks"; then
	fail "installed files name the staging folder or the build tree: $(cat "$OUT/leaks")"
else
	ok "no installed file names DESTDIR or the build tree"
fi
needed=$(readelf -d "$LIB/libweft.so.$VERSION" | grep -E 'NEEDED.*(fabric|ibverbs|pmix|lldpctl)')
[ -z "$needed" ] && ok "libweft needs none of libfabric, libibverbs, libpmix, liblldpctl (dlopen'd)" ||
	fail "libweft links what it should open with dlopen: $needed"
rp=$(readelf -d "$P/bin/weft-topo" | sed -n 's/.*(RUNPATH).*\[\(.*\)\]/\1/p')
[ "$rp" = "$LIB" ] && ok "weft-topo's runpath is LIBDIR" || fail "weft-topo's runpath is '$rp', not $LIB"
grep -qx "libdir=\${prefix}/lib/$MA" "$LIB/pkgconfig/weft.pc" && ok "weft.pc: libdir=\${prefix}/lib/$MA" ||
	fail "weft.pc: $(grep libdir= "$LIB/pkgconfig/weft.pc")"

# (b) the installed tools, from anywhere.
cd /
"$P/bin/weft-topo" --settings >"$OUT/settings.txt" 2>&1 && grep -q '^WEFT_DEBUG ' "$OUT/settings.txt" &&
	ok "installed weft-topo --settings" || fail "installed weft-topo --settings: $(head -3 "$OUT/settings.txt")"
lib_of() { ldd "$1" | awk '/libweft.so/ { print $3 }'; }
[ "$(lib_of "$P/bin/allreduce_perf")" = "$LIB/libweft.so.0" ] && ok "allreduce_perf loads $LIB/libweft.so.0" ||
	fail "allreduce_perf loads '$(lib_of "$P/bin/allreduce_perf")'"
MANWIDTH=80 man --warnings -l "$P/share/man/man7/weft.7" >"$OUT/weft.7.txt" 2>"$OUT/man.err"
[ -s "$OUT/weft.7.txt" ] && [ ! -s "$OUT/man.err" ] && grep -q WEFT_TIMEOUT "$OUT/weft.7.txt" &&
	ok "man -l weft.7: no warning, WEFT_TIMEOUT in it" || fail "man -l weft.7: $(head -3 "$OUT/man.err")"

# (c) programs built against the install, each a 2-rank AllReduce.
export PKG_CONFIG_PATH=$LIB/pkgconfig
[ "$(pkg-config --modversion weft)" = "$VERSION" ] && ok "pkg-config --modversion weft: $VERSION" ||
	fail "pkg-config --modversion weft: $(pkg-config --modversion weft 2>&1)"
run2() { # NAME PROGRAM: two ranks, each says it is correct
	if "$P/bin/weft-run" -np 2 "$2" >"$OUT/$1.out" 2>&1 && [ "$(grep -c 'allreduce of 1000 doubles correct' "$OUT/$1.out")" = 2 ]; then
		ok "$1: 2-rank AllReduce correct"
	else
		fail "$1: $(cat "$OUT/$1.out")"
	fi
}
APP=$REPO/examples/cmake/app.c
cc "$APP" $(pkg-config --cflags --libs weft) -Wl,-rpath,"$LIB" -o "$OUT/app-pc" && run2 pkg-config "$OUT/app-pc" ||
	fail "cc with pkg-config"
if cc "$APP" $(pkg-config --cflags weft) "$LIB/libweft.a" $(pkg-config --static --libs weft | sed 's/-lweft\b//') \
	-o "$OUT/app-static" 2>"$OUT/static.err"; then
	readelf -d "$OUT/app-static" | grep -q 'NEEDED.*libweft' && fail "app-static links libweft.so" || run2 static "$OUT/app-static"
else
	fail "a static link with pkg-config --static: $(head -5 "$OUT/static.err")"
fi
cmake_app() { # DIR ARGS...: configure and build examples/cmake in DIR
	local dir=$1
	shift
	cmake -S "$REPO/examples/cmake" -B "$dir" "$@" >"$dir.log" 2>&1 && cmake --build "$dir" >>"$dir.log" 2>&1
}
if cmake_app "$OUT/cmake" -DCMAKE_PREFIX_PATH="$P"; then
	grep -q "Weft $VERSION from $LIB/cmake/Weft" "$OUT/cmake.log" && ok "find_package(Weft 0.1): $VERSION in $LIB/cmake/Weft" ||
		fail "find_package found another Weft: $(grep 'Weft ' "$OUT/cmake.log")"
	run2 cmake "$OUT/cmake/app"
else
	fail "cmake with find_package(Weft 0.1): $(tail -20 "$OUT/cmake.log")"
fi
for want in 1.0 0.2; do
	mkdir -p "$OUT/v$want"
	printf 'cmake_minimum_required(VERSION 3.13)\nproject(v C)\nfind_package(Weft %s REQUIRED)\n' "$want" >"$OUT/v$want/CMakeLists.txt"
	if cmake -S "$OUT/v$want" -B "$OUT/v$want/b" -DCMAKE_PREFIX_PATH="$P" >"$OUT/v$want.log" 2>&1; then
		fail "find_package(Weft $want) accepted $VERSION"
	elif grep -q "not suitable\|Could not find a configuration file" "$OUT/v$want.log" && grep -q "$VERSION" "$OUT/v$want.log"; then
		ok "find_package(Weft $want) refuses $VERSION"
	else
		fail "find_package(Weft $want): $(tail -5 "$OUT/v$want.log")"
	fi
done
cp -a "$P" "$OUT/moved"
mkdir -p "$OUT/where"
cat >"$OUT/where/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.13)
project(where C)
find_package(Weft 0.1 REQUIRED)
get_target_property(inc Weft::weft INTERFACE_INCLUDE_DIRECTORIES)
get_target_property(loc Weft::weft IMPORTED_LOCATION)
message(STATUS "where: ${inc} ${loc}")
EOF
cmake -S "$OUT/where" -B "$OUT/where/b" -DCMAKE_PREFIX_PATH="$OUT/moved" >"$OUT/where.log" 2>&1
grep -q "where: $OUT/moved/include $OUT/moved/lib/$MA/libweft.so.$VERSION" "$OUT/where.log" &&
	ok "the CMake package moved to another prefix names the files there" ||
	fail "moved CMake package: $(grep -E 'where:|Error' "$OUT/where.log")"

# (d) the Python package.
SITE=$(echo "$P"/lib/python3.*/dist-packages)
want_torch=0
ls "$REPO"/python/weft/_torch_ext*.so >/dev/null 2>&1 && want_torch=1
if PYTHONPATH="$SITE" "$PY" - "$P" "$want_torch" >"$OUT/py.out" 2>&1 <<'PYEOF'; then
import os, sys
import numpy as np
import weft
from weft import _lib
prefix, want_torch = sys.argv[1], sys.argv[2] == "1"
loaded = os.path.realpath(_lib.lib._name)
assert loaded.startswith(os.path.realpath(prefix)), f"loaded {loaded}, not the installed copy"
assert weft.__file__.startswith(prefix), weft.__file__
assert weft.__version__ == weft.version(), (weft.__version__, weft.version())
with weft.Comm(1, weft.get_unique_id(), 0) as c:
    x = np.arange(6, dtype=np.float32)
    c.allreduce(x, op="max")
    assert x.tolist() == [0, 1, 2, 3, 4, 5], x
if want_torch:
    import weft.torch
    assert weft.torch.ProcessGroupWeft
print(f"installed package {weft.__version__} loads {loaded}" + (" and weft.torch" if want_torch else ""))
PYEOF
	ok "$(cat "$OUT/py.out")"
else
	fail "the installed Python package: $(cat "$OUT/py.out")"
fi

# (e) make uninstall: nothing left (the folders may stay).
cd "$REPO"
mv "$P" "$OUT/stage$P"
mk PREFIX="$P" LIBDIR="$LIB" DESTDIR="$OUT/stage" uninstall
left=$(find "$OUT/stage" ! -type d | head -5)
[ -z "$left" ] && ok "make uninstall removed every file" || fail "left after make uninstall: $left"

# (f) the default layout: LIBDIR=PREFIX/lib.
mk PREFIX="$OUT/plain" install-lib
PKG_CONFIG_PATH=$OUT/plain/lib/pkgconfig pkg-config --libs weft | grep -q -- "-L$OUT/plain/lib -lweft" &&
	ok "PREFIX only: pkg-config --libs weft names PREFIX/lib" || fail "PREFIX only: weft.pc $(cat "$OUT/plain/lib/pkgconfig/weft.pc")"
cmake -S "$OUT/where" -B "$OUT/where/plain" -DCMAKE_PREFIX_PATH="$OUT/plain" >"$OUT/plain.log" 2>&1
grep -q "where: $OUT/plain/include $OUT/plain/lib/libweft.so.$VERSION" "$OUT/plain.log" &&
	ok "PREFIX only: the CMake package in PREFIX/lib/cmake/Weft" || fail "PREFIX only: $(grep -E 'where:|Error' "$OUT/plain.log")"

weft_test_end install
