"""The TCP connections of a network namespace as its kernel lists them (/proc/PID/net/tcp of
any process in it): is a server still holding a client's connection? A real server records
its requests (an access log) but not its connections; the line of a request is written
before the server closes it, so once no connection to its port is open or closing on its side,
its record of them is complete."""

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


def _any(folder: str, ports: set[int], states: set[str]) -> bool:
    for table in ("tcp", "tcp6"):
        try:
            lines = Path(f"{folder}/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 3 and fields[3] in states and \
                    int(fields[1].rsplit(":", 1)[1], 16) in ports:
                return True
    return False
