"""evlab's load over time in one scenario (task.toml [load.NAME]): per time bucket, the load's
requests begun in it that were answered and that failed, and the slowest answer among them;
per invocation, with its launch and exit. One projection, which the dashboard's load view and
the reports both draw.

Times are nanoseconds from the scenario's start (its ScenarioStarted), as the timeline's. The
buckets lie on one grid from that start, so an invocation's and the whole scenario's agree; a
bucket's size is a round one (100 ms, 200 ms, 500 ms, 1 s, ...) chosen from the load's span."""

from dataclasses import dataclass

from sessions.judging.clauses.load import request_failed
from sessions.output.timeline import round_step
from sessions.stream.evidence import InvocationEvidence, ScenarioEvidence

BUCKET_MIN_NS = 100_000_000   # 4 requests at the load's 40/s: finer is mostly noise


@dataclass(frozen=True)
class Bucket:
    slot: int                  # its start is slot x the bucket's size
    answered: int = 0          # begun in it, and answered (not a server error)
    failed: int = 0            # begun in it, and not answered or a server error
    slowest_ns: int | None = None   # the slowest of its answered requests


@dataclass(frozen=True)
class InvocationLoad:
    n: int
    launched_ns: int | None    # the client's launch and exit (None: not seen yet)
    exited_ns: int | None
    buckets: tuple[Bucket, ...]   # consecutive slots from its first request to its last


@dataclass(frozen=True)
class LoadOverTime:
    loads: tuple[str, ...]     # the task's loads, by name
    bucket_ns: int
    invocations: tuple[InvocationLoad, ...]

    def slot(self, t_ns: int) -> int:
        return t_ns // self.bucket_ns

    def per_second(self, count: int) -> float:
        return count * 1e9 / self.bucket_ns

    def series(self) -> tuple[Bucket, ...]:
        """The whole scenario's buckets, consecutive, from one before the load's first request
        to one after its last (none was begun then: the series starts and ends at zero), the
        invocations' summed where they share a slot, and empty ones where the load was
        stopped between invocations."""
        slots = [b.slot for i in self.invocations for b in i.buckets]
        if not slots:
            return ()
        merged = {s: Bucket(s) for s in range(min(slots) - 1, max(slots) + 2)}
        for b in (b for i in self.invocations for b in i.buckets):
            m = merged[b.slot]
            merged[b.slot] = Bucket(b.slot, m.answered + b.answered, m.failed + b.failed,
                                    _slower(m.slowest_ns, b.slowest_ns))
        return tuple(merged.values())


def load_over_time(ev: ScenarioEvidence, max_buckets: int) -> LoadOverTime | None:
    """The scenario's load in buckets, at most about max_buckets over the load's span (100 ms
    at least); None when its task declares no load."""
    loads = tuple(ev.started.display.get("loads", {}))
    if not loads:
        return None
    t0 = ev.started.t_ns
    requests = {n: [r for r in inv.load if r.event == "request"]
                for n, inv in sorted(ev.invocations.items())}
    starts = [r.t_ns - t0 for rs in requests.values() for r in rs]
    span = max(starts) - min(starts) if starts else 0
    bucket = int(max(BUCKET_MIN_NS, round_step(max(span / max(1, max_buckets), 1))))
    return LoadOverTime(loads, bucket, tuple(
        _invocation(ev.invocations[n], rs, t0, bucket) for n, rs in requests.items()))


def _invocation(inv: InvocationEvidence, requests: list, t0: int, bucket: int) -> InvocationLoad:
    launched = inv.launched.t_ns - t0 if inv.launched is not None else None
    exited = (inv.exited.t_ns - t0 if inv.exited is not None and inv.exited.t_ns > 0
              else None)
    counts: dict[int, list] = {}
    for r in requests:
        slot = (r.t_ns - t0) // bucket
        answered, failed, slowest = counts.setdefault(slot, [0, 0, None])
        latency = r.fields.get("latency_ns")
        if request_failed(r.fields):
            counts[slot][1] = failed + 1
        else:
            counts[slot][0] = answered + 1
            if isinstance(latency, int):
                counts[slot][2] = _slower(slowest, latency)
    # from the launch (or the first request) to the exit (or the last): both marked
    edges = [*counts, *(t // bucket for t in (launched, exited) if t is not None)]
    slots = range(min(edges), max(edges) + 1) if counts else range(0)
    return InvocationLoad(inv.n, launched, exited, tuple(
        Bucket(s, *counts.get(s, (0, 0, None))) for s in slots))


def _slower(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


REPORT_BUCKETS = 12   # the reports' table: a short one per invocation
REPORT_HEAD = ("from (s)", "answered", "failed", "slowest (ms)", "client")


def table_rows(load: LoadOverTime, inv: InvocationLoad) -> list[tuple[str, ...]]:
    """The reports' rows for one invocation (REPORT_HEAD): each bucket's start in seconds from
    the scenario's start, its counts, its slowest answer, and the client's launch or exit when
    it fell in that bucket."""
    digits = 1 if load.bucket_ns % 1_000_000_000 else 0
    rows: list[tuple[str, ...]] = []
    for b in inv.buckets:
        client = [word for word, t in (("launched", inv.launched_ns), ("exited", inv.exited_ns))
                  if t is not None and load.slot(t) == b.slot]
        rows.append((f"{b.slot * load.bucket_ns / 1e9:.{digits}f}", f"{b.answered:,}",
                     f"{b.failed:,}", "–" if b.slowest_ns is None else f"{b.slowest_ns / 1e6:.1f}",
                     ", ".join(client)))
    return rows


def invocation_heading(load: LoadOverTime, inv: InvocationLoad) -> str:
    """e.g. 'invocation 1: launched 0.591 s, exited 0.802 s; 100 ms buckets'."""
    def at(t: int | None) -> str:
        return "not seen" if t is None else f"{t / 1e9:.3f} s"
    return (f"invocation {inv.n}: launched {at(inv.launched_ns)}, exited {at(inv.exited_ns)}; "
            f"{size_words(load.bucket_ns)} buckets")


def size_words(bucket_ns: int) -> str:
    return (f"{bucket_ns // 1_000_000} ms" if bucket_ns < 1_000_000_000
            else f"{bucket_ns / 1e9:g} s")
