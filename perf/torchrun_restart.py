#!/usr/bin/python3
"""torchrun_restart.py — the job torchrun restarts, for perf/bench_shrink.sh.

A data-parallel loop as torchrun runs it (torch.distributed, backend
gloo unless --backend says otherwise): each step an AllReduce of a
gradient-sized tensor, then rank 0 saves a checkpoint (the step and the
model, written to a temporary file and renamed). A worker that starts
loads the checkpoint if there is one and goes on from its step. When a
worker dies, torchrun (--max-restarts) stops the others and starts all of
them again: the time from the kill to the first step that completes after
the restart is what a restart costs.

Each rank prints "STEP k t=T restart=R" (T: CLOCK_MONOTONIC seconds, R:
TORCHELASTIC_RESTART_COUNT) after every step, and once warm writes its pid
to DIR/pid.RANK (DIR/pid.RANK.R after a restart), so that the driver knows
whom to kill. It stops after --steps steps in all.
"""

import argparse
import datetime
import os
import sys
import time

import torch
import torch.distributed as dist


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dir", required=True, help="checkpoint and pid files")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--count", type=int, default=1024, help="floats per AllReduce")
    p.add_argument("--backend", default="gloo")
    p.add_argument("--step-s", type=float, default=0.01, help="compute per step")
    return p.parse_args()


def save(path, step, model):
    tmp = path + ".tmp"
    torch.save({"step": step, "model": model.state_dict()}, tmp)
    os.replace(tmp, path)


def main():
    args = parse()
    torch.set_num_threads(1)
    if args.backend == "weft":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                        "python"))
        import weft.torch  # noqa: F401
    dist.init_process_group(args.backend, timeout=datetime.timedelta(seconds=60))
    rank, restart = dist.get_rank(), int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    model = torch.nn.Linear(32, 32)
    ckpt = os.path.join(args.dir, "checkpoint.pt")
    step = 0
    if os.path.exists(ckpt):
        state = torch.load(ckpt)
        model.load_state_dict(state["model"])
        step = state["step"]
    grad = torch.ones(args.count)
    pid_written = False
    while step < args.steps:
        time.sleep(args.step_s)
        dist.all_reduce(grad)
        grad.fill_(1.0)
        step += 1
        if rank == 0:
            save(ckpt, step, model)
        print(f"STEP {step} t={time.monotonic():.6f} restart={restart}", flush=True)
        if not pid_written and step >= 3:
            suffix = f".{restart}" if restart else ""
            with open(os.path.join(args.dir, f"pid.{rank}{suffix}"), "w") as f:
                f.write(f"{os.getpid()}\n")
            pid_written = True
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
