#!/usr/bin/python3
"""Run torch's own DistributedTest on Weft, beside Gloo (suite.py says how).

  run.py [--mode weft|gloo-place|gloo|all]... [--list FILE | --tests A,B]
         [-j N] [--start fork|spawn] [--repeat N] [--timeout S] [--logs DIR]
         [--write-baseline]

Each mode runs the tests (every test of DistributedTest._DistTestBase by
default; --list: one name a line, '#' comments) in N worker processes,
each running its share one test at a time, as torch's harness runs one:
3 ranks (WORLD_SIZE) forked or spawned per test. Prints one line per test
that failed, then per mode "N passed, N skipped, N failed" beside Gloo's
counts of the same tests (gloo.txt, the baseline: what Gloo did with every
test here; --write-baseline rewrites it from a gloo run).

Exit 1 when, in a Weft mode, a test that Gloo passes did not pass and
exceptions.txt does not list it for that mode with a reason; when a test
failed that is not listed; or when a listed test passed (the list only
shrinks: take it out). A gloo run that differs from the baseline says so.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
MODES = ("gloo", "weft", "gloo-place")


def read_lines(path):
    with open(path) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if line:
                yield line


def read_exceptions(path):
    """{(mode, test): reason}; a line is 'MODE TEST REASON', MODE weft,
    gloo-place or both."""
    out = {}
    for n, line in enumerate(read_lines(path), 1):
        parts = line.split(None, 2)
        if len(parts) < 3 or parts[0] not in ("weft", "gloo-place", "both"):
            sys.exit(f"{path}:{n}: want 'weft|gloo-place|both TEST REASON', got: {line}")
        for mode in ("weft", "gloo-place") if parts[0] == "both" else (parts[0],):
            out[(mode, parts[1])] = parts[2]
    return out


def read_baseline(path):
    if not os.path.exists(path):
        return {}
    return dict(line.split(None, 1) for line in read_lines(path))


# ---- a worker: run tests in this process, print one RESULT line each

def worker(tests):
    import unittest

    import suite

    suite.TorchSuite.setUpClass()
    for name in tests:
        t0 = time.time()
        result = unittest.TestResult()
        suite.TorchSuite(name).run(result)
        outcome, detail = "pass", ""
        if result.errors or result.failures:
            outcome = "fail"
            detail = (result.errors + result.failures)[0][1]
        elif result.skipped:
            outcome, detail = "skip", result.skipped[0][1]
        line = {"test": name, "outcome": outcome, "seconds": round(time.time() - t0, 2),
                "detail": detail[-3000:]}
        print("RESULT " + json.dumps(line), flush=True)


# ---- the driver

def env_for(mode, args):
    env = dict(os.environ)
    env["WEFT_TORCH_SUITE_MODE"] = mode
    env["WEFT_TORCH_SUITE_START"] = args.start
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(REPO, "python"), HERE])
    env["DISTRIBUTED_TESTS_DEFAULT_TIMEOUT"] = str(args.timeout)
    env.setdefault("WEFT_SOCKET_IFNAME", "lo")
    env.setdefault("OMP_NUM_THREADS", "1")  # 3 ranks per test on a few cores
    env.setdefault("MASTER_ADDR", "127.0.0.1")
    for k in ("RANK", "LOCAL_RANK", "TORCHELASTIC_RUN_ID", "WEFT_RANK", "WEFT_NRANKS",
              "WEFT_ROOT", "TORCH_DISTRIBUTED_DEBUG"):
        env.pop(k, None)
    return env


def run_mode(mode, tests, args):
    """{test: (outcome, detail, seconds)} from args.jobs workers."""
    shares = [(tests * args.repeat)[i::args.jobs] for i in range(args.jobs)]
    procs = []
    for i, share in enumerate(s for s in shares if s):
        log = open(os.path.join(args.logs, f"{mode}.{i}.log"), "w")
        cmd = [sys.executable, os.path.abspath(__file__), "--worker"] + share
        procs.append((subprocess.Popen(cmd, env=env_for(mode, args), stdout=subprocess.PIPE,
                                       stderr=log, text=True, cwd=args.logs), log))
    results = {}
    for p, log in procs:
        for line in p.stdout:
            if line.startswith("RESULT "):
                r = json.loads(line[7:])
                if r["test"] not in results or r["outcome"] == "fail":  # the worst of repeats
                    results[r["test"]] = (r["outcome"], r["detail"], r["seconds"])
        p.wait()
        log.close()
    for t in tests:  # a worker that died took its remaining tests with it
        results.setdefault(t, ("fail", f"no result (worker died; see {args.logs})", 0))
    return results


def counts(outcomes):
    outcomes = list(outcomes)
    return {k: outcomes.count(k) for k in ("pass", "skip", "fail")}


def fmt(c):
    return f"{c['pass']} passed, {c['skip']} skipped, {c['fail']} failed"


def check_mode(mode, results, baseline, exceptions):
    """The problems of a Weft mode's results, as lines."""
    problems = []
    for t, (outcome, detail, _) in sorted(results.items()):
        listed = exceptions.get((mode, t))
        gloo_passes = baseline.get(t) == "pass"
        if outcome == "pass" and listed:
            problems.append(f"{mode} {t}: passes but exceptions.txt lists it ({listed}): "
                            "take it out")
        elif outcome == "fail" and not listed:
            problems.append(f"{mode} {t}: FAILED\n{detail}")
        elif outcome == "skip" and gloo_passes and not listed:
            problems.append(f"{mode} {t}: skipped ({detail.strip()}) but Gloo passes it: "
                            "make it pass or list it with the reason")
    return problems


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", action="append", choices=MODES + ("all",))
    ap.add_argument("--list", help="tests to run, one a line")
    ap.add_argument("--tests", help="tests to run, comma-separated")
    ap.add_argument("-j", "--jobs", type=int, default=1)
    ap.add_argument("--start", choices=("fork", "spawn"), default="fork")
    ap.add_argument("--repeat", type=int, default=1, help="run each test N times (the worst "
                    "outcome counts)")
    ap.add_argument("--timeout", type=int, default=300, help="per test, seconds")
    ap.add_argument("--logs", help="directory for the workers' output")
    ap.add_argument("--exceptions", default=os.path.join(HERE, "exceptions.txt"))
    ap.add_argument("--baseline", default=os.path.join(HERE, "gloo.txt"))
    ap.add_argument("--write-baseline", action="store_true")
    ap.add_argument("--report", help="write every result (mode, test, outcome, seconds) here")
    ap.add_argument("--worker", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    if args.worker is not None:
        return worker(args.worker)

    modes = [m for m in (args.mode or ["all"]) for m in (MODES if m == "all" else (m,))]
    if args.write_baseline and "gloo" not in modes:
        modes.insert(0, "gloo")
    args.logs = args.logs or tempfile.mkdtemp(prefix="torch_suite.")
    os.makedirs(args.logs, exist_ok=True)
    if args.tests:
        tests = args.tests.split(",")
    elif args.list:
        tests = list(read_lines(args.list))
    else:
        env = env_for("gloo", args)
        out = subprocess.run([sys.executable, "-c", "import suite; print(*suite.test_names())"],
                             env=env, capture_output=True, text=True, check=True, cwd=args.logs)
        tests = out.stdout.split()
    exceptions = read_exceptions(args.exceptions)
    baseline = read_baseline(args.baseline)
    problems, summary, report = [], [], []
    for mode in modes:
        t0 = time.time()
        results = run_mode(mode, tests, args)
        report += [f"{mode} {t} {o} {sec}" for t, (o, _, sec) in sorted(results.items())]
        c = counts(o for o, _, _ in results.values())
        line = f"{mode:>10}: {fmt(c)} of {len(tests)} in {time.time() - t0:.0f} s"
        if mode != "gloo" and baseline:
            line += f"   (gloo: {fmt(counts(baseline.get(t, '?') for t in tests))})"
        summary.append(line)
        for t, (outcome, detail, sec) in sorted(results.items()):
            if outcome == "fail":
                print(f"FAIL {mode} {t} ({sec} s)")
        if mode == "gloo":
            differ = [t for t in tests if baseline.get(t) != results[t][0]]
            if args.write_baseline:
                keep = {t: o for t, o in baseline.items() if t not in results}
                keep.update({t: r[0] for t, r in results.items()})
                with open(args.baseline, "w") as f:
                    f.write("# What Gloo did with each test here (run.py --write-baseline)\n")
                    f.writelines(f"{t} {o}\n" for t, o in sorted(keep.items()))
            elif differ:
                summary.append(f"      gloo differs from {args.baseline} on: {' '.join(differ)}")
        else:
            problems += check_mode(mode, results, baseline, exceptions)
    if args.report:
        with open(args.report, "w") as f:
            f.write("\n".join(report) + "\n")
    for p in problems:
        print(p)
    print("\n".join(summary))
    print(f"logs: {args.logs}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
