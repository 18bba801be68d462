"""Loopback ports, for the lab and a task's servers: a free one, and whether one answers."""

import socket

HOST = "127.0.0.1"


def free_port() -> int:
    """A port nothing listens on now (the kernel's choice; taken by whoever binds it first)."""
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def answers(port: int, timeout: float = 0.5) -> bool:
    """Whether something accepts a connection on the port."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout):
            return True
    except OSError:
        return False
