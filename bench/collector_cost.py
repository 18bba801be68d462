"""What the BCC collector costs a session once: compile + load, and close (detach everything).

The suite pays these once per run, so they explain the traced suite's fixed cost. `close` is
timed twice: after uprobes were attached to all eight fixture clients, as in the suite (each
launched once through collector.launch with no arguments: a usage error, exit 2), and with no
uprobe attached. The difference divided by the uprobes attached is the cost of one detach.
"""

import time

from bench.measure import QUIET, median, say, wait_rusage
from bench.observers import FUNCTIONS
from tests.backup_lab import BEHAVIOURS, client_path


def one(with_uprobes: bool) -> dict:
    from probes.collectors.choose import open_collector
    started = time.perf_counter()
    collector, _ = open_collector("bcc", functions=FUNCTIONS)
    opened = time.perf_counter() - started
    uprobes = 0
    try:
        for inv, behaviour in enumerate(BEHAVIOURS if with_uprobes else (), start=1):
            proc = collector.launch(inv, [str(client_path(behaviour))], None, **QUIET)
            wait_rusage(proc, 30)
            uprobes += len(collector.finish(inv).functions)
    finally:
        started = time.perf_counter()
        collector.close()
        closed = time.perf_counter() - started
    return {"open_s": opened, "close_s": closed, "uprobes": uprobes}


def measure(repeats: int) -> dict:
    runs = {"with_uprobes": [], "without": []}
    for i in range(repeats):
        say(f"collector open/close: {i + 1}/{repeats}")
        runs["with_uprobes"].append(one(True))
        runs["without"].append(one(False))
    out = {k: {"runs": v, "median_open_s": median(r["open_s"] for r in v),
               "median_close_s": median(r["close_s"] for r in v),
               "uprobes": median(r["uprobes"] for r in v)} for k, v in runs.items()}
    extra = out["with_uprobes"]["median_close_s"] - out["without"]["median_close_s"]
    out["per_uprobe_detach_s"] = extra / out["with_uprobes"]["uprobes"] \
        if out["with_uprobes"]["uprobes"] else None
    return out
