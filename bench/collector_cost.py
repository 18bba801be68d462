"""What the BCC collector costs a session once: compile + load, and close (detach everything).

Compile + load is timed two ways side by side: the first session on a machine (no kept
instructions: the program compiled in full, then kept) and a later one (its maps compiled
alone, the kept programs loaded: probes/bcc/cache.py), each with an empty folder of its own
for the kept file, in CPU-seconds of this process (the compile is in a thread of it).

The suite pays these once per run, so they explain the traced suite's fixed cost. `close` is
timed twice: after uprobes were attached to all eight fixture clients, as in the suite (each
launched once through collector.launch with no arguments: a usage error, exit 2), and with no
uprobe attached. The difference divided by the uprobes attached is the cost of one detach.
"""

import resource
import tempfile
import time
from pathlib import Path

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


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def first_and_later() -> dict:
    """CPU-s to open (compile + load) and close the collector: the first session on a machine,
    then the next one."""
    from probes.bcc import cache
    from probes.collectors.choose import open_collector
    saved = cache.CACHE_DIR
    out = {}
    with tempfile.TemporaryDirectory(prefix="evlab-bench-kept-") as folder:
        cache.CACHE_DIR = Path(folder) / "bpf"
        try:
            for which in ("first", "later"):
                started = _cpu_s()
                collector, _ = open_collector("bcc", functions=FUNCTIONS)
                collector.close()
                out[which] = _cpu_s() - started
        finally:
            cache.CACHE_DIR = saved
    return out


def measure(repeats: int) -> dict:
    runs: dict[str, list] = {"with_uprobes": [], "without": [], "first_and_later": []}
    for i in range(repeats):
        say(f"collector open/close: {i + 1}/{repeats}")
        runs["with_uprobes"].append(one(True))
        runs["without"].append(one(False))
        runs["first_and_later"].append(first_and_later())
    kept = runs.pop("first_and_later")
    out = {k: {"runs": v, "median_open_s": median(r["open_s"] for r in v),
               "median_close_s": median(r["close_s"] for r in v),
               "uprobes": median(r["uprobes"] for r in v)} for k, v in runs.items()}
    extra = out["with_uprobes"]["median_close_s"] - out["without"]["median_close_s"]
    out["per_uprobe_detach_s"] = extra / out["with_uprobes"]["uprobes"] \
        if out["with_uprobes"]["uprobes"] else None
    first, later = median(r["first"] for r in kept), median(r["later"] for r in kept)
    out["kept"] = {"runs": kept, "median_first_cpu_s": first, "median_later_cpu_s": later,
                   "ratio_later_first": later / first if first else None}
    return out
