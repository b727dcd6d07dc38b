"""Rank bodies for test_shrink.py: losing a rank and going on, from
Python (weft.Comm.revoke/shrink/failed_ranks) and from torch.distributed
(weft.torch.shrink)."""

import os
import signal
import time

import numpy as np

import weft


def die():
    os.kill(os.getpid(), signal.SIGKILL)


def numpy_shrink(rank, nranks, port, victim):
    comm = weft.init(timeout=20)
    comm.barrier()
    if rank == victim:
        die()
    t0 = time.monotonic()
    raised = None
    try:
        for _ in range(200):
            comm.allreduce(np.ones(1 << 18, dtype=np.float32))
    except weft.WeftError as e:
        raised = type(e).__name__
    comm.revoke()
    try:
        comm.allreduce(np.ones(4, dtype=np.float32))
        after = None
    except weft.WeftRevokedError as e:
        after = str(e)
    new = comm.shrink()
    x = np.full(8, rank + 1, dtype=np.float32)
    new.allreduce(x)
    out = {"raised": raised, "after": after, "rank": new.rank, "size": new.size,
           "sum": float(x[0]), "failed": comm.failed_ranks(),
           "seconds": time.monotonic() - t0}
    new.destroy()
    comm.destroy()
    return out


def numpy_excluded(rank, nranks, port):
    """A healthy communicator shrunk by its list: the excluded rank gets None."""
    comm = weft.init(timeout=20)
    new = comm.shrink(exclude=[0])
    out = {"none": new is None}
    if new is not None:
        x = np.ones(4, dtype=np.float64)
        new.allreduce(x)
        out.update(rank=new.rank, size=new.size, sum=float(x[0]))
        new.destroy()
    x = np.ones(4, dtype=np.float64)
    comm.allreduce(x)  # the parent goes on
    out["parent_sum"] = float(x[0])
    comm.destroy()
    return out


def torch_shrink(rank, nranks, port, victim):
    import datetime

    import torch
    import torch.distributed as dist

    import weft.torch

    dist.init_process_group("weft", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=nranks, timeout=datetime.timedelta(seconds=20))
    old = dist.distributed_c10d._get_default_group()
    dist.barrier()
    if rank == victim:
        die()
    raised = None
    try:
        for _ in range(200):
            dist.all_reduce(torch.ones(1 << 18))
    except RuntimeError as e:
        raised = str(e)
    new = weft.torch.shrink()
    t = torch.full((8,), float(rank + 1))
    dist.all_reduce(t)  # the default group is the new one
    b = torch.tensor([float(dist.get_rank() + 10)])
    dist.broadcast(b, src=1)
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    ddp = torch.nn.parallel.DistributedDataParallel(model)
    ddp(torch.full((3, 4), float(rank))).sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    g = torch.cat([x.flatten() for x in grads])
    gathered = [torch.zeros_like(g) for _ in range(dist.get_world_size())]
    dist.all_gather(gathered, g)
    return {"raised": raised, "rank": dist.get_rank(), "size": dist.get_world_size(),
            "is_new": new is dist.distributed_c10d._get_default_group(),
            "sum": float(t[0]), "bcast": float(b[0]),
            "ddp_same": all(torch.equal(gathered[0], x) for x in gathered),
            "failed": [list(f) for f in weft.torch.failed_ranks(old)]}
