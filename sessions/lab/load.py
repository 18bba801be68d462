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
status: the HTTP status or null, answer: a tcp load's answer line, latency_ns, sport: its
source port, by which the lab tells its connections from the client's; t_ns: when it began),
and `load_stopped` (load, sent, and how many of each outcome) once every request ended.
"""

import argparse
import asyncio
import signal
import socket
import time
from collections import Counter

from sessions.lab.event_log import EventLog, exit_with_parent

HOST = "127.0.0.1"
ANSWER_MAX = 65_536   # what a request reads of its answer, at most
ID_HEADER = "X-Evlab-Request"   # each http request's id, for a server's log to write


async def _exchange(args, rid: str, port_box: list[int]) -> tuple[int | None, str]:
    """One connection, one request, its whole answer: (HTTP status or None, answer line)."""
    # its source port known before the connect: a request that never connects (a backlog
    # full, a listener that never accepts) is still told apart from the client's packets
    sock = socket.socket()
    try:
        sock.setblocking(False)
        sock.bind((HOST, 0))
        port_box.append(sock.getsockname()[1])
        await asyncio.get_running_loop().sock_connect(sock, (HOST, args.port))
    except BaseException:
        sock.close()
        raise
    reader, writer = await asyncio.open_connection(sock=sock)
    try:
        if args.protocol == "http":
            writer.write(f"GET {args.request} HTTP/1.1\r\nHost: {HOST}\r\n{ID_HEADER}: {rid}"
                         "\r\nConnection: close\r\n\r\n".encode())
            await writer.drain()
            answer = await reader.read(ANSWER_MAX)
            while await reader.read(ANSWER_MAX):   # to its end: answered whole
                pass
            words = answer.split(b"\r\n", 1)[0].split()
            if len(words) < 2 or not words[0].startswith(b"HTTP/") or not words[1].isdigit():
                raise asyncio.IncompleteReadError(answer[:64], None)
            return int(words[1]), ""
        writer.write(args.request.encode() + b"\n")
        await writer.drain()
        line = await reader.readuntil(b"\n")
        return None, line.decode(errors="replace").strip()[:80]
    finally:
        writer.close()


async def _request(args, rid: str, log: EventLog, counts: Counter) -> None:
    start, ports = time.monotonic_ns(), list[int]()
    status, answer, outcome = None, "", "answered"
    try:
        async with asyncio.timeout(args.timeout_ms / 1000):
            status, answer = await _exchange(args, rid, ports)
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
             answer=answer, latency_ns=time.monotonic_ns() - start,
             sport=ports[0] if ports else None)


async def run(args, log: EventLog) -> None:
    stop, counts, pending = asyncio.Event(), Counter[str](), set[asyncio.Task]()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
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
