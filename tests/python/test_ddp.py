"""DistributedDataParallel on the weft backend against Gloo.

20 steps of examples/ddp_train.py's model at 2 ranks, three copies from the
same start on the same batches: DDP on weft, DDP on weft with a comm hook
(register_comm_hook: all_reduce(...).get_future().then(divide), the
future completing from Weft's side),
and DDP on Gloo. Losses must match step by step, and parameters at the
end, within fp32 tolerance (the reductions add in a different order).
The same across two network namespaces is tests/fabric/test_python_fabric.sh.
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
