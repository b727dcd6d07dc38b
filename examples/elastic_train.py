#!/usr/bin/python3
"""elastic_train.py — data-parallel SGD that loses a rank and keeps going.

Every rank holds a replica of a small model; each step the global batch is
split between the ranks, each computes the gradient of its share, and one
AllReduce (torch.distributed on the "weft" backend) sums the gradients, so
every replica takes the same step. When a rank dies (kill -9 it, or
--die RANK:STEP makes that rank kill itself), the survivors' AllReduce
fails; they shrink the process group to themselves (weft.torch.shrink:
no launcher, no restart, no checkpoint), split the same global batch
between fewer ranks, redo the step and go on. The replicas stay bitwise
identical: at the end every rank hashes its parameters and the hashes are
compared.

    build/weft-run --keep-going -np 4 /usr/bin/python3 examples/elastic_train.py
    build/weft-run --keep-going -np 4 /usr/bin/python3 examples/elastic_train.py --die 2:10

A launcher that stops the whole job when one rank dies makes this moot:
weft-run needs --keep-going (or WEFT_KEEP_GOING=1); srun needs --no-kill
-K0 (docs/launching.md). Under weft-run the c10d store sits on the port
after WEFT_ROOT's, as in examples/ddp_train.py.
"""

import argparse
import datetime
import hashlib
import os
import signal
import sys
import time

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import weft.torch  # noqa: E402  (registers the backend "weft")

SAMPLES, FEATURES = 4096, 32


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--batch", type=int, default=256, help="global batch, split between ranks")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--die", default="", help="RANK:STEP: that rank kills itself (SIGKILL)")
    return p.parse_args()


def init():
    rank, size = int(os.environ["WEFT_RANK"]), int(os.environ["WEFT_NRANKS"])
    host, port = os.environ["WEFT_ROOT"].rsplit(":", 1)
    dist.init_process_group("weft", init_method=f"tcp://{host}:{int(port) + 1}", rank=rank,
                            world_size=size, timeout=datetime.timedelta(seconds=60))
    return rank


def data(seed):
    """The same dataset on every rank: y = x @ w + noise."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(SAMPLES, FEATURES, generator=g)
    w = torch.randn(FEATURES, 1, generator=g)
    return x, x @ w + 0.1 * torch.randn(SAMPLES, 1, generator=g)


def model(seed):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(FEATURES, 64), torch.nn.Tanh(),
                               torch.nn.Linear(64, 1))


def local_grads(net, x, y, step, batch):
    """This rank's share of the global batch of @step (rank::size): the
    gradient of its part of the mean loss over the whole batch."""
    start = step * batch % SAMPLES
    idx = torch.arange(start, start + batch) % SAMPLES
    mine = idx[dist.get_rank()::dist.get_world_size()]
    net.zero_grad()
    loss = ((net(x[mine]) - y[mine]) ** 2).sum() / batch
    loss.backward()
    return torch.cat([p.grad.flatten() for p in net.parameters()]), loss.detach()


def apply(net, flat, lr):
    with torch.no_grad():
        at = 0
        for p in net.parameters():
            n = p.numel()
            p -= lr * flat[at:at + n].view_as(p)
            at += n


def members(first_rank):
    """Every member's rank in the first group, in the current group's order."""
    t = torch.tensor([first_rank])
    all_ = [torch.zeros_like(t) for _ in range(dist.get_world_size())]
    dist.all_gather(all_, t)
    return [int(v) for v in all_]


def say(first, msg):
    print(f"[rank {first}] {msg}", flush=True)


def recover(first, step, who, failed_at, error):
    """The step's AllReduce failed: shrink to the survivors."""
    old = dist.distributed_c10d._get_default_group()
    weft.torch.shrink()  # collective over the survivors; the default group now
    gone = weft.torch.failed_ranks(old)
    lost = [f"rank {who[r]} ({how})" for r, how in gone]
    now = members(first)
    when = datetime.datetime.now() - datetime.timedelta(seconds=time.monotonic() - failed_at)
    say(first, f"step {step}, {when.strftime('%H:%M:%S.%f')[:-3]}: lost "
               f"{', '.join(lost) or 'no rank'} "
               f"({error.splitlines()[0][:120]}); going on with {len(now)} ranks {now}")
    return now, failed_at


def train(args, first):
    x, y = data(args.seed)
    net = model(args.seed)
    who = members(first)
    die_rank, die_step = (int(v) for v in args.die.split(":")) if args.die else (-1, -1)
    step, failed_at, loss = 0, None, torch.tensor(0.0)
    while step < args.steps:
        if first == die_rank and step == die_step:
            os.kill(os.getpid(), signal.SIGKILL)
        flat, loss = local_grads(net, x, y, step, args.batch)
        try:
            dist.all_reduce(flat)
        except RuntimeError as e:
            who, failed_at = recover(first, step, who, time.monotonic(), str(e))
            continue  # the same step, split between the survivors
        if failed_at is not None:
            say(first, f"recovery took {1e3 * (time.monotonic() - failed_at):.0f} ms "
                       "(from the failed AllReduce to the first that succeeded)")
            failed_at = None
        apply(net, flat, args.lr)
        step += 1
    return net, loss


def identical(net, first):
    """Hash every parameter's bytes; compare the hashes of all ranks."""
    h = hashlib.sha256()
    for p in net.parameters():
        h.update(p.detach().numpy().tobytes())
    mine = torch.frombuffer(bytearray(h.digest()), dtype=torch.int64)
    all_ = [torch.zeros_like(mine) for _ in range(dist.get_world_size())]
    dist.all_gather(all_, mine)
    same = all(torch.equal(all_[0], t) for t in all_)
    say(first, f"replicas identical on {dist.get_world_size()} ranks: {'yes' if same else 'NO'} "
               f"(sha256 {h.hexdigest()[:16]})")
    return same


def main():
    args = parse()
    torch.set_num_threads(1)
    first = init()
    net, loss = train(args, first)
    say(first, f"done: {args.steps} steps, loss of the last batch share {float(loss):.5f}")
    ok = identical(net, first)
    dist.destroy_process_group()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
