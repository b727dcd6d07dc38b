"""Rank bodies for test_torch.py: the "weft" backend against Gloo."""

import datetime
import glob
import json
import os
import sys
import threading
import time

import torch
import torch.distributed as dist

import weft
import weft.torch

R = dist.ReduceOp
TYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int8, torch.uint8,
         torch.int32, torch.int64]
OPS = [R.SUM, R.AVG, R.PRODUCT, R.MIN, R.MAX]


def init(rank, nranks, port, backend="weft", timeout=60):
    dist.init_process_group(backend, init_method=f"tcp://127.0.0.1:{port}", rank=rank,
                            world_size=nranks, timeout=datetime.timedelta(seconds=timeout))


def make(rank, seed, dtype, op, count):
    """Exact in every type for every op over <= 4 ranks."""
    g = torch.Generator().manual_seed(seed * 7919 + rank)
    if op in (R.MIN, R.MAX):
        v = torch.randint(-100, 100, (count,), generator=g)
        if dtype == torch.uint8:
            v = v + 100
    elif op == R.PRODUCT:
        v = torch.randint(1, 3, (count,), generator=g).double()
        if dtype.is_floating_point:
            v = v / 2 * torch.randint(1, 3, (count,), generator=g)
    else:
        v = torch.randint(0 if dtype == torch.uint8 else -4, 4, (count,), generator=g)
    return v.to(dtype)


def same(a, b):
    if a.dtype.is_floating_point:
        tol = 1e-2 if a.dtype in (torch.float16, torch.bfloat16) else 1e-6
        return torch.allclose(a.double(), b.double(), rtol=tol, atol=tol)
    return torch.equal(a, b)


class Check:
    def __init__(self, rank, n):
        self.rank, self.n, self.failures, self.cases = rank, n, [], 0

    def __call__(self, ok, what):
        self.cases += 1
        if not ok:
            self.failures.append(f"rank {self.rank}: {what}")


def gloo_reference(x, op, gloo, n):
    """Gloo's all_reduce of @x (Gloo has no AVG: its sum over n; no
    bfloat16: in float32, exact for these values)."""
    b = x.float() if x.dtype == torch.bfloat16 else x.clone()
    dist.all_reduce(b, op=R.SUM if op == R.AVG else op, group=gloo)
    if op == R.AVG:
        b = b / n if b.dtype.is_floating_point else torch.div(b, n, rounding_mode="trunc")
    return b.to(x.dtype)


def reductions(check, rank, n, gloo):
    seed = 0
    for dtype in TYPES:
        for op in OPS:
            seed += 1
            x = make(rank, seed, dtype, op, [1, 7, 1000, 4099][seed % 4])
            a = x.clone()
            if seed % 2:
                dist.all_reduce(a, op=op)
            else:
                w = dist.all_reduce(a, op=op, async_op=True)
                w.wait()
                check(w.is_completed(), f"async all_reduce {dtype} completed after wait")
            check(same(a, gloo_reference(x, op, gloo, n)), f"all_reduce {dtype} {op}")
            root = seed % n
            r = x.clone()
            dist.reduce(r, root, op=op)
            want = gloo_reference(x, op, gloo, n)  # on every rank: Gloo's calls must match
            if rank == root:
                check(same(r, want), f"reduce {dtype} {op} root {root}")
            # reduce_scatter: Gloo has none; its all_reduce of the whole input.
            whole = make(rank, seed + 500, dtype, op, 6 * n)
            want = gloo_reference(whole, op, gloo, n)[rank * 6:(rank + 1) * 6]
            out = torch.empty(6, dtype=dtype)
            dist.reduce_scatter(out, list(whole.clone().chunk(n)), op=op)
            check(same(out, want), f"reduce_scatter (list) {dtype} {op}")
            out2 = torch.empty(6, dtype=dtype)
            dist._reduce_scatter_base(out2, whole.clone(), op=op)
            check(same(out2, want), f"_reduce_scatter_base {dtype} {op}")
    ts = [make(rank, 900 + k, torch.float32, R.SUM, c) for k, c in enumerate([3, 1000, 17])]
    a, b = [t.clone() for t in ts], [t.clone() for t in ts]
    dist.all_reduce_coalesced(a)
    dist.all_reduce_coalesced(b, group=gloo)
    check(all(torch.equal(x, y) for x, y in zip(a, b)), "all_reduce_coalesced")
    sep = [make(rank, 950 + k, torch.float32, R.SUM, 5) for k in range(n)]  # separate tensors
    out = torch.empty(5)
    dist.reduce_scatter(out, sep)
    want = gloo_reference(torch.cat(sep), R.SUM, gloo, n)[rank * 5:(rank + 1) * 5]
    check(torch.equal(out, want), "reduce_scatter of separate tensors")


def moves(check, rank, n, gloo):
    """Gloo moves the same bytes as uint8 (it lacks bool and complex)."""
    u8 = torch.uint8
    for dtype in (torch.float32, torch.int64, torch.bool, torch.complex64, torch.bfloat16):
        x = (torch.arange(5) + 10 * rank).to(dtype)
        a = [torch.zeros(5, dtype=dtype) for _ in range(n)]
        b = [torch.zeros(5, dtype=dtype).view(u8) for _ in range(n)]
        dist.all_gather(a, x)
        dist.all_gather(b, x.view(u8), group=gloo)
        check(all(torch.equal(p.view(u8), q) for p, q in zip(a, b)), f"all_gather {dtype}")
        want = torch.cat(b)
        flat = torch.zeros(5 * n, dtype=dtype)
        dist._all_gather_base(flat, x)
        check(torch.equal(flat.view(u8), want), f"_all_gather_base {dtype}")
        packed = torch.zeros(5 * n, dtype=dtype)
        dist.all_gather(list(packed.chunk(n)), x)  # back to back: Weft's allgather in place
        check(torch.equal(packed.view(u8), want), f"all_gather into one buffer {dtype}")
        for root in sorted({0, n - 1}):
            c = x.clone() if rank == root else torch.zeros(5, dtype=dtype)
            dist.broadcast(c, root)
            d = x.clone().view(u8)
            dist.broadcast(d, root, group=gloo)
            check(torch.equal(c.view(u8), d), f"broadcast {dtype} root {root}")
            g = [torch.zeros(5, dtype=dtype) for _ in range(n)] if rank == root else None
            dist.gather(x, g, dst=root)
            if rank == root:
                check(all(torch.equal(p.view(u8), q) for p, q in zip(g, b)),
                      f"gather {dtype} {root}")
            s = torch.zeros(5, dtype=dtype)
            src = [q.view(dtype) for q in b] if rank == root else None
            dist.scatter(s, src, src=root)
            check(torch.equal(s.view(u8), b[rank]), f"scatter {dtype} root {root}")


def alltoalls(check, rank, n, gloo):
    x = torch.arange(4 * n, dtype=torch.float32) + 100 * rank
    a, b = torch.empty(4 * n), torch.empty(4 * n)
    dist.all_to_all_single(a, x)
    dist.all_to_all_single(b, x, group=gloo)
    check(torch.equal(a, b), "all_to_all_single equal splits")
    ins = [rank + 1 + j for j in range(n)]  # rows to rank j
    outs = [i + 1 + rank for i in range(n)]  # rows from rank i
    x = torch.arange(sum(ins) * 3, dtype=torch.int32).reshape(-1, 3) + 1000 * rank
    a, b = torch.empty(sum(outs), 3, dtype=torch.int32), torch.empty(sum(outs), 3, dtype=torch.int32)
    dist.all_to_all_single(a, x, outs, ins)
    dist.all_to_all_single(b, x, outs, ins, group=gloo)
    check(torch.equal(a, b), "all_to_all_single uneven splits")
    lin = [torch.full((j + 2,), float(rank * 10 + j)) for j in range(n)]
    lout = [torch.empty(rank + 2) for _ in range(n)]
    dist.all_to_all(lout, lin)
    check(all(torch.equal(lout[i], torch.full((rank + 2,), float(i * 10 + rank)))
              for i in range(n)), "all_to_all lists")


def p2p_and_async(check, rank, n):
    if n > 1:
        right, left = (rank + 1) % n, (rank - 1) % n
        out, into = torch.full((33,), float(rank)), torch.empty(33)
        if rank % 2 == 0:
            dist.send(out, right)
            dist.recv(into, left)
        else:
            dist.recv(into, left)
            dist.send(out, right)
        check(torch.equal(into, torch.full((33,), float(left))), "send/recv")
        reqs = [dist.isend(out, right), dist.irecv(into, left)]
        for q in reqs:
            q.wait()
        check(torch.equal(into, torch.full((33,), float(left))), "isend/irecv")
    t = torch.ones(1000)
    if rank == 1:  # rank 0's future is then certainly not complete at .then()
        time.sleep(0.3)
    work = dist.all_reduce(t, async_op=True)
    fut = work.get_future()
    seen = {}

    def then(f):
        seen["thread"] = threading.get_ident()
        return f.value()[0] * 2

    doubled = fut.then(then).wait()
    check(torch.equal(doubled, torch.full((1000,), 2.0 * n)), "future then")
    if rank == 0:  # completed later, by Weft's side: the callback is not ours
        check(seen.get("thread") != threading.get_ident(), "future callback off the main thread")
    check(work.is_completed() and work.is_success(), "work completed and successful")
    late = dist.all_reduce(torch.ones(4), async_op=True)
    late.wait()
    check(torch.equal(late.get_future().wait()[0], torch.full((4,), float(n))),
          "future asked for after completion")
    dist.barrier()


def errors(check, rank, n):
    pg = dist.distributed_c10d._get_default_group()
    cases = [
        (lambda: dist.all_reduce(torch.ones(4, 4).t()), "not contiguous"),
        (lambda: dist.all_reduce(torch.ones(4, device="meta")), "CPU"),
        (lambda: dist.all_reduce(torch.ones(4, dtype=torch.int16)), "cannot reduce"),
        (lambda: dist.all_reduce(torch.ones(4), op=R.BAND), "integer or bool"),
        (lambda: dist.reduce_scatter(torch.ones(1), [torch.ones(1)] * n, op=R.BOR),
         "not supported"),
        (lambda: pg.allreduce([torch.ones(2), torch.ones(2)]), "one tensor per call"),
        (lambda: dist.all_to_all_single(torch.empty(3), torch.empty(3), [5] * n,
                                        [3] + [0] * (n - 1)), "add up to"),
    ]
    for fn, word in cases:
        try:
            fn()
            check(False, f"no error for '{word}'")
        except RuntimeError as e:
            check(word in str(e), f"error '{word}' not in: {e}")
    t = torch.ones(3)
    dist.all_reduce(t)  # still usable
    check(torch.equal(t, torch.full((3,), float(n))), "usable after errors")


def vs_gloo(rank, nranks, port):
    torch.set_num_threads(1)
    init(rank, nranks, port)
    gloo = dist.new_group(backend="gloo")
    check = Check(rank, nranks)
    reductions(check, rank, nranks, gloo)
    moves(check, rank, nranks, gloo)
    alltoalls(check, rank, nranks, gloo)
    p2p_and_async(check, rank, nranks)
    errors(check, rank, nranks)
    doc = weft.topo(dist.distributed_c10d._get_default_group())
    check(doc["nranks"] == nranks, "weft.topo of the process group")
    if nranks == 3:  # new_group: the creator is called again, for the members only
        sub = dist.new_group([0, 2], backend="weft")
        t = torch.full((10,), float(rank))
        if rank in (0, 2):
            dist.all_reduce(t, group=sub)
            check(torch.equal(t, torch.full((10,), 2.0)), "new_group all_reduce")
            check(dist.get_world_size(sub) == 2, "new_group size")
        else:
            check(sub == dist.GroupMember.NON_GROUP_MEMBER, "non-member gets NON_GROUP_MEMBER")
    check(dist.get_backend() == "weft", "get_backend")
    dist.destroy_process_group()
    return {"failures": check.failures, "cases": check.cases}


def compute_threads(rank, nranks, port):
    """WEFT_WAIT=auto: the backend tells Weft torch.get_num_threads(), and
    the ranks' threads against the CPUs of their masks decide the wait."""
    os.environ["WEFT_WAIT"] = "auto"
    os.environ.pop("OMP_NUM_THREADS", None)  # the backend's figure, not this
    cpus = len(os.sched_getaffinity(0))
    torch.set_num_threads(1)
    init(rank, nranks, port)
    first = weft.topo(dist.distributed_c10d._get_default_group())["wait"]
    # Every rank at every CPU, and one more on rank 0: oversubscribed.
    torch.set_num_threads(cpus + (rank == 0))
    group = dist.new_group(backend="weft")
    second = weft.topo(group)["wait"]
    t = torch.full((1000,), float(rank + 1))
    dist.all_reduce(t, group=group)  # and it sums, sleeping in its waits
    ok = torch.equal(t, torch.full((1000,), float(nranks * (nranks + 1) // 2)))
    dist.destroy_process_group()
    return {"cpus": cpus, "first": first, "second": second, "threads": torch.get_num_threads(),
            "sum_ok": ok}


# ---- failures of the job
def timeout(rank, nranks, port):
    init(rank, nranks, port, timeout=3)
    dist.barrier()
    t0 = time.monotonic()
    if rank == 1:
        time.sleep(12)  # never joins the all_reduce
        return {"raised": None}
    try:
        dist.all_reduce(torch.ones(10))
    except RuntimeError as e:
        return {"raised": str(e), "seconds": time.monotonic() - t0}
    return {"raised": None}


def dead_peer(rank, nranks, port):
    init(rank, nranks, port, timeout=30)
    dist.barrier()
    if rank == 1:
        os._exit(0)
    t0 = time.monotonic()
    try:
        for _ in range(3):
            dist.all_reduce(torch.ones(100000))
    except RuntimeError as e:
        return {"raised": str(e), "seconds": time.monotonic() - t0}
    return {"raised": None}


def mismatch(rank, nranks, port):
    init(rank, nranks, port, timeout=20)
    try:
        dist.all_reduce(torch.ones(1000 + 10 * rank))
        dist.barrier()
    except RuntimeError as e:
        return {"raised": str(e)}
    return {"raised": None}


def wait_timeout(rank, nranks, port):
    """Work.wait(timeout) returns control; the operation goes on. With
    WEFT_TRACE_DIR set, the timeout wrote the flight recorder, the
    all_reduce in flight; weft.dump(pg, path) writes it on demand."""
    init(rank, nranks, port, timeout=30)
    t = torch.ones(10)
    if rank == 1:
        time.sleep(3)
    w = dist.all_reduce(t, async_op=True)
    raised, in_flight = None, None
    if rank == 0:
        try:
            w.wait(datetime.timedelta(milliseconds=200))
        except RuntimeError as e:
            raised = str(e)
        d = os.environ.get("WEFT_TRACE_DIR")
        files = glob.glob(os.path.join(d, "weft-trace-*-r0-*.json")) if d else []
        if files:
            ops = json.load(open(files[0]))["ops"]
            in_flight = [o["coll"] for o in ops if o["state"] in ("posted", "started")]
    w.wait()
    ok = torch.equal(t, torch.full((10,), float(nranks)))
    dumped = None
    if os.environ.get("WEFT_TRACE_DIR"):
        path = os.path.join(os.environ["WEFT_TRACE_DIR"], "pg.%d.json" % rank)
        weft.dump(dist.distributed_c10d._get_default_group(), path)
        ops = json.load(open(path))["ops"]  # the group's own calls too (its split)
        dumped = [(o["coll"], o["state"]) for o in ops][-1:]
    dist.destroy_process_group()
    return {"raised": raised, "ok": ok, "in_flight": in_flight, "dumped_calls": dumped}


if __name__ == "__main__":
    sys.exit("run through rankmain")


def dropped_in_callback(rank, nranks, port):
    """Rank 0's first future's callback drops the last reference to a weft
    process group while later operations are still pending (rank 1 joins
    them late): ~Core runs on the group's completion thread, fails them
    (nobody will wait for them) and must still mark their futures, and the
    thread must go on without the freed group. Rank 1 just takes part."""
    store = dist.TCPStore("127.0.0.1", port, nranks, rank == 0,
                          timeout=datetime.timedelta(seconds=30))
    pg = weft.torch.ProcessGroupWeft(store, rank, nranks, datetime.timedelta(seconds=20))
    t = torch.ones(1024)
    if rank == 1:
        pg.allreduce([t]).wait()
        time.sleep(1.0)  # the later ones are pending on rank 0 meanwhile
        del pg
        return {"ok": True}
    holder = [pg]
    del pg
    first = holder[0].allreduce([t]).get_future()
    later = [holder[0].allreduce([t.clone()]).get_future() for _ in range(4)]
    dropped = threading.Event()

    def drop(fut):
        holder.clear()  # the last reference: ~Core on the completion thread
        dropped.set()

    first.then(drop)
    marked = 0
    for f in later:
        try:
            f.wait()
        except RuntimeError:
            pass  # failed by ~Core: marked with the error, which is the point
        marked += 1
    return {"ok": dropped.wait(10) and marked == len(later)}
