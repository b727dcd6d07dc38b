"""The torch.distributed backend "weft" (weft.torch) against Gloo.

- every implemented collective on the same tensors as Gloo (where Gloo
  has none, reduce_scatter and _all_gather_base, against Gloo's
  all_reduce/all_gather): all_reduce and reduce for every op x dtype the
  issue lists, all_reduce_coalesced, all_gather (separate tensors and one
  buffer) and _all_gather_base, broadcast, gather, scatter, reduce_scatter
  (list and _reduce_scatter_base), all_to_all_single (equal and uneven),
  all_to_all lists, barrier, send/recv and isend/irecv, at 2 and 3 ranks;
- async Work: wait, is_completed, is_success, get_future (before and after
  completion), a .then() callback that runs off the caller's thread;
- new_group(backend="weft") on a subset; weft.topo of the process group;
- clear errors: non-contiguous and non-CPU tensors, a type that cannot be
  reduced, an unsupported op, several tensors to all_reduce, splits that do
  not add up; the group stays usable;
- WEFT_WAIT=auto: the backend passes torch.get_num_threads() as the
  rank's compute threads, and the ranks' threads against the CPUs decide
  whether waits sleep (1 thread each on enough CPUs: spin; every CPU per
  rank: sleep), as weft.topo of the group says;
- the timeout: a rank that never joins fails the other's all_reduce in
  about the process group's timeout; Work.wait(timeout) returns control,
  having written the flight recorder (WEFT_TRACE_DIR); weft.dump(pg);
- a dead peer and mismatched sizes raise instead of hanging.
"""
import importlib.util

import pytest

import rankrun

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch is not installed for this interpreter")


def run(nranks, body, timeout=240):
    return rankrun.run(nranks, "bodies_torch", body, timeout=timeout, weft_env=False)


@pytest.mark.parametrize("nranks", [2, 3])
def test_vs_gloo(nranks):
    values = rankrun.check(run(nranks, "vs_gloo"))
    failures = [f for v in values for f in v["failures"]]
    assert not failures, "\n".join(failures[:30])
    assert all(v["cases"] > 200 for v in values), values


def test_compute_threads_decide_the_wait():
    values = rankrun.check(run(2, "compute_threads", timeout=120))
    for v in values:
        first, second = v["first"], v["second"]
        assert first["compute_threads"] == 1, v
        assert first["waits"] == ("block" if 2 > v["cpus"] else "spin"), v
        assert second["compute_threads"] == v["threads"] >= v["cpus"], v
        assert second["oversubscribed"] and second["waits"] == "block", v
        assert v["sum_ok"], v


def test_timeout():
    v = rankrun.check(run(2, "timeout", timeout=60))[0]
    assert v["raised"] and "timeout" in v["raised"], v
    assert "no progress for 3.0 s" in v["raised"], v
    assert v["seconds"] < 10, v


def test_wait_timeout(tmp_path):
    values = rankrun.check(rankrun.run(2, "bodies_torch", "wait_timeout", timeout=60,
                                       weft_env=False, env={"WEFT_TRACE_DIR": str(tmp_path)}))
    assert values[0]["raised"] and "not complete after 200 ms" in values[0]["raised"], values
    assert all(v["ok"] for v in values), values
    # the timeout wrote the flight recorder: the all_reduce in flight
    assert values[0]["in_flight"] == ["allreduce"], values
    # weft.dump(pg, path) after it: the all_reduce, done, is the last operation
    assert all(v["dumped_calls"] == [["allreduce", "done"]] for v in values), values


def test_dead_peer():
    res = run(2, "dead_peer", timeout=90)
    v = rankrun.check(res[:1])[0]
    assert v["raised"], v
    assert v["seconds"] < 40, v


def test_mismatched_sizes():
    values = rankrun.check(run(2, "mismatch", timeout=90))
    raised = [v["raised"] for v in values if v["raised"]]
    assert raised, values
    # The sizes a transport saw, or the shared-memory call check's count.
    assert any("bytes" in r or "different count" in r for r in raised), raised


def test_group_dropped_in_a_future_callback():
    """A future callback that drops the last reference to the process group
    runs ~Core on the group's completion thread: the process must go on and
    end cleanly, every future marked (tests/python/pg_dropped.py)."""
    import os
    import subprocess
    import sys

    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, MALLOC_PERTURB_="204",
               PYTHONPATH=os.pathsep.join([os.path.join(here, "..", "..", "python"), here]))
    out = subprocess.run([sys.executable, os.path.join(here, "pg_dropped.py")], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "ok" in out.stdout, out.stdout + out.stderr


def test_group_dropped_with_operations_pending():
    """The same with operations still pending when the group goes: ~Core
    fails them, and their futures are marked (they used to be dropped with
    the queue, and a wait on them never returned)."""
    values = [r.value for r in run(2, "dropped_in_callback", timeout=90)]
    assert all(v and v["ok"] for v in values), values
