#!/usr/bin/python3
"""uplink_probe.py ME PARTNER BYTES REPS T0 GAP — one host's side of the
raw-TCP probe of docs/bench/issue26-explain/uplink_probe.sh: one TCP
connection to PARTNER (port 45991), BYTES sent on it while BYTES arrive on
the partner's, REPS times, rep k starting at wall time T0 + k * GAP (the
hosts are namespaces of one machine: one clock). Prints "rep seconds" per
rep: the time until both directions completed (the receiver saw every
byte; the sender's last byte acknowledged as far as close-free TCP can
tell: the partner's receive finishing is what the partner prints)."""
import socket
import sys
import threading
import time

me, partner, nbytes, reps, t0, gap = (sys.argv[1], sys.argv[2], int(sys.argv[3]),
                                      int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]))
PORT = 45991
srv = socket.socket()
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind((me, PORT))
srv.listen(1)
out = None
deadline = time.time() + 20
while out is None:
    try:
        out = socket.create_connection((partner, PORT), timeout=1)
    except OSError:
        if time.time() > deadline:
            sys.exit(f"{me}: cannot connect to {partner}")
        time.sleep(0.05)
inc, _ = srv.accept()
out.settimeout(None)
buf = bytearray(nbytes)
view = memoryview(bytearray(1 << 20))


def receive():
    left = nbytes
    while left:
        n = inc.recv_into(view, min(left, len(view)))
        if not n:
            sys.exit(f"{me}: {partner} closed")
        left -= n


for k in range(reps):
    start = t0 + k * gap
    time.sleep(max(0.0, start - time.time()))
    t = time.perf_counter()
    r = threading.Thread(target=receive)
    r.start()
    out.sendall(buf)
    r.join()
    print(k, "%.6f" % (time.perf_counter() - t), flush=True)
out.close()
inc.close()
