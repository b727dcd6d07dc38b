"""Rank bodies for test_torch_parity.py: what Weft's backend does as Gloo's."""

import datetime
import os
import time

import torch
import torch.distributed as dist
import torch.distributed.distributed_c10d as c10d

import weft.torch

from bodies_torch import Check


def init(rank, nranks, port, backend="weft", timeout=60):
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=nranks, timeout=datetime.timedelta(seconds=timeout))


def done(check):
    dist.barrier()  # rank 0 holds the store: it must not leave first
    dist.destroy_process_group()
    return {"failures": check.failures, "cases": check.cases}


def raises(fn, *words):
    """The message of what fn() raised ('' if nothing), checked to hold @words."""
    try:
        fn()
    except RuntimeError as e:
        return str(e) if all(w in str(e) for w in words) else "WRONG: " + str(e)
    return ""


# ---- sequence numbers, profiler events, DETAIL's checks

def sequence_numbers(check, rank, nranks):
    pg = c10d._get_default_group()
    first = pg._get_sequence_number_for_group()
    seqs = torch.zeros(nranks, dtype=torch.long)
    dist.all_gather(list(seqs.chunk(nranks)), torch.tensor([first]))
    check(all(s == first for s in seqs.tolist()), f"agreed at init: {seqs.tolist()}")
    now = pg._get_sequence_number_for_group()  # the all_gather counted
    dist.all_reduce(torch.ones(3))
    dist.broadcast(torch.ones(3), 0)
    dist.barrier()
    check(pg._get_sequence_number_for_group() == now + 3, "one per collective")
    if nranks > 1:  # sends and receives do not count, as with Gloo
        before = pg._get_sequence_number_for_group()
        t = torch.ones(2)
        dist.send(t, 1) if rank == 0 else dist.recv(t, 0) if rank == 1 else None
        check(pg._get_sequence_number_for_group() == before, "send/recv not counted")
    pg._set_sequence_number_for_group()  # agreed already: kept
    check(pg._get_sequence_number_for_group() >= now + 3, "set again keeps it")
    sub = dist.new_group(backend="weft")
    check(sub._get_sequence_number_for_group() > 0, "a new group has one too")


def profiler_events(check, rank, nranks):
    t = torch.ones(4, 5)
    for make in (lambda: torch.autograd.profiler.profile(record_shapes=True),
                 lambda: torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU],
                                                record_shapes=True)):
        with make() as prof:
            dist.all_reduce(t)
            dist.all_gather([torch.empty(4, 5) for _ in range(nranks)], t)
            dist.broadcast(t, 0)
            w = dist.all_reduce(t, async_op=True)
            w.wait()
            dist.barrier()
        events = prof.events() if isinstance(prof, torch.profiler.profile) else \
            prof.function_events
        names = [e.name for e in events]
        for want, count in (("weft:all_reduce", 2), ("weft:all_gather", 1),
                            ("weft:broadcast", 1), ("weft:barrier", 1)):
            found = [e for e in events if e.name == want]
            check(len(found) == count, f"{want}: {len(found)} events, not {count}: {names}")
            check(all(e.is_async for e in found), f"{want} is async as Gloo's")
        shapes = [e.input_shapes for e in events if e.name == "weft:all_reduce"]
        check(all(s == [[4, 5]] for s in shapes), f"all_reduce's input shapes: {shapes}")


def detail_mismatch(rank, nranks, port):
    """TORCH_DISTRIBUTED_DEBUG=DETAIL (set by the test): the group is wrapped
    in c10d's ProcessGroupWrapper, which catches a shape mismatch before it
    reaches Weft, with torch's message, on every rank."""
    init(rank, nranks, port)
    check = Check(rank, nranks)
    pg = c10d._get_default_group()
    check(type(pg).__name__ == "_ProcessGroupWrapper", f"wrapped: {type(pg).__name__}")
    check(weft.torch.is_weft_group(), "is_weft_group sees through the wrapper")
    check(weft.topo(pg)["nranks"] == nranks, "weft.topo sees through the wrapper")
    t = torch.ones(3)
    dist.all_reduce(t)  # well formed: passes the check
    check(torch.equal(t, torch.full((3,), float(nranks))), "checked all_reduce")
    msg = raises(lambda: dist.all_reduce(torch.ones(10 + rank)),
                 "Detected mismatch between collectives on ranks")
    check(msg and not msg.startswith("WRONG"), f"shape mismatch caught: {msg[:300]}")
    return {"failures": check.failures, "cases": check.cases, "message": msg[:600]}


# ---- the operations Gloo has

def folded(x, op, gloo, nranks):
    """Every rank's @x gathered over Gloo, folded here with @op."""
    every = [torch.empty_like(x.view(torch.uint8)) for _ in range(nranks)]
    dist.all_gather(every, x.view(torch.uint8).contiguous(), group=gloo)
    fn = {dist.ReduceOp.BAND: torch.bitwise_and, dist.ReduceOp.BOR: torch.bitwise_or,
          dist.ReduceOp.BXOR: torch.bitwise_xor}[op]
    acc = every[0]
    for e in every[1:]:
        acc = fn(acc, e)
    return acc.view(x.dtype)


def bitwise_ops(check, rank, nranks, gloo):
    """BAND, BOR, BXOR on integer and bool tensors: Gloo's result where Gloo
    reduces the type (int8, uint8, int32, int64), else every rank's values
    gathered over Gloo and folded."""
    R = dist.ReduceOp
    for dtype in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool):
        g = torch.Generator().manual_seed(11 + rank)
        x = torch.randint(0, 127, (1000,), generator=g).to(dtype)
        for op in (R.BAND, R.BOR, R.BXOR):
            a, b = x.clone(), x.clone()
            dist.all_reduce(a, op=op)
            if dtype in (torch.int16, torch.bool):
                b = folded(x, op, gloo, nranks)
            else:
                dist.all_reduce(b, op=op, group=gloo)
            check(torch.equal(a, b), f"all_reduce {op} of {dtype}")
            c = x.clone()
            dist.reduce(c, 1, op=op)
            check(rank != 1 or torch.equal(c, b), f"reduce {op} of {dtype}")
            check(rank == 1 or torch.equal(c, x), f"reduce {op} leaves other ranks' input")


def coalesced_and_sparse(check, rank, nranks, gloo):
    # torch's all_gather_coalesced wants one dtype (Weft's would take several)
    ins = [torch.full((3,), float(rank)), torch.arange(4.0) + rank, torch.empty(0),
           torch.full((2, 2), float(rank))]
    for group in (None, gloo):
        outs = [[torch.empty_like(x) for x in ins] for _ in range(nranks)]
        dist.all_gather_coalesced(outs, ins, group=group)
        for r in range(nranks):
            want = [torch.full((3,), float(r)), torch.arange(4.0) + r, torch.empty(0),
                    torch.full((2, 2), float(r))]
            check(all(torch.equal(a, b) for a, b in zip(outs[r], want)),
                  f"all_gather_coalesced from rank {r} ({'gloo' if group else 'weft'})")
    for dims in (1, 2, 3):
        idx = torch.stack([torch.arange(rank + 1)] + [torch.zeros(rank + 1, dtype=torch.long)] *
                          (dims - 1))
        vals = torch.arange(rank + 1, dtype=torch.float32) + 0.5
        shape = [nranks + 1] * dims
        a = torch.sparse_coo_tensor(idx, vals, shape)
        b = a.clone()
        dist.all_reduce(a)
        dist.all_reduce(b, group=gloo)
        check(torch.equal(a.to_dense(), b.to_dense()), f"sparse all_reduce, {dims} dims")
    msg = raises(lambda: dist.all_reduce(torch.sparse_coo_tensor([[0]], [1.0], [2]),
                                         op=dist.ReduceOp.MAX), "SUM only", "to_dense")
    check(msg and not msg.startswith("WRONG"), f"sparse MAX: {msg}")
    big = torch.arange(8 * 10 ** 6, dtype=torch.float32).view(8, -1)
    x = torch.sparse_coo_tensor(torch.tensor([[rank]]), big[rank:rank + 1], (nranks, big.shape[1]))
    dist.all_reduce(x)
    check(torch.equal(x.to_dense(), big[:nranks]), "sparse all_reduce of 1 M values per row")


def tags_and_any(check, rank, nranks, group=None):
    """Gloo's semantics on @group (Weft's default group, or Gloo's): by
    (peer, tag), in order per pair and tag whatever the other tags' order;
    recvAnysource; a size mismatch."""
    backend = dist.get_backend(group)
    g = {"group": group}
    if rank == 0:  # tags 1, 2, 3 with different sizes; received 3, 1, 2
        # (isend: Gloo's blocking send waits for its receive; Weft's need not)
        ws = [dist.isend(torch.full((tag * 100,), float(tag)), 1, tag=tag, **g)
              for tag in (1, 2, 3)]
        ws.append(dist.isend(torch.full((5,), 7.0), 1, tag=1, **g))  # a second of tag 1
        for w in ws:
            w.wait()
    elif rank == 1:
        got = {}
        for tag in (3, 1, 2, 1):
            t = torch.empty(tag * 100 if tag != 1 or 1 not in got else 5)
            dist.recv(t, 0, tag=tag, **g)
            got.setdefault(tag, []).append(t)
        check(all(torch.equal(got[k][0], torch.full((k * 100,), float(k))) for k in (1, 2, 3)),
              "tags out of order")
        check(torch.equal(got[1][1], torch.full((5,), 7.0)), "a tag's messages in order")
    dist.barrier(**g)
    if rank != 0:  # every other rank sends one to rank 0, which takes any
        dist.send(torch.full((10,), float(rank)), 0, tag=9, **g)
    else:
        seen = []
        for _ in range(nranks - 1):
            t = torch.empty(10)
            src = dist.recv(t, tag=9, **g)
            seen.append(src)
            check(torch.equal(t, torch.full((10,), float(src))), "any source: the sender's data")
        check(sorted(seen) == list(range(1, nranks)), f"any source: every sender once: {seen}")
    dist.barrier(**g)
    if backend == "weft" and rank < 2:  # a size mismatch fails the receive, not the group
        if rank == 0:
            dist.send(torch.ones(6), 1, tag=4, **g)
        else:
            msg = raises(lambda: dist.recv(torch.empty(5), 0, tag=4, **g), "sent 24 bytes",
                         "holds 20")
            check(msg and not msg.startswith("WRONG"), f"size mismatch: {msg}")
    dist.barrier(**g)
    t = torch.ones(3)
    dist.all_reduce(t, **g)
    check(torch.equal(t, torch.full((3,), float(nranks))), f"usable after ({backend})")


def p2p_beside_collectives(check, rank, nranks):
    """A receive posted before a collective does not hold it up (as Gloo's);
    two ranks exchange 64 MB with isend/irecv, no group."""
    into = torch.empty(100)
    if rank == 0:
        w = dist.irecv(into, 1)
    t = torch.ones(7)
    dist.all_reduce(t)
    check(torch.equal(t, torch.full((7,), float(nranks))), "all_reduce beside a pending irecv")
    if rank == 1:
        dist.send(torch.full((100,), 3.0), 0)
    if rank == 0:
        w.wait()
        check(torch.equal(into, torch.full((100,), 3.0)), "the irecv")
    if rank < 2:
        peer = 1 - rank
        big, back = torch.full((16 << 20,), float(rank)), torch.empty(16 << 20)
        ws = [dist.isend(big, peer), dist.irecv(back, peer)]
        for w in ws:
            w.wait()
        check(torch.equal(back, torch.full((16 << 20,), float(peer))), "64 MB exchange")
    dist.barrier()


def operations(rank, nranks, port):
    """Everything above, on one job: Weft the default group, Gloo beside."""
    init(rank, nranks, port, timeout=60)
    check = Check(rank, nranks)
    gloo = dist.new_group(backend="gloo")
    sequence_numbers(check, rank, nranks)
    profiler_events(check, rank, nranks)
    coalesced_and_sparse(check, rank, nranks, gloo)
    bitwise_ops(check, rank, nranks, gloo)
    tags_and_any(check, rank, nranks)
    tags_and_any(check, rank, nranks, gloo)
    p2p_beside_collectives(check, rank, nranks)
    return done(check)


def stay_out(store, key, nranks):
    """Every rank here once the ones in the operation have their answer:
    the ones that stayed away live, outside Weft, until then."""
    store.add(key, 1)
    while int(store.add(key, 0)) < nranks:
        time.sleep(0.05)


def barriers(rank, nranks, port, cases):
    """Each case on a fresh weft group (a failure leaves its group dead):
    monitored_barrier with the ranks in case["skip"] staying away, or an
    all_reduce bounded by AllreduceOptions.timeout (1 s) that rank 1 skips.
    Before them, a barrier with device_ids (CPU: ignored, as Gloo does) and
    a monitored barrier every rank reaches."""
    init(rank, nranks, port, timeout=60)
    pg = c10d._get_default_group()
    opts = dist.BarrierOptions()
    opts.device_ids = [0]
    pg.barrier(opts).wait()
    weft.torch.monitored_barrier(timeout=datetime.timedelta(seconds=2))  # all come
    store = c10d._get_default_store()
    outs = []
    for k, case in enumerate(cases):
        group = dist.new_group(backend="weft", timeout=datetime.timedelta(seconds=60))
        out = {"raised": None}
        if rank not in case["skip"]:
            t0 = time.monotonic()
            try:
                if case.get("op_timeout"):
                    o = dist.AllreduceOptions()
                    o.timeout = datetime.timedelta(seconds=1)
                    group.allreduce([torch.ones(3)], o).wait()
                else:
                    weft.torch.monitored_barrier(group, timeout=2.0,
                                                 wait_all_ranks=case["wait_all"])
            except RuntimeError as e:
                out = {"raised": str(e), "seconds": time.monotonic() - t0}
        stay_out(store, f"case{k}", nranks)
        outs.append(out)
    dist.barrier()
    dist.destroy_process_group()
    return outs


if __name__ == "__main__":
    raise SystemExit(os.path.basename(__file__) + ": run through rankmain")
