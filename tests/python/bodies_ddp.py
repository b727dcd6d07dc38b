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


# ---- DDP's details, Weft against Gloo to the last bit (2 ranks: a sum of
# two is the same whatever the order, so the math is the same)

def _hooks():
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks as default
    from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powerSGD

    def power(pg):
        return powerSGD.PowerSGDState(process_group=pg, matrix_approximation_rank=2,
                                      start_powerSGD_iter=3, random_seed=7), powerSGD.powerSGD_hook

    return {
        "none": None,
        "allreduce_hook": lambda pg: (pg, default.allreduce_hook),
        "fp16_compress_hook": lambda pg: (pg, default.fp16_compress_hook),
        "powerSGD": power,
    }


def _run_uneven(model, rank, steps):
    """join(): rank r has steps + 3 * r batches; the others shadow it."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    with model.join():
        for step in range(steps + 3 * rank):
            x, y = ddp_train.make_batch(step, rank)
            opt.zero_grad(set_to_none=True)
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()


def _run_no_sync(model, rank, steps, every=3):
    """Gradients accumulated locally for every-1 steps under no_sync()."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(steps):
        x, y = ddp_train.make_batch(step, rank)
        if step % every != every - 1:
            with model.no_sync():
                torch.nn.functional.mse_loss(model(x), y).backward()
            continue
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def ddp_details(rank, nranks, port, steps=8):
    """Each variant twice from the same start on the same batches, on weft
    and on gloo: the parameters must be equal bit for bit."""
    torch.set_num_threads(1)
    dist.init_process_group("weft", init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=nranks, timeout=datetime.timedelta(seconds=120))
    gloo = dist.new_group(backend="gloo")
    groups = {"weft": None, "gloo": gloo}
    results = {}

    def variant(name, build, run):
        params = {}
        for backend, pg in groups.items():
            print(f"variant {name} on {backend}", file=sys.stderr, flush=True)
            model = build(pg)
            run(model)
            params[backend] = [p.detach().clone() for p in model.parameters()]
        results[name] = {
            "bitwise": all(torch.equal(a, b) for a, b in zip(params["weft"], params["gloo"])),
            "max_diff": max((a - b).abs().max().item()
                            for a, b in zip(params["weft"], params["gloo"]))}

    for hook_name, hook in _hooks().items():
        def build(pg, hook=hook):
            model = DDP(ddp_train.make_model(), process_group=pg)
            if hook:
                state, fn = hook(pg if pg is not None else dist.group.WORLD)
                model.register_comm_hook(state, fn)
            return model
        variant(f"hook {hook_name}", build, lambda m: ddp_train.train(m, steps, rank))
    variant("no_sync", lambda pg: DDP(ddp_train.make_model(), process_group=pg),
            lambda m: _run_no_sync(m, rank, steps))
    variant("static_graph",
            lambda pg: DDP(ddp_train.make_model(), process_group=pg, static_graph=True),
            lambda m: ddp_train.train(m, steps, rank))
    variant("join (uneven inputs)", lambda pg: DDP(ddp_train.make_model(), process_group=pg),
            lambda m: _run_uneven(m, rank, steps))
    dist.barrier()
    dist.destroy_process_group()
    return results
