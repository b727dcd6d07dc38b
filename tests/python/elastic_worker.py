"""A worker under torchrun for test_ddp.py's elastic test: DDP on weft for
--steps steps. In the first attempt (TORCHELASTIC_RESTART_COUNT 0) rank 1
kills itself with SIGKILL at step 3; torchrun's agent then restarts the
group and the second attempt must train to the end on a fresh weft group
(c10d prefixes the store per attempt). In the first attempt rank 0 lets
torchrun's SIGTERM pass: the agent stops the survivors as soon as its
monitor (every second) sees a worker gone, often before the survivor's
Weft noticed (a tenth of a second or so), and the test wants the
survivor's own error, naming the dead rank; the agent's SIGKILL follows
its grace period anyway. Rank 0 of the attempt that ends
writes a JSON line to --out: the attempt, the losses, and how far the
ranks' parameters are apart (0: in step)."""
import argparse
import json
import os
import signal
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP

import weft.torch  # noqa: F401

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "examples"))
import ddp_train  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
    torch.set_num_threads(1)
    dist.init_process_group("weft")
    rank = dist.get_rank()
    if attempt == 0 and rank == 0:
        signal.signal(signal.SIGTERM, lambda signum, frame: None)
    model = DDP(ddp_train.make_model())

    def on_step(step, loss):
        if attempt == 0 and rank == 1 and step == 3:
            os.kill(os.getpid(), signal.SIGKILL)

    losses, _ = ddp_train.train(model, args.steps, rank, on_step=on_step)
    flat = torch.cat([p.detach().reshape(-1) for p in model.parameters()])
    every = [torch.empty_like(flat) for _ in range(dist.get_world_size())]
    dist.all_gather(every, flat)
    spread = max((e - flat).abs().max().item() for e in every)
    if rank == 0:
        with open(args.out, "a") as f:
            f.write(json.dumps({"attempt": attempt, "losses": losses, "spread": spread}) + "\n")
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
