"""DistributedDataParallel on the weft backend against Gloo.

20 steps of examples/ddp_train.py's model at 2 ranks, three copies from the
same start on the same batches: DDP on weft, DDP on weft with a comm hook
(register_comm_hook: all_reduce(...).get_future().then(divide), the
future completing from Weft's side),
and DDP on Gloo. Losses must match step by step, and parameters at the
end, within fp32 tolerance (the reductions add in a different order).
The same across two network namespaces is tests/fabric/test_python_fabric.sh.

DDP's details at 2 ranks (a sum of two is the same whatever the order, so
Weft must give Gloo's parameters to the last bit): the comm hooks
allreduce_hook, fp16_compress_hook and PowerSGD (whose callbacks wait for
further all_reduces: the group's completion threads grow for them),
no_sync, static_graph, join() over uneven inputs. torchrun --max_restarts
brings a weft job back after one of its workers is SIGKILLed.
"""
import importlib.util

import pytest

import rankrun

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None, reason="torch is not installed for this interpreter")


def check_close(v):
    for name in ("weft", "hook"):
        for step, (x, y) in enumerate(zip(v[name], v["gloo"])):
            assert abs(x - y) <= 1e-5 * max(1.0, abs(y)), (name, step, x, y)
    assert v["weft_vs_gloo"] < 1e-5 and v["hook_vs_gloo"] < 1e-5, v
    assert v["hook_threads"] >= 1, v  # the hook's callbacks ran (inline when already done)
    assert v["weft"][-1] < v["weft"][0], "the model did not learn"


@pytest.mark.parametrize("weft_default", [True, False], ids=["weft-default", "weft-subgroup"])
def test_ddp_matches_gloo(weft_default):
    values = rankrun.check(rankrun.run(2, "bodies_ddp", "compare",
                                       {"weft_default": weft_default}, timeout=300,
                                       weft_env=False))
    for v in values:
        check_close(v)


def run_example(backend, launcher, tmp_path, steps=30):
    """examples/ddp_train.py at 2 ranks under weft-run or torchrun; rank 0's
    loss per step."""
    import os
    import subprocess

    log = tmp_path / f"{backend}-{launcher}.log"
    example = os.path.join(rankrun.REPO, "examples", "ddp_train.py")
    args = [example, "--backend", backend, "--steps", str(steps), "--log", str(log)]
    if launcher == "weft-run":
        build = os.environ.get("WEFT_BUILD", "build")
        cmd = [os.path.join(rankrun.REPO, build, "weft-run"), "-np", "2", rankrun.PYTHON] + args
    else:  # Debian's torch 1.13 under Python 3.11 needs --redirects/--tee
        cmd = [rankrun.PYTHON, "-m", "torch.distributed.run", "--nproc_per_node", "2",
               "--master_port", str(rankrun.free_port()), "--redirects", "1", "--tee", "1"] + args
    p = subprocess.run(cmd, env=rankrun.base_env(), capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-3000:]
    assert f"{backend}: 2 ranks, {steps} steps" in p.stdout, p.stdout
    return [float(line.split()[1]) for line in log.read_text().splitlines()]


@pytest.mark.parametrize("launcher", ["weft-run", "torchrun"])
def test_example_matches_gloo(launcher, tmp_path):
    weft_losses = run_example("weft", launcher, tmp_path)
    gloo_losses = run_example("gloo", launcher, tmp_path)
    assert len(weft_losses) == len(gloo_losses) == 30
    for step, (x, y) in enumerate(zip(weft_losses, gloo_losses)):
        assert abs(x - y) <= 1e-5 * max(1.0, abs(y)), (step, x, y)
    assert weft_losses[-1] < weft_losses[0]


def test_ddp_details_bitwise_as_gloo():
    """Comm hooks (allreduce_hook, fp16_compress_hook, PowerSGD), no_sync,
    static_graph and join() on uneven inputs: DDP on weft ends with Gloo's
    parameters to the last bit (2 ranks, where the sums are the same
    whatever their order)."""
    values = rankrun.check(rankrun.run(2, "bodies_ddp", "ddp_details", timeout=300,
                                       weft_env=False))
    for v in values:
        assert len(v) == 7, v
        bad = {k: r for k, r in v.items() if not r["bitwise"]}
        assert not bad, bad


def test_torchrun_restarts_a_weft_job(tmp_path):
    """torchrun --max_restarts 1: rank 1 is SIGKILLed in the first attempt;
    the agent restarts the workers and the second attempt trains to the end
    on a new weft group, its ranks in step."""
    import json
    import os
    import subprocess

    out = tmp_path / "result.jsonl"
    worker = os.path.join(rankrun.HERE, "elastic_worker.py")
    cmd = [rankrun.PYTHON, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node",
           "2", "--max_restarts", "1", "--monitor_interval", "1",
           "--master_port", str(rankrun.free_port()), "--redirects", "1", "--tee", "1",
           worker, "--out", str(out)]
    env = rankrun.base_env({"WEFT_TIMEOUT": "20"})
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    log = p.stdout[-3000:] + p.stderr[-6000:]
    assert p.returncode == 0, log
    assert "failed (exitcode:" in p.stderr, log  # the first attempt ended in failure
    # the survivor of the first attempt failed naming the dead rank, in bounded time
    assert "peer rank 1 (pid" in p.stderr and "died" in p.stderr, log
    lines = [json.loads(x) for x in out.read_text().splitlines()]
    assert [x["attempt"] for x in lines] == [1], lines  # only the restarted one ended
    v = lines[0]
    assert len(v["losses"]) == 8 and v["losses"][-1] < v["losses"][0], v
    assert v["spread"] == 0.0, v
