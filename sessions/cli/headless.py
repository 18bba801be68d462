"""A headless session: the scenarios run with progress lines on stderr, and the JSON document,
the report and the archive written whatever happens (an interrupt leaves partial results)."""

import signal
import sys
from pathlib import Path

from probes.interrupts import SIGNALS, interrupt_once
from sessions.cli.outputs import Outputs
from sessions.lab.schedule import run_session
from sessions.output.escape import visible
from sessions.output.judged import JudgedStream
from sessions.stream.events import (
    Event,
    PhaseChanged,
    ScenarioJudged,
    ScenarioStarted,
    StaleCleaned,
)


class Progress:
    """One line per scenario on stderr as it is judged, with its own time (its start to its
    judging, on the clock of the lab that ran it)."""

    def __init__(self, total: int):
        self.total, self.done = total, 0
        self.started: dict[str, int] = {}
        self.judging: dict[str, int] = {}

    def __call__(self, event: Event) -> None:
        if isinstance(event, StaleCleaned):
            print(f"evlab: {event.detail}", file=sys.stderr, flush=True)
        elif isinstance(event, ScenarioStarted):
            self.started[event.scenario] = event.t_ns
        elif isinstance(event, PhaseChanged) and event.phase == "judging":
            self.judging[event.scenario] = event.t_ns
        elif isinstance(event, ScenarioJudged):
            self.done += 1
            start = self.started.get(event.scenario)
            end = self.judging.get(event.scenario, start)
            took = (end - start) / 1e9 if start is not None and end is not None else 0.0
            print(visible(f"[{self.done}/{self.total}] {event.scenario:<18} "
                          f"{event.instrument_check:<12} {took:4.1f} s  {event.detail}"),
                  file=sys.stderr, flush=True)


def record_session(plan, args) -> Outputs | None:
    """Run a plan (sessions/cli/plan.py) headless, writing --json, --archive (and --report)
    whatever happens; what was written, or None when interrupted."""
    return record(args, lambda book: Progress(len(plan.scenarios)),
                  lambda stream, book, staging: run_session(
                      stream, plan.scenarios, staging, plan.options, plan.grade, plan.jobs,
                      plan.spec))


def record(args, progress_of, work, staging: Path | None = None,
           consumers=()) -> Outputs | None:
    """Run work(stream, book, staging) headless with the outputs written whatever happens,
    progress_of(book) printing its lines; what was written (the document, the typed grade or
    board), or None when interrupted."""
    stream = JudgedStream(*consumers)
    stream.subscribe(progress_of(stream.book))
    with Outputs(args, stream, staging) as outputs:
        # deferred inside BCC's callbacks, where an exception would be lost (probes/interrupts.py)
        previous = {sig: signal.signal(sig, interrupt_once) for sig in SIGNALS}
        try:
            work(stream, stream.book, outputs.staging)
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    return None if outputs.interrupted else outputs
