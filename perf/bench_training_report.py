#!/usr/bin/python3
"""bench_training_report.py — one setting's table for perf/bench_training.sh:
per size the uplink bound and each library's time per AllReduce, from the
raw outputs of the runs (RAW/weft-ALGO-TAG.0.out, mpi-TAG.0.out: nccl-tests
rows; gloo-TAG.0.out: perf/ddp_bench's RESULT line).

The bound: over L >= 2 leaves an AllReduce of S bytes must take every
element's partial sum out of each leaf and the result in, and the best
schedule moves 2 (L-1)/L x S over each leaf's uplink each way (S at two
leaves, which is also the least any schedule can: each element's
contribution of a leaf, or its result, must cross once each way); divided
by the uplink's rate (tbf's, which counts the frames' headers too, so TCP
gets about 0.95 of it). Times are the out-of-place means of the perf
programs (every rank's mean; rank 0 prints), Gloo's the slowest rank's mean.
"""

import argparse
import json
import os
import sys


def rows(path):
    """size -> (out-of-place us, #wrong ok) from nccl-tests rows."""
    out = {}
    if not os.path.exists(path):
        return out
    for line in open(path):
        f = line.split()
        if len(f) >= 13 and f[0].isdigit():
            out[int(f[0])] = (float(f[5]), f[8] == "0" and f[12] == "0")
    return out


def gloo_rows(path):
    if not os.path.exists(path):
        return {}
    for line in open(path):
        if line.startswith("RESULT "):
            res = json.loads(line[7:])
            us = res["backends"]["gloo"]["us"]
            return {s: (t, True) for s, t in zip(res.get("sizes", []), us)}
    return {}


def human(n):
    for unit, div in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if n >= div and n % div == 0:
            return "%d%s" % (n // div, unit)
    return str(n)


def cell(x, fmt="%9.1f"):
    return fmt % x if x else "%9s" % "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rate", type=float, required=True, help="uplink bytes/s")
    ap.add_argument("--leaves", type=int, required=True)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--raw", required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--algos", default="auto")
    a = ap.parse_args()
    algos = [x for x in a.algos.split(",") if x]
    weft = {x: rows(os.path.join(a.raw, "weft-%s-%s.0.out" % (x, a.tag))) for x in algos}
    mpi = rows(os.path.join(a.raw, "mpi-%s.0.out" % a.tag))
    gloo = gloo_rows(os.path.join(a.raw, "gloo-%s.0.out" % a.tag))
    factor = 2.0 * (a.leaves - 1) / a.leaves if a.leaves > 1 else 0
    n = a.ranks
    bus = 2.0 * (n - 1) / n if n > 1 else 1.0
    print("# time per AllReduce in ms (out of place); bound: %.2f x S over a %.1f MB/s uplink; "
          "busbw = S/t x %.3f" % (factor, a.rate / 1e6, bus))
    head = "#%7s %8s" % ("size", "bound")
    for x in algos:
        head += " %9s %6s" % ("weft:" + x, "/bound")
    head += " %9s %9s %9s %9s" % ("ompi", "gloo", "weft/ompi", "weft/gloo")
    print(head)
    sizes = sorted(set().union(*[set(w) for w in weft.values()], mpi, gloo))
    first = weft[algos[0]] if algos else {}
    for s in sizes:
        bound = factor * s / a.rate * 1e3
        line = " %7s %8.1f" % (human(s), bound)
        wrong = False
        for x in algos:
            t = weft[x].get(s)
            line += " %s %6s" % (cell(t[0] / 1e3 if t else 0),
                                 "%.2f" % (t[0] / 1e3 / bound) if t and bound else "-")
            wrong |= bool(t and not t[1])
        m, g, w = mpi.get(s), gloo.get(s), first.get(s)
        line += " %s %s" % (cell(m[0] / 1e3 if m else 0), cell(g[0] / 1e3 if g else 0))
        line += " %9s %9s" % ("%.2f" % (m[0] / w[0]) if m and w else "-",
                              "%.2f" % (g[0] / w[0]) if g and w else "-")
        if wrong or (m and not m[1]):
            line += "  WRONG VALUES"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
