"""Live oracles over evlab's load (task.toml [load.NAME]; sessions/lab/load.py), which sends
requests to the task's servers during every invocation and records each one's outcome on the
lab's clock: `no-request-failed` (every request answered while the client ran) and
`latency-bound` (every answered request within the contract's load_latency_max_ms: a bound
on the slowest, not a percentile). Its requests are evlab's, never the client's."""

from sessions.judging.judgement import ENVIRONMENT, HARNESS, PASS, Judgement, failed, seqs, unknown
from sessions.judging.views import invocations
from sessions.spec.contract import Thresholds
from sessions.stream.events import ServerRecord
from sessions.stream.evidence import ScenarioEvidence

Requests = list[tuple[int, int, ServerRecord]]   # invocation, the client's launch (ns), request


def request_failed(fields: dict) -> bool:
    """Not answered (refused, reset, closed, timed out), or answered with a server error."""
    status = fields.get("status")
    return fields.get("outcome") != "answered" or isinstance(status, int) and status >= 500


def _requests(ev: ScenarioEvidence) -> Requests | Judgement:
    """Every request of the loads the task declares, each invocation's record whole; else
    why they cannot be judged."""
    declared = ev.started.display.get("loads", {})
    if not declared:
        return unknown("the task declares no load ([load.NAME] in its task.toml): no request "
                       "to judge", failure_class=HARNESS)
    found: Requests = []
    for inv in invocations(ev):
        ends = [r for r in inv.load if r.event == "load_stopped"]
        missing = sorted(set(declared) - {r.fields.get("load") for r in ends})
        requests = [r for r in inv.load if r.event == "request"]
        sent = sum(r.fields.get("sent", 0) for r in ends)
        if missing or len(requests) < sent:
            what = (f"load {', '.join(missing)} left no end of its record" if missing
                    else f"{len(requests)} of the load's {sent} request(s) are on record")
            return unknown(f"invocation {inv.n}: {what}: evlab's load record is incomplete",
                           seqs(inv.load), HARNESS)
        launched = inv.launched.t_ns if inv.launched is not None else 0
        found += [(inv.n, launched, r) for r in requests]
    if not found:
        return unknown("evlab's load made no request while the client ran", (), HARNESS)
    return found


def _when(launched: int, r: ServerRecord) -> str:
    return f"{(r.t_ns - launched) / 1e9:+.3f} s" if launched else f"t={r.t_ns}"


def _told(requests: Requests) -> str:
    """e.g. "invocation 1: 9 refused (+0.212 s .. +0.398 s after the client started)"."""
    groups: dict[tuple[int, str], list[tuple[int, ServerRecord]]] = {}
    for n, launched, r in requests:
        what = str(r.fields.get("outcome"))
        if what == "answered":
            what = f"answered {r.fields.get('status')}"
        groups.setdefault((n, what), []).append((launched, r))
    return "; ".join(f"invocation {n}: {len(rs)} {what} ({_when(*rs[0])} .. {_when(*rs[-1])} "
                     "after the client started)" for (n, what), rs in groups.items())


def no_request_failed(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    found = _requests(ev)
    if isinstance(found, Judgement):
        return found
    bad = [x for x in found if request_failed(x[2].fields)]
    during = [x for x in bad if not x[1] or x[2].t_ns + x[2].fields.get("latency_ns", 0) >= x[1]]
    if during:
        return failed(f"{len(during)} of {len(found)} request(s) of evlab's load failed while "
                      f"the client ran: {_told(during)}", seqs([x[2] for x in during]))
    if bad:   # ended before the client started: the service's, not the client's doing
        return unknown(f"the service failed evlab's load before the client started: "
                       f"{_told(bad)}", seqs([x[2] for x in bad]), ENVIRONMENT)
    return Judgement(PASS, f"all {len(found)} request(s) of evlab's load were answered, in "
                           f"{len({x[0] for x in found})} invocation(s)",
                     tuple(seqs([x[2] for x in found])))


def latency_bound(ev: ScenarioEvidence, t: Thresholds) -> Judgement:
    found = _requests(ev)
    if isinstance(found, Judgement):
        return found
    bound = t.load_latency_max_ms
    answered = [x for x in found if not request_failed(x[2].fields)]
    if not answered:
        return unknown(f"none of the {len(found)} request(s) of evlab's load was answered: no "
                       "latency to judge (no-request-failed says why)", seqs([x[2] for x in found]))
    slow = [x for x in answered if x[2].fields.get("latency_ns", 0) > bound * 1e6]
    slowest = max(answered, key=lambda x: x[2].fields.get("latency_ns", 0))
    worst = f"{slowest[2].fields.get('latency_ns', 0) / 1e6:.1f} ms"
    if slow:
        return failed(f"{len(slow)} of {len(answered)} answered request(s) of evlab's load took "
                      f"longer than {bound:g} ms (the contract's load_latency_max_ms), the "
                      f"slowest {worst} at invocation {slowest[0]} {_when(*slowest[1:])} after "
                      "the client started", seqs([x[2] for x in slow]))
    return Judgement(PASS, f"every one of the {len(answered)} answered request(s) of evlab's "
                           f"load within {bound:g} ms (the slowest {worst})",
                     (slowest[2].seq,))
