"""paced_flow.py — one TCP flow at a rate the kernel paces (SO_MAX_PACING_RATE).

  paced_flow.py serve HOST PORT            read and discard, connection after connection
  paced_flow.py send HOST PORT RATE SECS   send for SECS at RATE bytes/s (0: unpaced)

probe_marks.sh uses it to see what the fabric's CE marker does to a flow
that no controller reacts to.
"""
import socket
import sys
import time

SO_MAX_PACING_RATE = getattr(socket, "SO_MAX_PACING_RATE", 47)


def serve(host, port):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    s.listen(8)
    while True:
        c, _ = s.accept()
        while c.recv(1 << 20):
            pass
        c.close()


def send(host, port, rate, secs):
    c = socket.create_connection((host, port), timeout=10)
    if rate > 0:
        c.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, int(rate))
    buf = b"\0" * 65536
    t0 = time.monotonic()
    n = 0
    while time.monotonic() - t0 < secs:
        n += c.send(buf)
    c.close()
    print("%.1f" % (n / (time.monotonic() - t0) / 1e6))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "serve":
        serve(sys.argv[2], int(sys.argv[3]))
    elif len(sys.argv) == 6 and sys.argv[1] == "send":
        send(sys.argv[2], int(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5]))
    else:
        sys.exit(__doc__)
