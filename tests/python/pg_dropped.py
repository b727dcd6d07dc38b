"""A future callback drops the last reference to a weft process group, so
~Core runs on the group's own completion thread (a use after free of the
old design: that thread went on with the freed Core). Run alone, with
MALLOC_PERTURB_ set so that freed memory is garbage at once: the run must
end cleanly, every future marked, within its time. Prints "ok"."""
import datetime
import os
import sys

import torch
import torch.distributed as dist

import weft.torch

os.environ.setdefault("WEFT_SOCKET_IFNAME", "lo")


def main():
    store = dist.HashStore()
    pg = weft.torch.ProcessGroupWeft(store, 0, 1, datetime.timedelta(seconds=30))
    holder = [pg]
    del pg
    t = torch.ones(4096)
    futs = [holder[0].allreduce([t]).get_future() for _ in range(8)]
    seen = []

    def drop(fut):
        seen.append(fut.value()[0].sum().item())
        holder.clear()  # the last reference: ~Core on the completion thread
        return None

    # Wait for the callbacks' own futures: a future's wait() returns when
    # it is marked, which may be before its callbacks have run.
    chained = [futs[0].then(drop)]
    chained += [f.then(lambda f: seen.append(f.value()[0].sum().item())) for f in futs[1:]]
    for c in chained:
        c.wait()
    if sorted(seen) != [4096.0] * len(futs):
        print("futures:", seen)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
