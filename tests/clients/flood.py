#!/usr/bin/env python3
"""A client that floods evlab's view, one way per mode, then backs up honestly: whatever it
floods, evlab must stay within its bounds, and the attempt must fail (its evidence swamped,
counted against it), never pass and never be invalid.

Usage: flood.py MODE HOST PORT SOURCE [COUNT]

  checks      COUNT pipelined CHECK requests on one connection (default 200,000)
  segments    COUNT one-byte segments to the receiver, Nagle off (default 200,000): a CHECK
              line dribbled out a byte at a time, again and again
  connections COUNT connections to the receiver, each opened and closed (default 30,000)
  claims      COUNT lines on stdout (default 200,000)
"""

import hashlib
import os
import socket
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile import backup, claim  # noqa: E402 - beside this file


def checks(host: str, port: int, digest: str, count: int) -> None:
    with socket.create_connection((host, port), timeout=60) as s:
        line = f"CHECK {digest}\n".encode()
        drain = threading.Thread(target=lambda: _drain(s), daemon=True)
        drain.start()
        batch = line * 1000
        for _ in range(count // 1000):
            s.sendall(batch)
        s.shutdown(socket.SHUT_WR)
        drain.join(60)


def _drain(s: socket.socket) -> None:
    try:
        while s.recv(65536):
            pass
    except OSError:
        pass


def segments(host: str, port: int, digest: str, count: int) -> None:
    line = f"CHECK {digest}\n".encode()
    sent = 0
    while sent < count:
        with socket.create_connection((host, port), timeout=60) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            drain = threading.Thread(target=lambda: _drain(s), daemon=True)
            drain.start()
            try:
                for _ in range(200):          # a few hundred requests per connection
                    for b in line:
                        s.send(bytes([b]))
                        sent += 1
            except OSError:
                pass
            s.shutdown(socket.SHUT_WR)
            drain.join(10)


def connections(host: str, port: int, count: int) -> None:
    for _ in range(count):
        try:
            socket.create_connection((host, port), timeout=5).close()
        except OSError:
            pass


def main() -> int:
    mode, host, port, source = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    default = {"checks": 200_000, "segments": 200_000, "connections": 30_000,
               "claims": 200_000}[mode]
    count = int(sys.argv[5]) if len(sys.argv) > 5 else default
    digest = hashlib.sha256(open(source, "rb").read()).hexdigest()
    if mode == "checks":
        checks(host, port, digest, count)
    elif mode == "segments":
        segments(host, port, digest, count)
    elif mode == "connections":
        connections(host, port, count)
    else:
        out = sys.stdout
        for i in range(count):
            out.write(f'{{"claim": "progress", "n": {i}}}\n')
        out.flush()
    ok = backup(host, port, source)
    claim(claim="completed" if ok else "failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
