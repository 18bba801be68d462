"""Each attempt's time inside a run, start-up excluded, from the run's archive (--archive PATH)
(bench/campaign.py).

  campaign (local or ray): AttemptJudged.t_ns (derived on the driver) minus the t_ns of the
      last AttemptDispatched of that attempt id (the driver's): dispatch to judged, everything
      the engine adds (shipping, the remote call, the lab's attempt, the return, the merge,
      judging). Beside it, the lab's own attempt as the node recorded it (its PhaseChanged
      setup to done, the node's clock).
  plain grade: AttemptJudged.t_ns minus that attempt's PhaseChanged(phase="setup").t_ns (one
      process's clock); beside it, the attempt's teardown (PhaseChanged teardown to done), which
      a plain grade runs after its judgement and a campaign's node before its return.
"""

from pathlib import Path

from sessions.output.archive import ArchiveError, load_archive
from sessions.stream.campaign_events import AttemptDispatched
from sessions.stream.events import AttemptJudged, Event, PhaseChanged

NS_PER_MS = 1_000_000


def load_events(path: Path) -> tuple[list[Event] | None, str | None]:
    """The archive's events, or None and why not."""
    if not path.exists():
        return None, f"no archive written ({path.name})"
    try:
        return load_archive(path).events, None
    except ArchiveError as e:
        return None, f"unreadable archive: {str(e)[:200]}"


def _phases(events: list[Event]) -> dict[str, dict[str, int]]:
    """Each attempt id's t_ns of each phase (its last, should one repeat)."""
    out: dict[str, dict[str, int]] = {}
    for e in events:
        if isinstance(e, PhaseChanged):
            out.setdefault(e.scenario, {})[e.phase] = e.t_ns
    return out


def _span(phases: dict[str, dict[str, int]], first: str, last: str) -> dict[str, float]:
    return {i: (p[last] - p[first]) / NS_PER_MS for i, p in phases.items()
            if first in p and last in p}


def _judged(events: list[Event]) -> dict[str, int]:
    return {e.scenario: e.t_ns for e in events if isinstance(e, AttemptJudged)}


def campaign_times(events: list[Event]) -> dict[str, dict[str, float]]:
    """attempt_ms: dispatch (the last) to judged, by attempt id; lab_ms: the node's setup to
    done; node: where each attempt ran (its last dispatch)."""
    dispatched: dict[str, AttemptDispatched] = {}
    for e in events:
        if isinstance(e, AttemptDispatched):
            dispatched[e.scenario] = e   # a lost run dispatched again: the judged one is last
    judged = _judged(events)
    return {"attempt_ms": {i: (t - dispatched[i].t_ns) / NS_PER_MS for i, t in judged.items()
                           if i in dispatched},
            "lab_ms": {i: ms for i, ms in _span(_phases(events), "setup", "done").items()
                       if i in judged},
            "node": {i: d.node for i, d in dispatched.items() if i in judged}}


def grade_times(events: list[Event]) -> dict[str, dict[str, float]]:
    """attempt_ms: setup to judged, by attempt id; teardown_ms: teardown to done."""
    phases, judged = _phases(events), _judged(events)
    return {"attempt_ms": {i: (t - phases[i]["setup"]) / NS_PER_MS for i, t in judged.items()
                           if "setup" in phases.get(i, {})},
            "teardown_ms": {i: ms for i, ms in _span(phases, "teardown", "done").items()
                            if i in judged}}


def first_on_node(times: dict) -> set[str]:
    """The attempt ids dispatched first to each node in one run (in Ray mode these also wait
    for the node's actor and its lab session to start)."""
    seen: set[str] = set()
    firsts = set()
    for attempt, node in times.get("node", {}).items():   # in dispatch order (dict order)
        if node not in seen:
            seen.add(node)
            firsts.add(attempt)
    return firsts
