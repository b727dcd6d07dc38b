"""Run a test body on N rank processes and collect how each one ended.

Each rank is ``python3 -m rankmain MODULE FUNCTION ARGS`` (Debian's
interpreter, the one running pytest), with PYTHONPATH pointing at the
package (python/) and these helpers. ``run()`` returns one Result per rank;
ranks still alive at the deadline are killed and reported as hung, so a
test fails instead of hanging. Traffic stays on loopback
(WEFT_SOCKET_IFNAME=lo, the root and the c10d store on 127.0.0.1).
"""

import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PYTHON = sys.executable


class Result:
    def __init__(self, rank, code, out, err, hung):
        self.rank, self.code, self.out, self.err, self.hung = rank, code, out, err, hung
        self.value = None
        for line in out.splitlines():
            if line.startswith("RESULT "):
                self.value = json.loads(line[7:])

    def describe(self):
        what = "hung (killed)" if self.hung else f"exit {self.code}"
        tail = "\n".join(self.err.strip().splitlines()[-(60 if self.hung else 25):])
        return f"rank {self.rank}: {what}\n{tail}"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env(extra=None):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(REPO, "python"), HERE])
    env.setdefault("WEFT_SOCKET_IFNAME", "lo")
    env.setdefault("WEFT_TIMEOUT", "60")
    env.setdefault("OMP_NUM_THREADS", "1")  # 2 cores, several ranks
    # A rank that hangs is sent SIGABRT before it is killed: its Python
    # stacks (every thread's) then end its stderr, which describe() shows.
    env.setdefault("PYTHONFAULTHANDLER", "1")
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT",
              "TORCHELASTIC_RUN_ID", "WEFT_RANK", "WEFT_NRANKS", "WEFT_ROOT"):
        env.pop(k, None)
    env.update(extra or {})
    return env


def run(nranks, module, function, args=None, env=None, timeout=120, weft_env=True,
        rank_env=None):
    """Run module.function(rank, nranks, port, **args) on each rank.
    weft_env: WEFT_RANK/WEFT_NRANKS/WEFT_ROOT/WEFT_SECRET set (for
    weft.init()); otherwise the body gets the port for its own rendezvous.
    rank_env(rank) may add variables per rank."""
    port = free_port()
    secret = secrets.token_hex(8)
    procs = []
    for r in range(nranks):
        e = base_env(env)
        if weft_env:
            e.update(WEFT_RANK=str(r), WEFT_NRANKS=str(nranks),
                     WEFT_ROOT=f"127.0.0.1:{port}", WEFT_SECRET=secret)
        if rank_env:
            e.update(rank_env(r))
        cmd = [PYTHON, "-m", "rankmain", module, function, str(r), str(nranks), str(port),
               json.dumps(args or {})]
        procs.append(subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, text=True, cwd=HERE))
    deadline = time.monotonic() + timeout
    results = []
    for r, p in enumerate(procs):
        try:
            out, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
            results.append(Result(r, p.returncode, out, err, False))
        except subprocess.TimeoutExpired:
            for q in procs:
                if q.poll() is None:
                    q.send_signal(signal.SIGABRT)  # faulthandler: the stacks
            time.sleep(2)
            for q in procs:
                if q.poll() is None:
                    q.kill()
            out, err = p.communicate()
            results.append(Result(r, p.returncode, out, err, True))
    return results


def check(results):
    bad = [r for r in results if r.hung or r.code != 0]
    assert not bad, "\n\n".join(r.describe() for r in bad)
    return [r.value for r in results]
