#!/usr/bin/env python3
"""A backup client that reaches past its lab, one way per mode.

Usage: reach.py MODE HOST PORT SOURCE [TARGETS...]

Each try is reported in one JSON claim {"claim": "reach", "mode": ..., "tries": {what: result}}
(result "ok" when it got through, else the error); then it backs up (the minimal protocol of
tests/clients/hostile.py) unless the mode says otherwise.

  escape    TARGETS are TCP_PORT UDP_PORT ABSTRACT_NAME of listeners on the HOST's loopback (the
            test's): a TCP connect and a byte to 127.0.0.1, 127.0.0.2 and [::1] and
            [::ffff:127.0.0.1] at TCP_PORT, a datagram to 127.0.0.1:UDP_PORT, a Fast Open
            sendto to 127.0.0.1:7, a connect to
            the abstract AF_UNIX socket, an AF_PACKET and a raw IP socket, a datagram to the
            nameserver of /etc/resolv.conf, and a byte to every listener in /proc/net/tcp{,6}
  bypass    find the receiver's own port in /proc/net/tcp (the listener that is neither PORT
            nor the decoy's, TARGETS[0]) and upload there, around the fault proxy at PORT
  flood     for TARGETS[0] seconds: a byte to every listener it can find in /proc/net/tcp{,6}
            and every port of 127.0.0.1 and ::1 in the ephemeral range, every ephemeral port it
            can bind held, and a flood of connections to PORT; then an honest backup. Its claim
            says when it began and ended (wall clock) so a test can check the overlap. Once the
            receiver holds the source (a re-run) it binds and holds what it can, floods no time.
  honest-slow  sleep TARGETS[0] seconds, then an honest backup (a victim beside `flood`)
  junk-first   no recovery logic, but two uploads first to absorb a one-shot fault: 100,000
               bytes under another digest, then 1,000 bytes under the source's (cut off); then
               one plain backup
  refused-first  no recovery logic, but the source sent whole first under a PUT line the
               receiver refuses (a length over its 16 MiB limit) to spend a one-shot wire fault
               bound to the source's upload; then one plain backup
"""

import hashlib
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile import backup, claim  # noqa: E402 - beside this file

EPHEMERAL = range(32768, 61000)   # Linux's default net.ipv4.ip_local_port_range


def attempt(fn, *args) -> str:
    try:
        fn(*args)
        return "ok"
    except OSError as e:
        return e.strerror or type(e).__name__


def tcp_byte(family: int, address: str, port: int, timeout: float = 1.0) -> None:
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect((address, port))
        s.sendall(b"x")


def listeners() -> list[tuple[int, str, int]]:
    """(family, address, port) of every TCP listener this process can see."""
    found = []
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        try:
            rows = open(f"/proc/net/{table}").read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            fields = row.split()
            if fields[3] != "0A":
                continue
            hex_ip, hex_port = fields[1].split(":")
            raw = bytes.fromhex(hex_ip)
            raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
            found.append((family, socket.inet_ntop(family, raw), int(hex_port, 16)))
    return found


def escape(tcp_port: int, udp_port: int, abstract: str) -> dict:
    tries = {}
    for address in ("127.0.0.1", "127.0.0.2", "::1", "::ffff:127.0.0.1"):
        family = socket.AF_INET6 if ":" in address else socket.AF_INET
        tries[f"tcp {address}"] = attempt(tcp_byte, family, address, tcp_port)

    def datagram(address: str, port: int) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"x", (address, port))
    tries["udp 127.0.0.1"] = attempt(datagram, "127.0.0.1", udp_port)

    def fast_open(port: int) -> None:   # a connect without connect(2): SYN with data
        with socket.socket() as s:
            s.sendto(b"x", socket.MSG_FASTOPEN, ("127.0.0.1", port))
    tries["fastopen 127.0.0.1:7"] = attempt(fast_open, 7)

    def unix() -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect("\0" + abstract)
            s.sendall(b"x")
    tries["abstract"] = attempt(unix)
    tries["packet socket"] = attempt(lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW,
                                                           socket.htons(3)).close())
    tries["raw socket"] = attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW,
                                                        socket.IPPROTO_RAW).close())
    nameserver = next((line.split()[1] for line in open("/etc/resolv.conf")
                       if line.startswith("nameserver")), "10.255.255.53")
    tries["dns"] = attempt(datagram, nameserver, 53)
    for family, address, port in listeners():
        tries[f"listener {address}:{port}"] = attempt(tcp_byte, family, address, port)
    return tries


def bypass(host: str, port: int, decoy_port: int) -> tuple[dict, int | None]:
    others = [p for f, a, p in listeners() if f == socket.AF_INET and p not in (port, decoy_port)]
    return {"listeners": [p for _, _, p in listeners()]}, (others[0] if others else None)


def flood(seconds: float, port: int) -> dict:
    began, held, tries = time.time(), [], {"reached": 0, "bound": 0, "connections": 0}
    for p in EPHEMERAL:   # every ephemeral port it can take, held until the end
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p))
            held.append(s)
        except OSError:
            s.close()
        if len(held) >= 900:   # its open-files limit comes first; enough to show the point
            break
    tries["bound"] = len(held)
    while time.time() - began < seconds:
        targets = [(f, a, p) for f, a, p in listeners()]
        targets += [(socket.AF_INET, "127.0.0.1", p) for p in range(32768, 33768)]
        targets += [(socket.AF_INET6, "::1", p) for p in range(32768, 33768)]
        for family, address, p in targets:
            if attempt(tcp_byte, family, address, p, 0.2) == "ok":
                tries["reached"] += 1
        for _ in range(50):
            if attempt(tcp_byte, socket.AF_INET, "127.0.0.1", port, 0.2) == "ok":
                tries["connections"] += 1
    for s in held:
        s.close()
    tries.update(began=began, ended=time.time())
    return tries


def holds(host: str, port: int, source: str) -> bool:
    """Whether the receiver already has the source (its CHECK answered HAVE)."""
    digest = hashlib.sha256(open(source, "rb").read()).hexdigest()
    with socket.create_connection((host, port), timeout=20) as s:
        s.sendall(f"CHECK {digest}\n".encode())
        return s.makefile("rb").readline().strip() == b"HAVE"


def junk_first(host: str, port: int, source: str) -> dict:
    data = open(source, "rb").read()
    tries = {}
    for digest, size, sent in ((hashlib.sha256(b"other").hexdigest(), 100_000, 100_000),
                               (hashlib.sha256(data).hexdigest(), len(data), 1_000)):
        def upload(digest=digest, size=size, sent=sent) -> None:
            with socket.create_connection((host, port), timeout=20) as s:
                s.sendall(f"PUT {digest} {size}\n".encode() + os.urandom(sent))
                if sent == size:
                    s.makefile("rb").readline()
        tries[f"{size} bytes, {sent} sent"] = attempt(upload)
    return tries


def refused_first(host: str, port: int, source: str) -> dict:
    data = open(source, "rb").read()

    def upload() -> None:
        with socket.create_connection((host, port), timeout=20) as s:
            s.sendall(f"PUT {hashlib.sha256(data).hexdigest()} 99999999\n".encode() + data)
            s.makefile("rb").readline()
    return {"refused upload": attempt(upload)}


def main() -> int:
    mode, host, port, source, targets = (sys.argv[1], sys.argv[2], int(sys.argv[3]),
                                         sys.argv[4], sys.argv[5:])
    if mode == "escape":
        claim(claim="reach", mode=mode, tries=escape(int(targets[0]), int(targets[1]),
                                                     targets[2]))
        ok = backup(host, port, source)
    elif mode == "bypass":
        tries, receiver = bypass(host, port, int(targets[0]))
        ok = False
        try:
            ok = receiver is not None and backup(host, receiver, source)
            tries["upload"] = "ok" if ok else f"no upload (receiver port {receiver})"
        except OSError as e:
            tries["upload"] = e.strerror or type(e).__name__
        claim(claim="reach", mode=mode, tries=tries, receiver=receiver)
    elif mode == "flood":
        seconds = 0.0 if holds(host, port, source) else float(targets[0])
        claim(claim="reach", mode=mode, tries=flood(seconds, port))
        ok = backup(host, port, source)
    elif mode == "junk-first":
        claim(claim="reach", mode=mode, tries=junk_first(host, port, source))
        ok = backup(host, port, source)
    elif mode == "refused-first":
        claim(claim="reach", mode=mode, tries=refused_first(host, port, source))
        ok = backup(host, port, source)
    elif mode == "honest-slow":
        began = time.time()
        time.sleep(float(targets[0]))
        ok = backup(host, port, source)
        claim(claim="reach", mode=mode, tries={"began": began, "ended": time.time()})
    else:
        raise SystemExit(f"unknown mode {mode}")
    claim(claim="completed" if ok else "failed")
    return 0 if ok else 1


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as e:   # said on stdout, where the test reads it (stderr is not kept)
        claim(claim="failed", error=f"{type(e).__name__}: {e}")
        sys.exit(1)
