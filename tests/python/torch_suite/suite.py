"""torch's own DistributedTest, set up for Weft (run.py drives it).

Importing this module prepares torch's test utilities for the mode in
WEFT_TORCH_SUITE_MODE, then defines TorchSuite, torch's TestDistBackend
with every test of DistributedTest._DistTestBase. Each test starts its
ranks as torch's test_distributed_spawn.py does (spawn), or forked
(WEFT_TORCH_SUITE_START=fork: no interpreter to start per rank, the same
test code). A spawned rank imports this module again, so it is set up the
same way. The modes:

  gloo        torch as it ships, BACKEND=gloo: the baseline.
  weft        BACKEND=weft (import weft.torch registers it), with "weft"
              added to the feature sets a CPU backend that supports DDP
              and subgroups belongs to, and to the lists of backends whose
              profiler events the tests check (Weft's are named as Gloo's,
              "weft:all_reduce").
  gloo-place  BACKEND=gloo, but every group torch makes with Gloo is Weft's:
              ProcessGroupGloo in torch.distributed.distributed_c10d (the
              name c10d calls) is replaced, here and nowhere else, by a
              factory that returns Weft's group. The tests gated to Gloo by
              name then run on Weft. TORCH_DISTRIBUTED_DEBUG=DETAIL's wrapper
              keeps a real Gloo group for its own checks (its C++ type
              demands one). The tests look for Gloo's profiler events by
              name; they find Weft's: "gloo:send" is looked up as
              "weft:send" and reported under the name the test expects.

Nothing in the weft package patches torch: only this runner does.
Debian 12 lacks the expecttest package that torch's test utilities
import; standin/ provides what they use. torch 1.13 enables DDP with
ReplicatedTensor in every test process, whose import fails on Python 3.11
for every backend: DDP stays on its plain path, torch's default.
"""

import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MODES = ("gloo", "weft", "gloo-place")
MODE = os.environ.get("WEFT_TORCH_SUITE_MODE", "weft")
START = os.environ.get("WEFT_TORCH_SUITE_START", "fork")
if MODE not in MODES:
    sys.exit(f"suite.py: WEFT_TORCH_SUITE_MODE={MODE!r} is not one of {', '.join(MODES)}")

os.environ["BACKEND"] = "weft" if MODE == "weft" else "gloo"
os.environ.setdefault("WORLD_SIZE", "3")
if importlib.util.find_spec("expecttest") is None:
    sys.path.insert(0, os.path.join(HERE, "standin"))

# common_utils parses sys.argv when imported: let it see none of ours.
_argv, sys.argv = sys.argv, sys.argv[:1]
try:
    import torch  # noqa: E402
    import torch.distributed as dist  # noqa: E402
    import torch.distributed.distributed_c10d as c10d  # noqa: E402
    import torch.nn.parallel._replicated_tensor_ddp_utils as replicated  # noqa: E402
    from torch.testing._internal import common_distributed  # noqa: E402
finally:
    sys.argv = _argv

if MODE != "gloo":
    import weft.torch  # noqa: E402  (registers the backend "weft")

# torch's _run turns ReplicatedTensor on: keep DDP on its default path.
replicated._set_ddp_with_replicated_tensor = lambda value: None

if MODE == "weft":
    features = common_distributed.DistTestCases.backend_feature
    for feature in ("ddp", "subgroup", "plugin"):
        features[feature].add("weft")

_real_gloo = c10d.ProcessGroupGloo


def _weft_in_glooss_place(store, rank, size, timeout=c10d.default_pg_timeout):
    return weft.torch.ProcessGroupWeft(store, rank, size, timeout)


if MODE == "gloo-place":
    c10d.ProcessGroupGloo = _weft_in_glooss_place
    _wrap = c10d._create_process_group_wrapper

    def _wrapper_with_real_gloo(*args, **kwargs):
        # ProcessGroupWrapper's C++ constructor takes a ProcessGroupGloo.
        c10d.ProcessGroupGloo = _real_gloo
        try:
            return _wrap(*args, **kwargs)
        finally:
            c10d.ProcessGroupGloo = _weft_in_glooss_place

    c10d._create_process_group_wrapper = _wrapper_with_real_gloo

_argv, sys.argv = sys.argv, sys.argv[:1]
try:
    from torch.testing._internal.distributed import distributed_test as dt  # noqa: E402
finally:
    sys.argv = _argv

if MODE == "weft":
    for allow in (dt.PROFILING_SUPPORTED_BACKENDS, dt.SEND_RECV_PROFILING_SUPPORTED_BACKENDS):
        allow.append("weft")

if MODE == "gloo-place":
    _events = dt.get_profiling_event

    def _weft_events(postfix, profiler):
        found = _events(postfix.replace("gloo:", "weft:"), profiler)
        for e in found:
            e.name = e.name.replace("weft:", "gloo:")
        return found

    dt.get_profiling_event = _weft_events


class TorchSuite(dt.TestDistBackend, dt.DistributedTest._DistTestBase):
    def setUp(self):
        super().setUp()
        ctx = torch.multiprocessing.get_context(START)
        self._start_processes(ctx.Process)


def test_names():
    return sorted(n for n in dir(TorchSuite) if n.startswith("test_"))


__all__ = ["TorchSuite", "test_names", "MODE", "dist"]
