"""The TCP sockets of a network namespace as its kernel lists them (/proc/PID/net/tcp of any
process in it). Is a server still holding a client's connection? A real server records its
requests (an access log) but not its connections; the line of a request is written before
the server closes it, so once no connection to its port is open or closing on its side, its
record of them is complete. And what does a process listen on, by the sockets it holds
itself (its descriptors): a server started again is up only once its own socket listens."""

import contextlib
import os
import socket
from collections.abc import Iterator
from pathlib import Path

# states of the server's side still to be finished: established, being accepted, the peer
# gone but the server not yet closed (CLOSE_WAIT); /include/net/tcp_states.h
BUSY = {"01", "03", "08"}
LISTEN = "0A"


def busy_ports(pid: int, ports: set[int]) -> bool:
    """Has the namespace of pid a connection on one of ports (the local side) in BUSY?"""
    return _any(f"/proc/{pid}/net", ports, BUSY)


def listening(port: int) -> bool:
    """Does a socket listen on port in the calling thread's network namespace (run it there:
    probes/boundary/netns.py run_in)? Read from the kernel's table: no connection is made,
    so a listener that is not ours (what a client left) sees nothing of the look."""
    return _any("/proc/thread-self/net", {port}, {LISTEN})


def socket_inodes(pid: int) -> set[str]:
    """The sockets a process holds open, as its fd links name them ("socket:[INODE]")."""
    held = set()
    with contextlib.suppress(OSError):   # the process is gone
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):   # closed meanwhile
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    held.add(link)
    return held


def listeners(pid: int) -> list[tuple[str, int]]:
    """What the process listens on (TCP), as its own network namespace lists it, and only the
    sockets it holds itself: (address:port, port) of each."""
    held, found = socket_inodes(pid), []
    for family, fields in _rows(f"/proc/{pid}/net"):
        if len(fields) < 10 or fields[3] != LISTEN or f"socket:[{fields[9]}]" not in held:
            continue
        hex_ip, hex_port = fields[1].split(":")
        raw = bytes.fromhex(hex_ip)   # the kernel prints each 32-bit word in host order
        raw = b"".join(raw[i:i + 4][::-1] for i in range(0, len(raw), 4))
        port = int(hex_port, 16)
        found.append((f"{socket.inet_ntop(family, raw)}:{port}", port))
    return found


def listens_on(pids: list[int], port: int) -> bool:
    """Does one of pids hold the socket that listens on port? Something answering on a port
    is not yet the server one started: what a client left may hold it while the server is
    still to listen, and the server then dies at its bind."""
    return any(p == port for pid in pids for _, p in listeners(pid))


def _any(folder: str, ports: set[int], states: set[str]) -> bool:
    return any(len(fields) > 3 and fields[3] in states
               and int(fields[1].rsplit(":", 1)[1], 16) in ports for _, fields in _rows(folder))


def _rows(folder: str) -> Iterator[tuple[int, list[str]]]:
    """Each socket row of a namespace's TCP tables (folder: a /proc/PID/net), IPv4's then
    IPv6's, as (its address family, its fields); a table that cannot be read has none."""
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        try:
            lines = Path(f"{folder}/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            yield family, line.split()
