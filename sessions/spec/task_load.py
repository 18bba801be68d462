"""What a task.toml says of the load the lab runs against its servers ([load.NAME]): evlab's
own load generator (sessions/lab/load.py), in the lab's network and outside the client's
cgroup, sends requests to a server at a steady rate during every invocation and records each
one's outcome; the library's `no-request-failed` and `latency-bound` judge them."""

import re
from dataclasses import dataclass
from pathlib import Path

from sessions.spec.task_lab import OWN_RECORDS, ServerSpec, TaskError, check_keys

PROTOCOLS = ("http", "tcp")   # an HTTP/1.1 GET per connection, or a line and its answer
RATE_MAX = 200                # requests per second, per load
TIMEOUT_MS_MAX = 10_000
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,31}$")


@dataclass(frozen=True)
class LoadSpec:
    name: str
    target: str          # the server it sends to (by name)
    protocol: str        # http or tcp
    request: str         # http: the path; tcp: the line sent (a newline is added)
    rate: float          # requests per second, started on a steady beat
    timeout_ms: int      # a request not answered whole by then timed out


def parse_loads(file: Path, table: dict, servers: tuple[ServerSpec, ...]) -> tuple[LoadSpec, ...]:
    loads = []
    names = {s.name for s in servers}
    for name, spec in table.items():
        key = f"load.{name}"
        if not _NAME.match(name) or name in names or name in OWN_RECORDS or \
                not isinstance(spec, dict):
            raise TaskError(f"{file}: {key}: expected a table named like a word (not a "
                            "server's name)")
        check_keys(file, spec, "load", key)
        if spec.get("target") not in names:
            raise TaskError(f"{file}: {key}.target: expected one of the task's servers "
                            f"({', '.join(sorted(names)) or 'none'})")
        protocol = spec.get("protocol", "http")
        request = spec.get("request", "/" if protocol == "http" else "")
        if protocol not in PROTOCOLS or not isinstance(request, str) or not request or \
                "\n" in request or protocol == "http" and not request.startswith("/"):
            raise TaskError(f"{file}: {key}: protocol is {' or '.join(map(repr, PROTOCOLS))}; "
                            "request an HTTP path (\"/...\") or the line a tcp load sends")
        rate, timeout = spec.get("rate", 20), spec.get("timeout_ms", 1000)
        if not _number(rate, 0, RATE_MAX) or not _number(timeout, 0, TIMEOUT_MS_MAX) or \
                not isinstance(timeout, int):
            raise TaskError(f"{file}: {key}: rate is requests per second (up to {RATE_MAX}), "
                            f"timeout_ms a whole number of ms (up to {TIMEOUT_MS_MAX})")
        loads.append(LoadSpec(name, spec["target"], protocol, request, float(rate), timeout))
    return tuple(loads)


def _number(value, low: float, high: float) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and low < value <= high
