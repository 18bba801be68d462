"""The headless commands' progress on stderr: a line per scenario judged (run, grade, replay)
or per attempt judged or lost (a campaign). Nothing here opens or imports a lab, so that a
replay of an archive imports none."""

import sys

from sessions.output.escape import visible
from sessions.output.leaderboard import progress
from sessions.stream.campaign_events import AttemptLost
from sessions.stream.events import (
    AttemptJudged,
    Event,
    PhaseChanged,
    ScenarioJudged,
    ScenarioStarted,
    StaleCleaned,
)
from sessions.stream.evidence import EvidenceBook


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


class CampaignProgress:
    """One line on stderr per attempt judged or lost: where it ran, done / running / queued,
    and the time left."""

    def __init__(self, book: EvidenceBook):
        self.book = book

    def __call__(self, event: Event) -> None:
        if not isinstance(event, (AttemptJudged, AttemptLost)) or self.book.campaign is None:
            return
        p = progress(self.book)
        where = next((d.node for d in reversed(self.book.dispatched)
                      if d.scenario == event.scenario), "?")
        what = (event.reason if isinstance(event, AttemptJudged)
                else f"lost ({event.reason}); " + ("run again" if event.retried
                                                   else "not run again"))
        eta = f", about {p.eta_s:.0f} s left" if p.eta_s is not None and p.queued else ""
        nodes = "; " + " · ".join(f"{name} {n.done} done, {n.running} running"
                                  + (f", {n.lost} lost" if n.lost else "")
                                  for name, n in sorted(p.nodes.items())) \
            if len(p.nodes) > 1 else ""
        print(visible(f"[{p.done}/{p.total}] {event.scenario:<28} on {where}: {what[:90]} "
                      f"({p.running} running, {p.queued} queued{eta}{nodes})"),
              file=sys.stderr, flush=True)
