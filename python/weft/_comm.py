"""Communicators, requests and every collective, over libweft."""

import ctypes
import enum
import json
import os

from . import _buffers as B
from ._errors import WeftError, Status, check_init, comm_message, error_for, init_message
from ._lib import IN_PLACE, Config, FailedRank, UniqueId, c_comm, c_request, c_size, lib

SPLIT_NOCOLOR = -1


class Op(enum.IntEnum):
    """Reduction operations (weft_op_t). AVG on integers truncates toward zero."""

    SUM = 0
    PROD = 1
    MIN = 2
    MAX = 3
    AVG = 4


def _op(op):
    if isinstance(op, str):
        try:
            return Op[op.upper()]
        except KeyError:
            raise ValueError(f"op: unknown reduction '{op}' (sum, prod, min, max, avg)") from None
    try:
        return Op(op)
    except ValueError:
        raise ValueError(f"op: {op!r} is not a Weft reduction (weft.Op)") from None


def _config(timeout, progress_thread):
    cfg = Config(ctypes.sizeof(Config), 0.0, 0)
    if timeout is not None:
        seconds = timeout.total_seconds() if hasattr(timeout, "total_seconds") else timeout
        if seconds <= 0:
            raise ValueError(f"timeout: {timeout!r}; expected a positive number of seconds")
        cfg.timeout_seconds = float(seconds)
    if progress_thread is not None:
        cfg.progress_thread = 1 if progress_thread else -1
    return cfg


def _ptr(buf):
    return ctypes.c_void_p(buf.ptr) if buf is not None else None


class Request:
    """A non-blocking operation in flight. It holds the call's buffers (and
    count arrays) until the operation completes; ``wait()`` returns the
    call's result (what the blocking form returns). A request dropped
    before completion is waited for, so memory Weft still writes never goes
    back to Python."""

    def __init__(self, comm, handle, call, keep, result):
        self._comm = comm
        self._h = handle
        self._call = call
        self._keep = keep
        self._result = result
        self._status = None

    @property
    def done(self):
        return self._status is not None

    def _finish(self, st):
        self._status = st
        self._keep = None
        if st != Status.SUCCESS:
            raise error_for(st, comm_message(self._comm._h), self._call)

    def _orphaned(self):
        """Its communicator was destroyed first: Weft freed the request with
        it, so it must not be touched again (weft.h: open requests become
        invalid at weft_comm_destroy)."""
        if self._status is None and not self._comm._h:
            self._status = Status.INVALID_ARG
            self._keep = None
            raise WeftError(Status.INVALID_ARG,
                            "the communicator was destroyed before this request completed",
                            self._call)

    def test(self):
        """True when the operation has completed (raises if it failed)."""
        if self._status is not None:
            return True
        self._orphaned()
        st = lib.weft_test(ctypes.byref(self._h))
        if st == Status.INPROGRESS:
            return False
        self._finish(st)
        return True

    def wait(self):
        """Block until the operation completes (the GIL is released meanwhile)."""
        if self._status is None:
            self._orphaned()
            self._finish(lib.weft_wait(ctypes.byref(self._h)))
        return self._result

    def __del__(self):
        if self._status is None and self._comm is not None and self._comm._h:
            try:
                self.wait()
            except Exception:
                pass


class Comm:
    """A Weft communicator.

    ``Comm(nranks, unique_id, rank)`` joins the job that ``get_unique_id()``
    (on one process) started; ``Comm.from_env()`` takes rank and size from
    the launcher (WEFT_RANK/WEFT_NRANKS, torchrun, mpirun, srun). Every
    collective takes numpy arrays, CPU torch tensors or buffer-protocol
    objects and works on their memory in place, without copies; each has a
    non-blocking form (``i``-prefixed) returning a Request. Like the C
    API, one communicator must be used by one thread at a time.
    """

    def __init__(self, nranks, unique_id, rank, *, timeout=None, progress_thread=None):
        uid = UniqueId()
        raw = bytes(unique_id)
        if len(raw) != ctypes.sizeof(uid):
            raise ValueError(f"unique_id: {len(raw)} bytes, expected {ctypes.sizeof(uid)} "
                             "(from weft.get_unique_id())")
        ctypes.memmove(ctypes.addressof(uid), raw, len(raw))
        h = c_comm()
        cfg = _config(timeout, progress_thread)
        st = lib.weft_comm_init_rank(ctypes.byref(h), int(nranks), uid, int(rank),
                                     ctypes.byref(cfg))
        check_init(st, "weft_comm_init_rank")
        self._h = h

    @classmethod
    def from_env(cls, *, timeout=None, progress_thread=None):
        """A communicator from the launcher's environment (weft_comm_init_env)."""
        h = c_comm()
        cfg = _config(timeout, progress_thread)
        check_init(lib.weft_comm_init_env(ctypes.byref(h), ctypes.byref(cfg)),
                   "weft_comm_init_env")
        return cls._adopt(h)

    @classmethod
    def _adopt(cls, handle):
        self = cls.__new__(cls)
        self._h = handle
        return self

    # ---- the communicator
    def _check(self, st, call):
        if st != Status.SUCCESS:
            msg = comm_message(self._h) if self._h else init_message()
            raise error_for(st, msg, call)

    def _handle(self):
        if not self._h:
            raise ValueError("the communicator has been destroyed")
        return self._h

    @property
    def rank(self):
        v = ctypes.c_int()
        self._check(lib.weft_comm_rank(self._handle(), ctypes.byref(v)), "weft_comm_rank")
        return v.value

    @property
    def size(self):
        v = ctypes.c_int()
        self._check(lib.weft_comm_size(self._handle(), ctypes.byref(v)), "weft_comm_size")
        return v.value

    @property
    def last_error(self):
        return comm_message(self._h) if self._h else ""

    @property
    def async_error(self):
        """Status.SUCCESS while healthy, else the error that ended it."""
        v = ctypes.c_int()
        lib.weft_comm_get_async_error(self._handle(), ctypes.byref(v))
        return Status(v.value)

    def abort(self):
        """Fail outstanding and future operations (may be called from any thread)."""
        lib.weft_comm_abort(self._handle())

    def destroy(self):
        if self._h:
            lib.weft_comm_destroy(self._h)
            self._h = c_comm()

    close = destroy

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()

    def __del__(self):
        if getattr(self, "_h", None):
            self.destroy()

    def split(self, color, key=0):
        """A new communicator of the ranks that pass the same color (None:
        this rank joins none and gets None), ordered by key, then rank."""
        h = c_comm()
        c = SPLIT_NOCOLOR if color is None else int(color)
        self._check(lib.weft_comm_split(self._handle(), c, int(key), ctypes.byref(h)),
                    "weft_comm_split")
        return Comm._adopt(h) if h else None

    def revoke(self):
        """Every pending and later operation on this communicator, here and on
        every rank that can be reached, fails with WeftRevokedError
        (weft_comm_revoke; may be called from any thread)."""
        self._check(lib.weft_comm_revoke(self._handle()), "weft_comm_revoke")

    def shrink(self, exclude=(), abort=False):
        """A new communicator of the ranks still alive (weft_comm_shrink):
        the survivors agree on who is gone and go on without the launcher.
        Every live rank calls it with the same ``exclude`` list; a rank on
        that list gets None. ``abort``: revoke operations still in flight
        first. Raises WeftRevokedError if this rank was left out, and
        WeftRemoteError when there is no quorum (across hosts, more than
        half of the ranks must take part)."""
        ranks = [int(r) for r in exclude]
        arr = (ctypes.c_int * max(len(ranks), 1))(*ranks)
        h = c_comm()
        self._check(lib.weft_comm_shrink(self._handle(), arr if ranks else None, len(ranks),
                                         1 if abort else 0, ctypes.byref(h)),
                    "weft_comm_shrink")
        return Comm._adopt(h) if h else None

    def failed_ranks(self):
        """The ranks this rank knows to be dead, in the order it learned of
        them: a list of (rank, how, seconds_ago), how one of "killed",
        "stopped", "unreachable", "excluded" (weft_comm_failed_ranks)."""
        h = self._handle()
        count = ctypes.c_int()
        self._check(lib.weft_comm_failed_ranks(h, None, 0, ctypes.byref(count)),
                    "weft_comm_failed_ranks")
        arr = (FailedRank * max(count.value, 1))()
        self._check(lib.weft_comm_failed_ranks(h, arr, count.value, ctypes.byref(count)),
                    "weft_comm_failed_ranks")
        return [(e.rank, lib.weft_rank_failure_string(e.how).decode(), e.seconds_ago)
                for e in arr[:min(count.value, len(arr))]]

    def describe(self):
        """weft_comm_describe() as a dict (collective: every rank calls it)."""
        out = ctypes.c_void_p()
        self._check(lib.weft_comm_describe(self._handle(), ctypes.byref(out)),
                    "weft_comm_describe")
        return _json(out)

    def dump(self, path=None):
        """Write the flight recorder as JSON (weft_comm_dump): to @path, or with
        None to the file Weft writes in WEFT_TRACE_DIR. Returns the path
        written. Not collective; any thread (also while another waits in a
        call of this communicator). ``weft-topo --trace`` merges a job's files."""
        st = lib.weft_comm_dump(self._handle(), None if path is None else os.fsencode(path))
        self._check(st, "weft_comm_dump")
        return path if path is not None else _trace_path(self)

    # ---- running a call
    def _run(self, name, args, nb, keep, result):
        h = self._handle()
        if nb:
            req = c_request()
            self._check(getattr(lib, "weft_i" + name)(*args, h, ctypes.byref(req)),
                        "weft_i" + name)
            return Request(self, req, "weft_i" + name, keep, result)
        self._check(getattr(lib, "weft_" + name)(*args, h), "weft_" + name)
        return result

    def _count_check(self, buf, want, what, call):
        if buf.count != want:
            raise ValueError(f"{call}: {what} has {buf.count} elements, expected {want}")

    def _blocks(self, buf, what, call):
        n = self.size
        if buf.count % n:
            raise ValueError(f"{call}: {what} has {buf.count} elements, not a multiple of "
                             f"the {n} ranks")
        return buf.count // n

    # ---- AllReduce
    def _allreduce(self, sendbuf, recvbuf, op, nb):
        s = B.view(sendbuf, "allreduce: sendbuf", writable=recvbuf is None)
        dt, o = B.need_dtype(s, "allreduce: sendbuf"), _op(op)
        if recvbuf is None:
            args = (IN_PLACE, _ptr(s), s.count, dt, o)
            return self._run("allreduce", args, nb, (s,), sendbuf)
        r = B.view(recvbuf, "allreduce: recvbuf", writable=True)
        B.same_type(s, r, "allreduce")
        self._count_check(r, s.count, "recvbuf", "allreduce")
        return self._run("allreduce", (_ptr(s), _ptr(r), s.count, dt, o), nb, (s, r), recvbuf)

    def allreduce(self, sendbuf, recvbuf=None, op=Op.SUM):
        """recvbuf = op over all ranks of sendbuf; in place (in sendbuf)
        without recvbuf. Returns the result buffer."""
        return self._allreduce(sendbuf, recvbuf, op, False)

    def iallreduce(self, sendbuf, recvbuf=None, op=Op.SUM):
        return self._allreduce(sendbuf, recvbuf, op, True)

    # ---- AllGather
    def _allgather(self, sendbuf, recvbuf, nb):
        n = self.size
        if sendbuf is None:  # in place: this rank's block is already in recvbuf
            r = B.view(recvbuf, "allgather: recvbuf", writable=True)
            per = self._blocks(r, "recvbuf", "allgather") * r.itemsize
            return self._run("allgather", (IN_PLACE, _ptr(r), per, B.UINT8), nb, (r,), recvbuf)
        s = B.view(sendbuf, "allgather: sendbuf")
        if recvbuf is None:
            recvbuf = B.like(s, s.count * n)
        r = B.view(recvbuf, "allgather: recvbuf", writable=True)
        B.same_type(s, r, "allgather")
        self._count_check(r, s.count * n, "recvbuf", "allgather")
        args = (_ptr(s), _ptr(r), s.nbytes, B.UINT8)
        return self._run("allgather", args, nb, (s, r), recvbuf)

    def allgather(self, sendbuf, recvbuf=None):
        """recvbuf holds every rank's sendbuf, in rank order (allocated if
        None; sendbuf None: in place, this rank's block already in recvbuf)."""
        return self._allgather(sendbuf, recvbuf, False)

    def iallgather(self, sendbuf, recvbuf=None):
        return self._allgather(sendbuf, recvbuf, True)

    # ---- ReduceScatter
    def _reduce_scatter(self, sendbuf, recvbuf, op, nb):
        s = B.view(sendbuf, "reduce_scatter: sendbuf")
        dt, o = B.need_dtype(s, "reduce_scatter: sendbuf"), _op(op)
        per = self._blocks(s, "sendbuf", "reduce_scatter")
        if recvbuf is None:
            recvbuf = B.like(s, per)
        r = B.view(recvbuf, "reduce_scatter: recvbuf", writable=True)
        B.same_type(s, r, "reduce_scatter")
        self._count_check(r, per, "recvbuf", "reduce_scatter")
        args = (_ptr(s), _ptr(r), per, dt, o)
        return self._run("reduce_scatter", args, nb, (s, r), recvbuf)

    def reduce_scatter(self, sendbuf, recvbuf=None, op=Op.SUM):
        """Block `rank` of the reduction of every rank's sendbuf (size blocks)."""
        return self._reduce_scatter(sendbuf, recvbuf, op, False)

    def ireduce_scatter(self, sendbuf, recvbuf=None, op=Op.SUM):
        return self._reduce_scatter(sendbuf, recvbuf, op, True)

    # ---- Broadcast
    def _broadcast(self, buf, root, nb):
        b = B.view(buf, "broadcast: buf", writable=True)
        send = IN_PLACE if self.rank == root else None
        return self._run("broadcast", (send, _ptr(b), b.nbytes, B.UINT8, int(root)), nb, (b,),
                         buf)

    def broadcast(self, buf, root=0):
        """The root's buf lands in every rank's buf (in place)."""
        return self._broadcast(buf, root, False)

    def ibroadcast(self, buf, root=0):
        return self._broadcast(buf, root, True)

    # ---- Reduce
    def _reduce(self, sendbuf, recvbuf, op, root, nb):
        is_root = self.rank == root
        s = B.view(sendbuf, "reduce: sendbuf", writable=is_root and recvbuf is None)
        dt, o = B.need_dtype(s, "reduce: sendbuf"), _op(op)
        if recvbuf is None:
            send = IN_PLACE if is_root else _ptr(s)
            args = (send, _ptr(s) if is_root else None, s.count, dt, o, int(root))
            return self._run("reduce", args, nb, (s,), sendbuf if is_root else None)
        r = B.view(recvbuf, "reduce: recvbuf", writable=True)
        B.same_type(s, r, "reduce")
        self._count_check(r, s.count, "recvbuf", "reduce")
        args = (_ptr(s), _ptr(r), s.count, dt, o, int(root))
        return self._run("reduce", args, nb, (s, r), recvbuf if is_root else None)

    def reduce(self, sendbuf, recvbuf=None, op=Op.SUM, root=0):
        """The reduction lands on the root: in recvbuf, or in place in
        sendbuf without one. Returns it on the root, None elsewhere."""
        return self._reduce(sendbuf, recvbuf, op, root, False)

    def ireduce(self, sendbuf, recvbuf=None, op=Op.SUM, root=0):
        return self._reduce(sendbuf, recvbuf, op, root, True)

    # ---- AlltoAll and AlltoAllv
    def _alltoall(self, sendbuf, recvbuf, nb):
        s = B.view(sendbuf, "alltoall: sendbuf")
        per = self._blocks(s, "sendbuf", "alltoall")
        if recvbuf is None:
            recvbuf = B.like(s, s.count)
        r = B.view(recvbuf, "alltoall: recvbuf", writable=True)
        B.same_type(s, r, "alltoall")
        self._count_check(r, s.count, "recvbuf", "alltoall")
        args = (_ptr(s), _ptr(r), per * s.itemsize, B.UINT8)
        return self._run("alltoall", args, nb, (s, r), recvbuf)

    def alltoall(self, sendbuf, recvbuf=None):
        """Block j of this rank's sendbuf lands as block `rank` of rank j's recvbuf."""
        return self._alltoall(sendbuf, recvbuf, False)

    def ialltoall(self, sendbuf, recvbuf=None):
        return self._alltoall(sendbuf, recvbuf, True)

    def _sizes(self, values, what, itemsize):
        vals = [int(v) for v in values]
        if len(vals) != self.size:
            raise ValueError(f"alltoallv: {what} has {len(vals)} entries, expected {self.size}")
        if any(v < 0 for v in vals):
            raise ValueError(f"alltoallv: {what} has a negative entry")
        return (c_size * len(vals))(*[v * itemsize for v in vals]), vals

    @staticmethod
    def _packed(counts):
        out, at = [], 0
        for c in counts:
            out.append(at)
            at += c
        return out

    def _alltoallv(self, sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls, nb):
        s = B.view(sendbuf, "alltoallv: sendbuf")
        scount, sc = self._sizes(sendcounts, "sendcounts", s.itemsize)
        sdisp, _ = self._sizes(sdispls if sdispls is not None else self._packed(sc), "sdispls",
                               s.itemsize)
        rc = [int(v) for v in recvcounts]
        if recvbuf is None:
            recvbuf = B.like(s, sum(rc) if rdispls is None else
                             max((d + c for d, c in zip(rdispls, rc)), default=0))
        r = B.view(recvbuf, "alltoallv: recvbuf", writable=True)
        B.same_type(s, r, "alltoallv")
        rcount, _ = self._sizes(rc, "recvcounts", r.itemsize)
        rdisp, _ = self._sizes(rdispls if rdispls is not None else self._packed(rc), "rdispls",
                               r.itemsize)
        args = (_ptr(s), scount, sdisp, _ptr(r), rcount, rdisp, B.UINT8)
        return self._run("alltoallv", args, nb, (s, r, scount, sdisp, rcount, rdisp), recvbuf)

    def alltoallv(self, sendbuf, sendcounts, recvbuf=None, recvcounts=None, sdispls=None,
                  rdispls=None):
        """AlltoAll with a count per peer (elements); displacements default
        to the blocks packed in rank order."""
        if recvcounts is None:
            raise TypeError("alltoallv: recvcounts is required")
        return self._alltoallv(sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls,
                               False)

    def ialltoallv(self, sendbuf, sendcounts, recvbuf=None, recvcounts=None, sdispls=None,
                   rdispls=None):
        if recvcounts is None:
            raise TypeError("ialltoallv: recvcounts is required")
        return self._alltoallv(sendbuf, sendcounts, recvbuf, recvcounts, sdispls, rdispls, True)

    # ---- Gather and Scatter
    def _gather(self, sendbuf, recvbuf, root, nb):
        s = B.view(sendbuf, "gather: sendbuf")
        r = None
        if self.rank == root:
            if recvbuf is None:
                recvbuf = B.like(s, s.count * self.size)
            r = B.view(recvbuf, "gather: recvbuf", writable=True)
            B.same_type(s, r, "gather")
            self._count_check(r, s.count * self.size, "recvbuf", "gather")
        args = (_ptr(s), _ptr(r), s.nbytes, B.UINT8, int(root))
        return self._run("gather", args, nb, (s, r), recvbuf if self.rank == root else None)

    def gather(self, sendbuf, recvbuf=None, root=0):
        """Every rank's sendbuf, in rank order, in the root's recvbuf
        (allocated if None). Returns it on the root, None elsewhere."""
        return self._gather(sendbuf, recvbuf, root, False)

    def igather(self, sendbuf, recvbuf=None, root=0):
        return self._gather(sendbuf, recvbuf, root, True)

    def _scatter(self, sendbuf, recvbuf, root, nb):
        r = B.view(recvbuf, "scatter: recvbuf", writable=True)
        s = None
        if self.rank == root:
            s = B.view(sendbuf, "scatter: sendbuf")
            B.same_type(s, r, "scatter")
            self._count_check(s, r.count * self.size, "sendbuf", "scatter")
        args = (_ptr(s), _ptr(r), r.nbytes, B.UINT8, int(root))
        return self._run("scatter", args, nb, (s, r), recvbuf)

    def scatter(self, sendbuf, recvbuf, root=0):
        """Block r of the root's sendbuf lands in rank r's recvbuf (sendbuf
        is read on the root only)."""
        return self._scatter(sendbuf, recvbuf, root, False)

    def iscatter(self, sendbuf, recvbuf, root=0):
        return self._scatter(sendbuf, recvbuf, root, True)

    # ---- Barrier, Send, Recv
    def barrier(self):
        self._check(lib.weft_barrier(self._handle()), "weft_barrier")

    def ibarrier(self):
        return self._run("barrier", (), True, (), None)

    def _p2p(self, name, buf, peer, nb, writable):
        b = B.view(buf, f"{name}: buf", writable=writable)
        return self._run(name, (_ptr(b), b.nbytes, B.UINT8, int(peer)), nb, (b,), buf)

    def send(self, buf, peer):
        """Matched with the peer's recv from this rank, in call order."""
        self._p2p("send", buf, peer, False, False)

    def isend(self, buf, peer):
        return self._p2p("send", buf, peer, True, False)

    def recv(self, buf, peer):
        return self._p2p("recv", buf, peer, False, True)

    def irecv(self, buf, peer):
        return self._p2p("recv", buf, peer, True, True)


def _json(ptr):
    try:
        return json.loads(ctypes.string_at(ptr.value).decode())
    finally:
        lib.weft_describe_free(ptr)


def get_unique_id():
    """Start the bootstrap root in this process; returns the id (bytes) to
    hand to every rank's Comm(nranks, unique_id, rank)."""
    uid = UniqueId()
    check_init(lib.weft_get_unique_id(ctypes.byref(uid)), "weft_get_unique_id")
    return ctypes.string_at(ctypes.addressof(uid), ctypes.sizeof(uid))


def host():
    """This host as Weft sees it (weft_host_describe)."""
    out = ctypes.c_void_p()
    check_init(lib.weft_host_describe(ctypes.byref(out)), "weft_host_describe")
    return _json(out)


def settings():
    """Every WEFT_* variable with its default and help (weft_settings_describe)."""
    out = ctypes.c_void_p()
    check_init(lib.weft_settings_describe(ctypes.byref(out)), "weft_settings_describe")
    return _json(out)["settings"]


def _trace_path(comm):
    """The file weft_comm_dump(comm, NULL) wrote: the newest of this process's
    for the communicator in WEFT_TRACE_DIR (its name carries the id)."""
    d = os.environ.get("WEFT_TRACE_DIR", "")
    mine = [os.path.join(d, f) for f in os.listdir(d)
            if f.startswith("weft-trace-") and "-r%d-p%d-" % (comm.rank, os.getpid()) in f]
    return max(mine, key=os.path.getmtime) if mine else None


def dump(comm, path=None):
    """The flight recorder of @comm (a weft.Comm, or a torch process group of
    the "weft" backend) written as JSON: see Comm.dump()."""
    if hasattr(comm, "_weft_dump"):  # weft.torch's ProcessGroupWeft
        return comm._weft_dump("" if path is None else os.fspath(path)) or None
    return comm.dump(path)


def topo(comm=None):
    """weft-topo's JSON as a dict: the job of @comm (a weft.Comm, or a torch
    process group of the "weft" backend; weft_comm_describe, a collective),
    or without one this host (weft_host_describe)."""
    if comm is None:
        return host()
    comm = getattr(comm, "wrapped_pg", comm)  # DETAIL's ProcessGroupWrapper
    if hasattr(comm, "_weft_describe"):  # weft.torch's ProcessGroupWeft
        return json.loads(comm._weft_describe())
    return comm.describe()
