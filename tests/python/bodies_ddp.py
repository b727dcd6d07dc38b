"""Rank bodies for test_ddp.py: DistributedDataParallel on weft and on gloo."""
import datetime
import os
import sys
import threading

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import weft.torch  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "examples"))
import ddp_train  # noqa: E402


def hook_threads():
    seen = set()

    def hook(state, bucket):
        """allreduce, then divide: the future chain DDP's default hook makes
        (@state: the weft process group, None for the default one)."""
        n = dist.get_world_size(state)
        fut = dist.all_reduce(bucket.buffer(), group=state, async_op=True).get_future()

        def divide(f):
            seen.add(threading.get_ident())
            return f.value()[0].div_(n)

        return fut.then(divide)

    return hook, seen


def compare(rank, nranks, port, steps=20, init_method=None, weft_default=True):
    """Three DDP copies of the example's model, same start, same batches:
    on weft, on weft with a comm hook, on gloo. Returns their losses and
    how far their parameters are apart."""
    torch.set_num_threads(1)
    init = init_method or f"tcp://127.0.0.1:{port}"
    dist.init_process_group("weft" if weft_default else "gloo", init_method=init, rank=rank,
                            world_size=nranks, timeout=datetime.timedelta(seconds=120))
    other = dist.new_group(backend="gloo" if weft_default else "weft")
    weft_pg = None if weft_default else other
    gloo_pg = other if weft_default else None
    a = DDP(ddp_train.make_model(), process_group=weft_pg)
    b = DDP(ddp_train.make_model(), process_group=gloo_pg)
    c = DDP(ddp_train.make_model(), process_group=weft_pg)
    hook, seen = hook_threads()
    c.register_comm_hook(weft_pg, hook)
    la, _ = ddp_train.train(a, steps, rank)
    lb, _ = ddp_train.train(b, steps, rank)
    lc, _ = ddp_train.train(c, steps, rank)
    diff = lambda m, n: max((p - q).abs().max().item()  # noqa: E731
                            for p, q in zip(m.parameters(), n.parameters()))
    out = {"weft": la, "gloo": lb, "hook": lc, "weft_vs_gloo": diff(a, b),
           "hook_vs_gloo": diff(c, b), "hook_threads": len(seen),
           "hook_on_main": threading.get_ident() in seen}
    dist.destroy_process_group()
    return out
