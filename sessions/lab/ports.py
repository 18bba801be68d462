"""Loopback ports, for the lab and a task's servers: a free one, and whether one answers."""

import errno
import random
import socket

HOST = "127.0.0.1"
FLOOR = 10000   # above the ports a machine's own services are usually given


def free_port() -> int:
    """A port nothing is bound to now, below the kernel's ephemeral range (taken by whoever
    binds it first). Below it, because a server that died (a crash, the client's act) leaves
    its port unbound until the lab starts it again: a port of the ephemeral range may then be
    handed to any bind(0) in the network, the lab's own load among them, whose connect to it
    would connect to itself, hold the port, and read its own request back as an answer."""
    low = _ephemeral_low()
    draw = random.SystemRandom()   # not the module's generator: forked labs share its state
    for _ in range(64 if low - FLOOR >= 1000 else 0):
        port = draw.randrange(FLOOR, low)
        with socket.socket() as s:
            try:
                s.bind((HOST, port))
            except OSError as e:
                if e.errno != errno.EADDRINUSE:
                    raise
                continue
            return port
    with socket.socket() as s:   # a machine whose ephemeral range leaves no room below it
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _ephemeral_low() -> int:
    """The lowest port of this network's ephemeral range (the calling thread's namespace)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return FLOOR   # unknown: the kernel's own choice


def answers(port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts a connection on the port."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False
