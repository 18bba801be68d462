"""evlab's load generator: requests to one of the lab's servers at a steady rate, each one's
outcome on record, until SIGTERM (then the requests in flight end, by their timeout at most).
The lab starts one per [load.NAME] of the task for every invocation, in the lab's network and
outside the client's cgroup: nothing it does is the client's (docs/tasks.md, "Load").

    python -m sessions.lab.load --events PATH --name NAME --port P --protocol http|tcp \
        --request /path|LINE --rate N --timeout-ms MS [--invocation N]

Its records (JSON lines, t_ns on CLOCK_MONOTONIC): `load_started` (load, port, rate), one
`request` per request (load, id: `NAME-INVOCATION-K`, the K-th request of that invocation,
unique in the scenario, which an http load sends as the header `X-Evlab-Request` so that a
server's own log can name it; outcome: answered | refused | reset | closed | timeout | error,
status: the HTTP status or null, answer: a tcp load's answer line, latency_ns: an answered
one's latency as the service gave it (_exchange), a failed one's time until it failed, sport: its
source port, by which the lab tells its connections from the client's; t_ns: when it began),
and `load_stopped` (load, sent, and how many of each outcome) once every request ended.
"""

import argparse
import asyncio
import signal
import socket
import struct
import time
from collections import Counter

from sessions.lab.event_log import EventLog, exit_with_parent

HOST = "127.0.0.1"
ANSWER_MAX = 65_536   # what a request reads of its answer, at most
ID_HEADER = "X-Evlab-Request"   # each http request's id, for a server's log to write


# the kernel's time of each received segment (CLOCK_REALTIME), on recvmsg's ancillary data:
# <asm-generic/socket.h> SO_TIMESTAMPNS_OLD (a 64-bit struct timespec on x86-64)
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)
STAMP_SPACE = socket.CMSG_SPACE(16)
TCP_INFO_SIZE, TOTAL_RETRANS = 104, 100   # struct tcp_info: tcpi_total_retrans's offset


async def _exchange(args, rid: str, port_box: list[int]) -> tuple[int | None, str, int]:
    """One connection, one request, its whole answer: (HTTP status or None, answer line,
    latency). The latency is the service's, not this process's: from the request's send to
    the answer's arrival as the kernel stamped it (a read's stamp is that of the last segment
    it returns: the answer's end, or the connection's end come with it), so time this process
    spent waiting for a CPU on a busy machine, to send or to read what had come, is no part
    of it; a connect counts whole only when the kernel had to send its SYN again (a full
    backlog)."""
    loop = asyncio.get_running_loop()
    # its source port known before the connect: a request that never connects (a backlog
    # full, a listener that never accepts) is still told apart from the client's packets
    sock = socket.socket()
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        sock.bind((HOST, 0))
        port_box.append(sock.getsockname()[1])
        began = time.time_ns()
        await loop.sock_connect(sock, (HOST, args.port))
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, TCP_INFO_SIZE)
        waited = time.time_ns() - began if info[TOTAL_RETRANS:TOTAL_RETRANS + 4] != bytes(4) \
            else 0
        http = args.protocol == "http"
        request = (f"GET {args.request} HTTP/1.1\r\nHost: {HOST}\r\n{ID_HEADER}: {rid}"
                   "\r\nConnection: close\r\n\r\n" if http else args.request + "\n").encode()
        sent = time.time_ns()
        await loop.sock_sendall(sock, request)
        answer, came = await _answer(sock, until_closed=http)
        latency = waited + max(0, came - sent)
        if http:
            words = answer.split(b"\r\n", 1)[0].split()
            if len(words) < 2 or not words[0].startswith(b"HTTP/") or not words[1].isdigit():
                raise asyncio.IncompleteReadError(answer[:64], None)
            return int(words[1]), "", latency
        line = answer.split(b"\n", 1)[0]
        return None, line.decode(errors="replace").strip()[:80], latency
    finally:
        sock.close()


async def _answer(sock: socket.socket, until_closed: bool) -> tuple[bytes, int]:
    """The answer (to the connection's end, or to its first line; ANSWER_MAX bytes of it kept)
    and when it came in, by the kernel's clock."""
    answer, came = b"", 0
    while True:
        chunk, stamp = await _received(sock)
        if not chunk:
            if until_closed and answer:
                return answer, came
            raise asyncio.IncompleteReadError(answer[:64], None)   # ended before it answered
        came = stamp
        answer = (answer + chunk)[:ANSWER_MAX]
        if not until_closed and b"\n" in answer:
            return answer, came
        if not until_closed and len(answer) >= ANSWER_MAX:
            raise asyncio.LimitOverrunError("no line in the answer's first 64 KiB", len(answer))


def _settle(ready: asyncio.Future) -> None:
    if not ready.done():
        ready.set_result(None)


async def _received(sock: socket.socket) -> tuple[bytes, int]:
    """What the socket has (b"": its end) and the kernel's time of its arrival (ns)."""
    loop = asyncio.get_running_loop()
    while True:
        try:
            data, ancillary, _, _ = sock.recvmsg(ANSWER_MAX, STAMP_SPACE)
        except (BlockingIOError, InterruptedError):
            ready = loop.create_future()
            loop.add_reader(sock.fileno(), _settle, ready)
            try:
                await ready
            finally:
                loop.remove_reader(sock.fileno())
            continue
        stamp = _stamp(ancillary)
        return data, time.time_ns() if stamp is None else stamp   # an end of file has none


def _stamp(ancillary: list) -> int | None:
    for level, kind, value in ancillary:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(value) >= 16:
            seconds, nanoseconds = struct.unpack_from("qq", value)
            return seconds * 1_000_000_000 + nanoseconds
    return None


async def _stamping() -> socket.socket:
    """A socket kept open for the run so that the kernel stamps what arrives, once it does.
    The machine's first socket to ask turns the stamping on a moment later (from a work queue),
    and the last to close turns it off: an answer that came unstamped would be timed by when
    this process read it. It sends itself a datagram until one comes stamped on its arrival
    (two seconds at most; past that, an unstamped answer is timed at its read). A datagram
    that came unstamped is stamped when it is read, never before: so the test is a stamp
    earlier than the read."""
    keeper = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    keeper.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
    keeper.setblocking(False)
    keeper.bind((HOST, 0))
    for _ in range(400):
        keeper.sendto(b".", keeper.getsockname())
        await asyncio.sleep(0.005)
        before_read = time.time_ns()
        try:
            stamp = _stamp(keeper.recvmsg(1, STAMP_SPACE)[1])
        except BlockingIOError:
            continue
        if stamp is not None and stamp < before_read:
            break
    return keeper


async def _request(args, rid: str, log: EventLog, counts: Counter) -> None:
    start, ports = time.monotonic_ns(), list[int]()
    status, answer, outcome, latency = None, "", "answered", None
    try:
        async with asyncio.timeout(args.timeout_ms / 1000):
            status, answer, latency = await _exchange(args, rid, ports)
    except TimeoutError:
        outcome = "timeout"
    except ConnectionRefusedError:
        outcome = "refused"
    except (ConnectionResetError, BrokenPipeError):
        outcome = "reset"
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        outcome = "closed"   # it ended the connection before a whole answer
    except OSError:
        outcome = "error"
    counts[outcome] += 1
    log.emit("request", t_ns=start, load=args.name, id=rid, outcome=outcome, status=status,
             answer=answer, latency_ns=latency if latency is not None
             else time.monotonic_ns() - start,
             sport=ports[0] if ports else None)


async def run(args, log: EventLog) -> None:
    stop, counts, pending = asyncio.Event(), Counter[str](), set[asyncio.Task]()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    keeper = await _stamping()
    log.emit("load_started", load=args.name, port=args.port, rate=args.rate)
    watchdog = asyncio.create_task(exit_with_parent(stop))
    beat, sent = time.monotonic(), 0
    while not stop.is_set():
        sent += 1
        rid = f"{args.name}-{args.invocation}-{sent}"
        task = asyncio.create_task(_request(args, rid, log, counts))
        pending.add(task)
        task.add_done_callback(pending.discard)
        beat += 1 / args.rate   # a steady beat: a slow answer does not slow the next request
        try:
            await asyncio.wait_for(stop.wait(), max(0.0, beat - time.monotonic()))
        except TimeoutError:
            pass
    if pending:
        await asyncio.wait(pending)
    watchdog.cancel()
    keeper.close()
    log.emit("load_stopped", load=args.name, sent=sent, **counts)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m sessions.lab.load",
                                description=__doc__.split("\n")[0])
    p.add_argument("--events", required=True)
    p.add_argument("--name", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--protocol", choices=("http", "tcp"), default="http")
    p.add_argument("--request", default="/")
    p.add_argument("--rate", type=float, default=20.0)
    p.add_argument("--timeout-ms", type=int, default=1000)
    p.add_argument("--invocation", type=int, default=1)   # in its requests' ids
    args = p.parse_args(argv)
    with open(args.events, "a") as out:
        asyncio.run(run(args, EventLog(out)))


if __name__ == "__main__":
    main()
