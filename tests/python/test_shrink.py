"""Losing a rank and going on, from Python (weft.Comm.shrink) and from
torch.distributed (weft.torch.shrink), and the example training loop
(examples/elastic_train.py) that loses a rank and keeps its replicas
bitwise identical."""
import importlib.util
import os
import subprocess
import sys

import pytest

import rankrun

HAVE_TORCH = importlib.util.find_spec("torch") is not None
HAVE_EXT = any(f.startswith("_torch_ext") for f in os.listdir(os.path.join(rankrun.REPO, "python",
                                                                             "weft")))
ENV = {"WEFT_PEER_DEAD": "1"}


@pytest.mark.parametrize("victim", [0, 2])
def test_numpy_shrink(victim):
    results = rankrun.run(4, "bodies_shrink", "numpy_shrink", {"victim": victim}, env=ENV,
                          timeout=90)
    assert results[victim].code == -9, results[victim].describe()
    values = rankrun.check([r for r in results if r.rank != victim])
    survivors = [r for r in range(4) if r != victim]
    for old, v in zip(survivors, values):
        assert v["raised"] in ("WeftRemoteError", "WeftRevokedError"), v
        assert v["after"] and "revoked" in v["after"], v
        assert v["size"] == 3 and v["rank"] == survivors.index(old), v
        assert v["sum"] == sum(r + 1 for r in survivors), v
        assert [victim, "killed"] == list(v["failed"][0][:2]), v
        assert v["seconds"] < 30, v


def test_numpy_excluded():
    values = rankrun.check(rankrun.run(3, "bodies_shrink", "numpy_excluded", env=ENV,
                                       timeout=60))
    assert values[0] == {"none": True, "parent_sum": 3.0}, values[0]
    for r in (1, 2):
        assert values[r] == {"none": False, "rank": r - 1, "size": 2, "sum": 2.0,
                             "parent_sum": 3.0}, values[r]


@pytest.mark.skipif(not (HAVE_TORCH and HAVE_EXT), reason="torch or weft's torch extension missing")
def test_torch_shrink():
    results = rankrun.run(4, "bodies_shrink", "torch_shrink", {"victim": 1}, env=ENV,
                          weft_env=False, timeout=120)
    assert results[1].code == -9, results[1].describe()
    values = rankrun.check([r for r in results if r.rank != 1])
    for old, v in zip((0, 2, 3), values):
        assert v["raised"], v
        assert v["size"] == 3 and v["rank"] == (0, 2, 3).index(old) and v["is_new"], v
        assert v["sum"] == 1 + 3 + 4 and v["bcast"] == 11.0, v
        assert v["ddp_same"], v
        assert v["failed"][0][:2] == [1, "killed"], v


@pytest.mark.skipif(not (HAVE_TORCH and HAVE_EXT), reason="torch or weft's torch extension missing")
def test_elastic_train_example():
    """weft-run --keep-going: rank 0 (whose process holds the bootstrap root
    and torch's store) is killed (SIGKILL) at step 6 of 16; the others
    shrink, split the data again and finish with identical replicas."""
    build = os.environ.get("WEFT_BUILD", "build")
    if not os.path.isabs(build):
        build = os.path.join(rankrun.REPO, build)
    cmd = [os.path.join(build, "weft-run"), "--keep-going", "-np", "4", sys.executable,
           os.path.join(rankrun.REPO, "examples", "elastic_train.py"), "--steps", "16",
           "--die", "0:6"]
    env = rankrun.base_env(ENV)
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=180)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "step 6, " in out and "lost rank 0 (killed)" in out, out
    assert "replicas identical on 3 ranks: yes" in out, out
    assert "recovery took" in out, out
