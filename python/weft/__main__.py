"""python3 -m weft: the package's version and library, and what Weft sees.

    python3 -m weft --version           weft 0.1.0 (libweft 0.1.0, /usr/lib/.../libweft.so.0)
    python3 -m weft info                the same, and whether weft.torch can load
    python3 -m weft host [--json]       this host: hwloc, NICs, the leaf above it
    python3 -m weft settings [--json]   every WEFT_* variable, its default and help
    weft-run -np 4 python3 -m weft topo      the job's description (rank 0 prints JSON)

weft-topo(1) is the full tool (text, DOT, rankfiles, models of large
jobs); this entry point is for where only the Python package is
installed (pip) and for checking what an environment loads.
"""

import argparse
import importlib.util
import json
import os
import sys

import weft
from weft import _lib


def _library():
    return os.path.realpath(_lib.lib._name)


def _version_line():
    return f"weft {weft.__version__} (libweft {weft.version()}, {_library()})"


def _info(args):
    torch_ext = importlib.util.find_spec("weft._torch_ext") is not None
    print(f"package  weft {weft.__version__} at {os.path.dirname(weft.__file__)}")
    print(f"library  libweft {weft.version()} at {_library()}")
    print("torch    " + ("extension built: import weft.torch registers the backend \"weft\""
                         if torch_ext else "extension not built: weft.torch is not available"))
    if weft.__version__ != weft.version():
        print("warning: the package and the library are of different versions", file=sys.stderr)
        return 1
    return 0


def _host(args):
    h = weft.host()
    if args.json:
        print(json.dumps(h, indent=1))
        return 0
    for key in ("hostname", "host", "packages", "numa_nodes", "cores", "nic", "leaf",
                "leaf_source", "spine"):
        if h.get(key) not in (None, ""):
            print(f"{key:12} {h[key]}")
    return 0


def _settings(args):
    table = weft.settings()
    if args.json:
        print(json.dumps(table, indent=1))
        return 0
    for s in table:
        default = s.get("default")
        print(f"{s['name']:28} {default if default is not None else '-':10} {s['help']}")
    return 0


def _topo(args):
    with weft.init() as comm:
        doc = weft.topo(comm)
        if comm.rank == 0:
            print(json.dumps(doc, indent=1))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python3 -m weft", description=__doc__.split("\n")[0])
    ap.add_argument("--version", action="store_true", help="print the versions and the library")
    sub = ap.add_subparsers(dest="command")
    sub.add_parser("info", help="the package, the library and the torch extension")
    for name, what in (("host", "this host as Weft sees it"),
                       ("settings", "every WEFT_* variable")):
        p = sub.add_parser(name, help=what)
        p.add_argument("--json", action="store_true", help="JSON instead of text")
    sub.add_parser("topo", help="the job started by a launcher, as JSON (rank 0 prints)")
    args = ap.parse_args(argv)
    if args.version:
        print(_version_line())
        return 0
    if not args.command:
        ap.print_help()
        return 2
    run = {"info": _info, "host": _host, "settings": _settings, "topo": _topo}[args.command]
    try:
        return run(args)
    except weft.WeftError as e:
        print(f"python3 -m weft {args.command}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
