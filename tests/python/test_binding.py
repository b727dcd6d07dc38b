"""The weft package (python/weft) against numpy.

- every collective x datatype x op at 1-4 ranks, blocking and non-blocking,
  in place and out of place; calls that only move bytes with any element
  type (complex and bool included);
- CPU torch tensors (bf16 too) through the same calls, without copies, and
  a clear error for non-contiguous and non-CPU tensors;
- weft.topo() of a communicator and of the host, split, launch_info;
- argument errors raised before any call (TypeError, ValueError) and
  Weft's own errors as WeftError with its message;
- failures of the job as exceptions, not hangs: mismatched sizes, a peer
  that dies, a peer that comes too late for the timeout.
"""
import importlib.util

import numpy as np
import pytest

import rankrun
import weft

HAVE_TORCH = importlib.util.find_spec("torch") is not None


@pytest.mark.parametrize("nranks", [1, 2, 3, 4])
def test_matrix(nranks):
    values = rankrun.check(rankrun.run(nranks, "bodies_numpy", "matrix", timeout=180))
    failures = [f for v in values for f in v["failures"]]
    assert not failures, "\n".join(failures[:20])
    assert all(v["cases"] > 150 for v in values)


@pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed for this interpreter")
def test_torch_tensors():
    for v in rankrun.check(rankrun.run(2, "bodies_numpy", "torch_tensors")):
        assert v["ok"] and not v["errors"], v


def test_topo_split_launch():
    values = rankrun.check(rankrun.run(3, "bodies_numpy", "topo"))
    for r, v in enumerate(values):
        assert v["nranks"] == 3 and v["ranks"] == 3 and v["hostname"]
        assert v["subsize"] == (2 if r % 2 == 0 else 1)
        assert v["launch"] == "weft"


@pytest.fixture(scope="module")
def solo():
    env = {"WEFT_SOCKET_IFNAME": "lo"}
    import os

    old = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    comm = weft.Comm(1, weft.get_unique_id(), 0)
    yield comm
    comm.destroy()
    for k, v in old.items():
        if v is None:
            os.environ.pop(k, None)


def test_argument_errors(solo):
    x = np.ones(8, dtype=np.float32)
    with pytest.raises(TypeError, match="complex64 cannot be reduced"):
        solo.allreduce(np.ones(4, dtype=np.complex64))
    with pytest.raises(ValueError, match="recvbuf has 4 elements, expected 8"):
        solo.allreduce(x, np.empty(4, dtype=np.float32))
    with pytest.raises(TypeError, match="element types differ"):
        solo.allreduce(x, np.empty(8, dtype=np.float64))
    with pytest.raises(ValueError, match="non-contiguous"):
        solo.allreduce(np.ones((4, 4), dtype=np.float32)[:, 1])
    ro = np.ones(4, dtype=np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        solo.allreduce(ro)
    with pytest.raises(ValueError, match="unknown reduction 'mean'"):
        solo.allreduce(x, op="mean")
    with pytest.raises(TypeError, match="buffer protocol"):
        solo.broadcast(object())


def test_weft_errors(solo):
    with pytest.raises(weft.WeftError) as e:
        solo.broadcast(np.ones(4), root=3)
    assert e.value.status == weft.Status.INVALID_ARG
    assert "weft_broadcast: root 3 is not a rank" in str(e.value)
    with pytest.raises(weft.WeftError, match="invalid argument"):
        weft.Comm(2, b"\0" * 128, 5)
    with pytest.raises(ValueError, match="unique_id: 3 bytes"):
        weft.Comm(2, b"abc", 0)
    # The communicator is still usable after rejected calls.
    x = np.arange(5, dtype=np.int64)
    solo.allreduce(x)
    assert x.tolist() == [0, 1, 2, 3, 4]


def test_host_and_settings():
    assert weft.topo()["hostname"]
    names = {s["name"] for s in weft.settings()}
    assert {"WEFT_PROGRESS_THREAD", "WEFT_TIMEOUT"} <= names
    assert weft.version() == weft.__version__


def test_mismatched_sizes():
    values = rankrun.check(rankrun.run(2, "bodies_numpy", "mismatch", timeout=60))
    raised = [v for v in values if v["raised"]]
    assert raised, values
    # The message names what differs: the sizes a transport saw, or, from
    # the shared-memory algorithms' call check, the count.
    assert any(
        "bytes" in v["message"] or "different count" in v["message"] for v in raised
    ), raised


def test_dead_peer():
    values = rankrun.check(rankrun.run(2, "bodies_numpy", "dead_peer", timeout=60)[:1])
    v = values[0]
    assert v["raised"] in ("WeftRemoteError", "WeftError", "WeftTimeoutError"), v
    assert v["seconds"] < 30, v


def test_timeout():
    v = rankrun.check(rankrun.run(2, "bodies_numpy", "late_peer", timeout=60))[0]
    assert v["raised"] == "WeftTimeoutError", v
    assert v["seconds"] < 7, v
    assert "no progress for 2.0 s" in v["message"], v


def test_request_after_destroy(monkeypatch):
    """A request still pending when its communicator is destroyed is freed
    with it (weft.h): waiting on it or testing it raises, never reads the
    freed request."""
    monkeypatch.setenv("WEFT_SOCKET_IFNAME", "lo")
    comm = weft.Comm(1, weft.get_unique_id(), 0)
    x = np.ones(1024, dtype=np.float32)
    waited, tested = comm.iallreduce(x), comm.iallreduce(x)  # posting never runs them
    comm.destroy()
    with pytest.raises(weft.WeftError, match="destroyed before this request completed"):
        waited.wait()
    with pytest.raises(weft.WeftError, match="destroyed before this request completed"):
        tested.test()
