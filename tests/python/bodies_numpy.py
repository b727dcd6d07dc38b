"""Rank bodies for test_binding.py: the package's collectives against numpy."""

import os
import time

import numpy as np

import weft

DTYPES = ["int8", "uint8", "int32", "uint32", "int64", "uint64", "float16", "float32", "float64"]
OPS = ["sum", "prod", "min", "max", "avg"]
# Calls that only move bytes take any element type.
MOVE_DTYPES = ["uint8", "float16", "int32", "float64", "complex64", "bool"]


def inputs(rank, seed, dtype, op, count):
    """Rank @rank's input: exact in every type for every op over <= 4 ranks."""
    rng = np.random.default_rng(seed * 7919 + rank)
    dt = np.dtype(dtype)
    if op in ("min", "max"):
        if dt.kind in "iu":
            info = np.iinfo(dt)
            return rng.integers(info.min, info.max, count, dtype=dt, endpoint=True)
        return rng.standard_normal(count).astype(dt)
    if op == "prod":
        vals = [1, 2] if dt.kind in "iu" else [0.5, 1, 2]
        return rng.choice(vals, count).astype(dt)
    lo = 0 if dt.kind == "u" else -4
    return rng.integers(lo, lo + 8, count).astype(dt)


def expected(nranks, seed, dtype, op, count):
    stack = np.stack([inputs(r, seed, dtype, op, count) for r in range(nranks)])
    dt = np.dtype(dtype)
    if op == "sum":
        return stack.sum(axis=0, dtype=dt)
    if op == "prod":
        return stack.prod(axis=0, dtype=dt)
    if op == "min":
        return stack.min(axis=0)
    if op == "max":
        return stack.max(axis=0)
    total = stack.astype(np.float64).sum(axis=0)
    if dt.kind in "iu":  # integer avg truncates toward zero
        return np.trunc(total / nranks).astype(dt)
    return (total / nranks).astype(dt)


def same(got, want, dtype):
    if np.dtype(dtype).kind == "f":
        tol = {"float16": 2e-3, "float32": 1e-6, "float64": 1e-12}[str(np.dtype(dtype))]
        return np.allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)
    return np.array_equal(got, want)


def moving(rank, seed, dtype, count):
    """Bytes that differ per rank, for the calls that only move them."""
    rng = np.random.default_rng(seed * 104729 + rank)
    raw = rng.integers(0, 256, count * np.dtype(dtype).itemsize, dtype=np.uint8)
    if dtype == "bool":
        return (raw % 2).astype(bool)
    return raw.view(dtype)


def bytes_equal(a, b):
    """Equal as bytes: random bytes viewed as floats hold NaNs."""
    return a is not None and a.shape == b.shape and a.tobytes() == b.tobytes()


class Matrix:
    def __init__(self, comm):
        self.comm, self.rank, self.n = comm, comm.rank, comm.size
        self.failures, self.cases, self.seed = [], 0, 0

    def expect(self, ok, what):
        self.cases += 1
        if not ok:
            self.failures.append(f"rank {self.rank}: {what}")

    def finish(self, req_or_result, nb):
        return req_or_result.wait() if nb else req_or_result

    # ---- reductions
    def allreduce(self, dtype, op, count, nb, in_place):
        self.seed += 1
        x = inputs(self.rank, self.seed, dtype, op, count)
        want = expected(self.n, self.seed, dtype, op, count)
        call = self.comm.iallreduce if nb else self.comm.allreduce
        if in_place:
            got = self.finish(call(x, op=op), nb)
        else:
            out = np.empty_like(x)
            got = self.finish(call(x, out, op=op), nb)
        self.expect(same(got, want, dtype), f"allreduce {dtype} {op} count {count} nb {nb}")

    def reduce(self, dtype, op, count, root, nb):
        self.seed += 1
        x = inputs(self.rank, self.seed, dtype, op, count)
        keep = x.copy()
        want = expected(self.n, self.seed, dtype, op, count)
        call = self.comm.ireduce if nb else self.comm.reduce
        got = self.finish(call(x, op=op, root=root), nb)
        if self.rank == root:
            self.expect(same(got, want, dtype), f"reduce {dtype} {op} root {root}")
        else:
            self.expect(got is None and np.array_equal(x, keep), f"reduce {dtype} non-root")

    def reduce_scatter(self, dtype, op, per, nb):
        self.seed += 1
        x = inputs(self.rank, self.seed, dtype, op, per * self.n)
        want = expected(self.n, self.seed, dtype, op, per * self.n)
        call = self.comm.ireduce_scatter if nb else self.comm.reduce_scatter
        got = self.finish(call(x, op=op), nb)
        mine = want[self.rank * per:(self.rank + 1) * per]
        self.expect(same(got, mine, dtype), f"reduce_scatter {dtype} {op} per {per}")

    # ---- moving bytes
    def moves(self, dtype, count, nb):
        c, n, r = self.comm, self.n, self.rank
        self.seed += 1
        s = self.seed
        mine = moving(r, s, dtype, count)
        allv = [moving(q, s, dtype, count) for q in range(n)]
        got = self.finish((c.iallgather if nb else c.allgather)(mine), nb)
        self.expect(bytes_equal(got, np.concatenate(allv)), f"allgather {dtype} {count}")
        for root in sorted({0, n - 1}):
            buf = mine.copy() if r == root else np.zeros_like(mine)
            self.finish((c.ibroadcast if nb else c.broadcast)(buf, root=root), nb)
            self.expect(bytes_equal(buf, allv[root]), f"broadcast {dtype} root {root}")
            g = self.finish((c.igather if nb else c.gather)(mine, root=root), nb)
            if r == root:
                self.expect(bytes_equal(g, np.concatenate(allv)), f"gather {dtype} {root}")
            src = np.concatenate(allv) if r == root else None
            out = np.zeros_like(mine)
            self.finish((c.iscatter if nb else c.scatter)(src, out, root=root), nb)
            self.expect(bytes_equal(out, allv[r]), f"scatter {dtype} root {root}")
        blocks = [moving(r * n + j, s, dtype, count) for j in range(n)]
        got = self.finish((c.ialltoall if nb else c.alltoall)(np.concatenate(blocks)), nb)
        want = np.concatenate([moving(i * n + r, s, dtype, count) for i in range(n)])
        self.expect(bytes_equal(got, want), f"alltoall {dtype} {count}")

    def alltoallv(self, dtype, nb):
        c, n, r = self.comm, self.n, self.rank
        self.seed += 1
        s = self.seed

        def cnt(i, j):  # elements rank i sends rank j; some empty
            return 0 if (i + 2 * j) % 3 == 1 else 1 + (i * 5 + j * 3) % 7

        blocks = [moving(r * 64 + j, s, dtype, cnt(r, j)) for j in range(n)]
        recvcounts = [cnt(i, r) for i in range(n)]
        call = c.ialltoallv if nb else c.alltoallv
        got = self.finish(call(np.concatenate(blocks), [cnt(r, j) for j in range(n)],
                               recvcounts=recvcounts), nb)
        want = np.concatenate([moving(i * 64 + r, s, dtype, cnt(i, r)) for i in range(n)])
        self.expect(bytes_equal(got, want), f"alltoallv {dtype}")

    def sendrecv(self, dtype, nb):
        c, n, r = self.comm, self.n, self.rank
        if n == 1:
            return
        self.seed += 1
        right, left = (r + 1) % n, (r - 1) % n
        out = moving(r, self.seed, dtype, 33)
        into = np.zeros_like(out)
        # Even ranks send first: blocking pairs must not all send at once.
        with weft.group():
            reqs = [c.isend(out, right), c.irecv(into, left)]
        for q in reqs:
            q.wait()
        self.expect(bytes_equal(into, moving(left, self.seed, dtype, 33)), f"send/recv {dtype}")


def matrix(rank, nranks, port):
    comm = weft.init()
    m = Matrix(comm)
    k = 0
    for dtype in DTYPES:
        for op in OPS:
            k += 1
            count = [1, 7, 1000, 4099][k % 4]
            m.allreduce(dtype, op, count, nb=k % 2 == 0, in_place=k % 3 != 0)
            m.reduce(dtype, op, count, root=k % nranks, nb=k % 2 == 1)
            m.reduce_scatter(dtype, op, per=[1, 5, 300][k % 3], nb=k % 2 == 0)
    m.allreduce("float32", "sum", 300000, nb=True, in_place=True)
    for i, dtype in enumerate(MOVE_DTYPES):
        m.moves(dtype, [1, 17, 2000][i % 3], nb=i % 2 == 1)
        m.alltoallv(dtype, nb=i % 2 == 0)
        m.sendrecv(dtype, nb=i % 2 == 0)
    comm.barrier()
    comm.ibarrier().wait()
    comm.destroy()
    return {"failures": m.failures, "cases": m.cases}


def torch_tensors(rank, nranks, port):
    """The package on CPU tensors, bf16 included, without copies."""
    import torch

    comm = weft.init()
    t = torch.full((1000,), float(rank + 1), dtype=torch.bfloat16)
    ptr = t.data_ptr()
    comm.allreduce(t, op="sum")
    ok = t.data_ptr() == ptr and bool((t == sum(range(1, nranks + 1))).all())
    g = comm.allgather(torch.tensor([rank], dtype=torch.int64))
    ok = ok and g.tolist() == list(range(nranks)) and isinstance(g, torch.Tensor)
    errors = []
    for bad, word in ((torch.ones(4, 4).t(), "non-contiguous"),
                      (torch.ones(4, device="meta"), "CPU")):
        try:
            comm.allreduce(bad)
            errors.append(f"no error for {word}")
        except ValueError as e:
            if word not in str(e):
                errors.append(str(e))
    comm.destroy()
    return {"ok": ok, "errors": errors}


def topo(rank, nranks, port):
    comm = weft.init()
    doc = weft.topo(comm)
    host = weft.topo()
    sub = comm.split(rank % 2, key=-rank)
    subsize = sub.size if sub else 0
    if sub:
        sub.destroy()
    comm.destroy()
    return {"nranks": doc["nranks"], "ranks": len(doc["ranks"]), "hostname": host["hostname"],
            "subsize": subsize, "launch": weft.launch_info()["launcher"]}


# ---- errors that must become exceptions, not hangs
def mismatch(rank, nranks, port):
    comm = weft.init(timeout=20)
    try:
        comm.allreduce(np.ones(1000 + 100 * rank, dtype=np.float32))
        comm.barrier()  # the failure reaches the other rank at its next call at the latest
    except weft.WeftError as e:
        return {"raised": type(e).__name__, "status": int(e.status), "message": str(e)}
    return {"raised": None}


def dead_peer(rank, nranks, port):
    comm = weft.init(timeout=30)
    comm.barrier()
    if rank == nranks - 1:
        os._exit(0)  # dies without a word
    t0 = time.monotonic()
    try:
        comm.allreduce(np.ones(100000, dtype=np.float32))
        comm.allreduce(np.ones(10, dtype=np.float32))
    except weft.WeftError as e:
        return {"raised": type(e).__name__, "seconds": time.monotonic() - t0, "message": str(e)}
    return {"raised": None}


def late_peer(rank, nranks, port):
    comm = weft.init(timeout=2)
    t0 = time.monotonic()
    if rank == 1:
        time.sleep(8)
    try:
        comm.allreduce(np.ones(10, dtype=np.float32))
    except weft.WeftError as e:
        return {"raised": type(e).__name__, "seconds": time.monotonic() - t0, "message": str(e)}
    return {"raised": None, "seconds": time.monotonic() - t0}
