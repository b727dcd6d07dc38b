"""A small model trained with DistributedDataParallel on CPU, on Weft or Gloo.

    # torchrun (Debian's torch 1.13 under Python 3.11 needs --redirects/--tee):
    PYTHONPATH=python /usr/bin/python3 -m torch.distributed.run --nproc_per_node 2 \\
        --redirects 1 --tee 1 examples/ddp_train.py --backend weft --steps 300

    # Weft's own launcher (WEFT_RANK/WEFT_NRANKS/WEFT_ROOT), or mpirun/srun:
    PYTHONPATH=python build/weft-run -np 2 /usr/bin/python3 examples/ddp_train.py

Rank and size come from torchrun's RANK/WORLD_SIZE, else from Weft's
launcher table (weft.launch_info(): weft-run, mpirun, srun). The c10d store
is --init-method, else torchrun's MASTER_ADDR/MASTER_PORT (env://), else,
under weft-run, on 127.0.0.1 at WEFT_ROOT's port + 1.

The switch from Gloo is the backend's name: ``import weft.torch`` registers
"weft" and ``dist.init_process_group("weft")`` uses it. Every rank sees a
different, deterministic slice of a synthetic regression task, so the
losses and parameters of a weft run and a gloo run can be compared step by
step (``--log FILE`` writes rank 0's loss per step).
"""

import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.nn.parallel import DistributedDataParallel as DDP

FEATURES, HIDDEN, OUTPUTS, BATCH = 64, 256, 8, 32


def make_model(seed=0):
    """The same initial parameters on every rank and for every backend."""
    torch.manual_seed(seed)
    return nn.Sequential(
        nn.Linear(FEATURES, HIDDEN), nn.ReLU(),
        nn.Linear(HIDDEN, HIDDEN), nn.ReLU(),
        nn.Linear(HIDDEN, OUTPUTS),
    )


def make_batch(step, rank):
    """Rank @rank's batch of step @step (a fixed linear target plus noise)."""
    g = torch.Generator().manual_seed(1_000_003 * step + rank)
    x = torch.randn(BATCH, FEATURES, generator=g)
    w = torch.linspace(-1, 1, FEATURES * OUTPUTS).reshape(FEATURES, OUTPUTS)
    y = x @ w + 0.1 * torch.randn(BATCH, OUTPUTS, generator=g)
    return x, y


def train(model, steps, rank, lr=0.05, on_step=None):
    """SGD on MSE; returns rank's losses and the mean step time (s)."""
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    loss_fn = nn.MSELoss()
    losses, t0 = [], None
    for step in range(steps):
        if step == 1:  # the first step builds DDP's buckets: not timed
            t0 = time.perf_counter()
        x, y = make_batch(step, rank)
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
        if on_step:
            on_step(step, losses[-1])
    per_step = (time.perf_counter() - t0) / (steps - 1) if steps > 1 else 0.0
    return losses, per_step


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", default="weft", choices=["weft", "gloo"])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--init-method",
                   help="c10d rendezvous (default: env:// under torchrun, WEFT_ROOT's port + 1 "
                   "under weft-run)")
    p.add_argument("--log", help="rank 0 writes 'step loss' lines here")
    p.add_argument("--threads", type=int, default=1, help="torch intra-op threads per rank")
    return p.parse_args()


def rendezvous(init_method):
    """(rank, world size, init_method) from torchrun or Weft's launcher table."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), init_method or "env://"
    import weft

    info = weft.launch_info()
    if init_method is None:
        if "MASTER_ADDR" in os.environ:
            init_method = "env://"
        elif info["launcher"] == "weft" and os.environ.get("WEFT_ROOT"):
            host, port = os.environ["WEFT_ROOT"].rsplit(":", 1)
            init_method = f"tcp://{host}:{int(port) + 1}"
        elif info["nranks"] == 1:
            init_method = "tcp://127.0.0.1:0"
        else:
            sys.exit(f"ddp_train: {info['launcher']} started {info['nranks']} ranks; "
                     "pass --init-method tcp://HOST:PORT for the c10d store")
    return info["rank"], info["nranks"], init_method


def main():
    args = parse()
    torch.set_num_threads(args.threads)
    if args.backend == "weft":
        import weft.torch  # noqa: F401  registers the "weft" backend
    rank, world, init = rendezvous(args.init_method)
    dist.init_process_group(args.backend, init_method=init, rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=120))
    model = DDP(make_model())
    log = open(args.log, "w") if args.log and rank == 0 else None

    def on_step(step, loss):
        if log:
            log.write(f"{step} {loss:.9g}\n")

    losses, per_step = train(model, args.steps, rank, on_step=on_step)
    if log:
        log.close()
    if rank == 0:
        print(f"{args.backend}: {world} ranks, {args.steps} steps, loss {losses[0]:.4f} -> "
              f"{losses[-1]:.4f}, {per_step * 1e3:.3f} ms/step", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
