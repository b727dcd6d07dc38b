"""One rank of tests/fabric/test_python_fabric.sh, inside a host namespace.

    fabric_ranks.py uid RANK ID_FILE        the unique id through a file
    fabric_ranks.py ddp RANK STORE_ADDR     DDP weft vs gloo (bodies_ddp)

Exits 0 when this rank's checks hold, 1 (with the reason) otherwise.
"""
import os
import sys
import time


def uid(rank, path):
    import numpy as np

    import weft

    if rank == 0:
        ident = weft.get_unique_id()  # neither WEFT_ROOT nor WEFT_SOCKET_IFNAME is set
        with open(path + ".tmp", "w") as f:
            f.write(ident.hex())
        os.rename(path + ".tmp", path)
    else:
        deadline = time.monotonic() + 60
        while not os.path.exists(path):
            if time.monotonic() > deadline:
                sys.exit("rank 1: no unique id from rank 0 within 60 s")
            time.sleep(0.05)
        with open(path) as f:
            ident = bytes.fromhex(f.read())
    comm = weft.Comm(2, ident, rank, timeout=30)
    x = np.full(100000, comm.rank + 1, dtype=np.float32)
    comm.allreduce(x)
    hosts = weft.topo(comm)["nhosts"]
    comm.destroy()
    if not (x == 3).all() or hosts != 2:
        sys.exit(f"rank {rank}: allreduce gave {x[:3]}, hosts {hosts} (expected 3, 2)")
    print(f"rank {rank}: unique id across namespaces: ok ({hosts} hosts)")


def ddp(rank, store):
    import bodies_ddp
    import test_ddp

    v = bodies_ddp.compare(rank, 2, 0, init_method=f"tcp://{store}")
    test_ddp.check_close(v)
    print(f"rank {rank}: DDP weft vs gloo across namespaces: ok, max parameter difference "
          f"{v['weft_vs_gloo']:.2e}, final loss {v['weft'][-1]:.4f}")


if __name__ == "__main__":
    what, rank, arg = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    (uid if what == "uid" else ddp)(rank, arg)
