"""Where an invocation's file changes landed: each operation of the client's tree that changes
the file system (an open for writing, a rename, an unlink, a mkdir, an rmdir, a truncate, a
link: the kernel's file events with `writes`), its path resolved where its process was,
counted under its target (the outputs folder its task gave it), its source, its working
directory (with the sandbox's /tmp and /dev/shm of its own), elsewhere, or `unknown` (a path
the kernel could not read in full, or relative to a directory not followed); beside them the
kernel's byte counters for the target, elsewhere and the source. A rename counts in each place
its two names are in (moved out of the source into the target: both); any other operation
where its path is (a hard link's old name is left as it was).

One projection for the dashboard's file-effects pane and the reports. A task that gives no
outputs folder has no target, one that watches no input no source: their figures are None,
never 0, and their rows are left out."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sessions.judging.views import counter, resolved_files, under
from sessions.stream.events import ClientLaunched
from sessions.stream.evidence import InvocationEvidence, ScenarioEvidence

PLACES = ("target", "source", "cwd", "elsewhere", "unknown")
PLACE_LABELS = {"target": "target", "source": "source", "cwd": "work dir",
                "elsewhere": "elsewhere", "unknown": "unknown"}
# (label, counter, the place it needs): the kernel's bytes (probes/collectors/records.py),
# writes first; the target's (and what lands elsewhere, told apart from it) only where one is
# given, the source's only where the task watches an input
BYTES = (("target bytes written", "target_write_bytes", "target"),
         ("elsewhere bytes written", "elsewhere_write_bytes", "target"),
         ("source bytes read", "source_read_bytes", "source"),
         ("target bytes read", "target_read_bytes", "target"))
ELSEWHERE_KEPT = 3   # paths kept of those changed elsewhere (the rest: a count)
OP_WORDS = {"open": "open for writing"}


@dataclass(frozen=True)
class InvocationEffects:
    n: int
    ops: dict[str, dict[str, int]]    # place -> op -> how many (every place, maybe empty)
    bytes: dict[str, int | None]      # counter -> bytes (None: not observed, or no target)
    elsewhere: tuple[str, ...]        # the first ELSEWHERE_KEPT distinct paths elsewhere
    elsewhere_more: int               # distinct paths elsewhere beyond them
    has_target: bool                  # its task gave it an outputs folder
    observed: bool                    # the collector delivers file events
    gap: str = ""                     # why the counts are incomplete ("": they are not)
    has_source: bool = True           # its task watches an input (the source)

    def given(self, place: str) -> bool:
        """The place is the invocation's: a target and a source only where its task gave one."""
        return {"target": self.has_target, "source": self.has_source}.get(place, True)

    def count(self, place: str) -> int | None:
        """How many operations landed there; None: not observed, or no such place."""
        if not self.observed or not self.given(place):
            return None
        return sum(self.ops[place].values())


def file_effects(ev: ScenarioEvidence) -> tuple[InvocationEffects, ...]:
    """Each launched invocation's effects, in order."""
    return tuple(e for n in sorted(ev.invocations)
                 if (e := invocation_effects(ev.invocations[n])) is not None)


def made_from(inv: InvocationEvidence) -> tuple:
    """What invocation_effects reads, as a key that changes when that evidence grew (a cache
    of the effects is good while it is the same)."""
    latest = inv.final or inv.latest
    return (inv.launched.seq if inv.launched else None, latest.seq if latest else None,
            len(inv.files), len(inv.processes))


def invocation_effects(inv: InvocationEvidence) -> InvocationEffects | None:
    """None: the invocation was not launched (nothing to resolve paths against)."""
    launched = inv.launched
    if launched is None:
        return None
    ops: dict[str, dict[str, int]] = {p: {} for p in PLACES}
    elsewhere: dict[str, None] = {}
    for e, paths in resolved_files(inv, launched):
        if not e.writes:
            continue
        where = [(_place(path, launched), path)
                 for path in (paths if e.op == "rename" else paths[:1])]
        for place in dict.fromkeys(place for place, _ in where):
            ops[place][e.op] = ops[place].get(e.op, 0) + 1
        elsewhere.update((path, None) for place, path in where
                         if place == "elsewhere" and path is not None)
    has = {"target": bool(launched.outputs), "source": bool(launched.source)}
    return InvocationEffects(
        inv.n, ops,
        {name: _counter(inv, name) if has[place] else None for _, name, place in BYTES},
        tuple(list(elsewhere)[:ELSEWHERE_KEPT]), max(0, len(elsewhere) - ELSEWHERE_KEPT),
        has["target"], _observed(inv), _gap(inv), has["source"])


def _place(path: str | None, launched: ClientLaunched) -> str:
    if path is None:
        return "unknown"
    if launched.outputs and under(path, launched.outputs):
        return "target"   # first: an outputs folder inside the working directory is the target
    if launched.source and under(path, launched.source):   # "": the task watches no input
        return "source"
    if under(path, launched.cwd) or launched.in_scratch(path):
        return "cwd"   # its own /tmp and /dev/shm in the sandbox: folders of its home, as cwd
    return "elsewhere"


def _counter(inv: InvocationEvidence, name: str) -> int | None:
    """The final count (views.counter); while the invocation runs, its latest sample's."""
    if inv.final is not None or inv.latest is None:
        return counter(inv, name)
    return inv.latest.counters.get(name)


def _observed(inv: InvocationEvidence) -> bool:
    """The collector counts file operations (`file_ops`; strace's and none's do not), or some
    arrived."""
    sample = inv.final or inv.latest
    return bool(inv.files) or (sample is not None and "file_ops" in sample.counters)


def _gap(inv: InvocationEvidence) -> str:
    lost, counted = counter(inv, "lost_events"), counter(inv, "file_ops")
    if lost:
        return f"the kernel lost {lost:,} events: the counts are incomplete"
    if counted is not None and counted > len(inv.files):
        return f"{len(inv.files):,} of the kernel's {counted:,} file events arrived"
    return ""


def rows(effects: Sequence[InvocationEffects], count: int | None = None
         ) -> list[tuple[str, list[int | None]]]:
    """(label, a value per invocation 1..count): the places, then the bytes; the target's and
    the source's rows only where one was given. An invocation with no effects (not launched
    yet): None."""
    by_n = {e.n: e for e in effects}
    ns = range(1, (count or max(by_n, default=0)) + 1)
    # nothing launched yet: the places every invocation has, and the source
    shown = [p for p in PLACES
             if (any(e.given(p) for e in effects) if effects else p != "target")]
    out: list[tuple[str, list[int | None]]] = [
        (PLACE_LABELS[p], [by_n[n].count(p) if n in by_n else None for n in ns])
        for p in shown]
    out += [(label, [by_n[n].bytes.get(name) if n in by_n else None for n in ns])
            for label, name, place in BYTES if place in shown]
    return out


def op_breakdown(e: InvocationEffects, place: str) -> str:
    """'242 rename · 241 open for writing · 11 mkdir' (most first); '' for none."""
    ops = sorted(e.ops[place].items(), key=lambda kv: (-kv[1], kv[0]))
    return " · ".join(f"{k:,} {OP_WORDS.get(op, op)}" for op, k in ops)


def details(effects: Sequence[InvocationEffects], esc: Callable[[str], str]
            ) -> list[tuple[int, str, list[str]]]:
    """(invocation, what, items) beneath the table: why counts are missing or incomplete, the
    paths changed elsewhere (client text, through `esc`; '… N more' past the kept ones), and
    the operations in each place."""
    out: list[tuple[int, str, list[str]]] = []
    for e in effects:
        if not e.observed:
            out.append((e.n, "not observed", ["the collector delivers no file events"]))
        if e.gap:
            out.append((e.n, "incomplete", [e.gap]))
        if e.elsewhere:
            more = [f"… {e.elsewhere_more:,} more"] if e.elsewhere_more else []
            out.append((e.n, "elsewhere", [esc(p) for p in e.elsewhere] + more))
        out += [(e.n, f"{PLACE_LABELS[p]} ops", [op_breakdown(e, p)])
                for p in PLACES if e.ops[p]]
    return out
