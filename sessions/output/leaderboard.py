"""A campaign's leaderboard: per client its identity, Pass@1, pass^k, Best-of-N, mean score ±
SEM, invalid attempts, risk findings by severity and the clause or gate it fails most; overall
and per scenario, ranked. Also how far the campaign is (done, running, queued, per node, ETA).

Ranking: pass^k, then Pass@1, then mean score (higher first), then fewer high and medium risk
findings, then the name. A figure with no valid attempt behind it ranks last.
"""

import collections

from sessions.output.grades import client_grade
from sessions.stream.campaign_events import AttemptLost
from sessions.stream.events import AttemptJudged
from sessions.stream.evidence import EvidenceBook, ScenarioEvidence

SEVERITIES = ("high", "medium", "low")


def _given_up(lost: list[AttemptLost], judged: set[str]) -> list[AttemptJudged]:
    """Attempts the engine lost and did not run again (and no later run judged): invalid."""
    final = {}
    for e in lost:
        final[e.scenario] = e
    return [AttemptJudged(e.t_ns, e.scenario, e.base, e.attempt, False, False, None,
                          f"invalid: {e.reason} (run {e.run}, not retried)")
            for e in final.values() if not e.retried and e.scenario not in judged]


def _fails_most(evs: list[ScenarioEvidence]) -> dict | None:
    counts = collections.Counter()
    for ev in evs:
        if ev.attempt is None or not ev.attempt.valid:
            continue
        counts.update(f"{v.clause}" for v in ev.verdicts if v.status == "fail")
        counts.update(f"gate {g.gate}" for g in ev.gates if g.status == "fail")
    if not counts:
        return None
    name, count = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]
    return {"name": name, "count": count}


def _entry(book: EvidenceBook, name: str, identity: dict) -> dict:
    c = book.campaign
    evs = [ev for ev in book.scenarios.values() if ev.started.client == name]
    lost = [e for e in book.lost if e.client == name]
    judged = {ev.id for ev in evs if ev.attempt is not None}
    env = next((ev.grade.env for ev in evs if ev.grade is not None), None)
    grade = client_grade({**identity, "env": env}, c.attempts, c.scenarios, evs,
                         _given_up(lost, judged))
    node = {d.scenario: d.node for d in book.dispatched if d.client == name}
    for metrics in grade["scenarios"].values():
        for run in metrics["runs"]:
            run["node"] = node.get(run["id"])
    risks = collections.Counter(r.severity for ev in evs for r in ev.risks)
    return {
        "name": name,
        **grade,
        "invalid": grade["overall"]["invalid"],
        "engine_losses": len(lost),
        "risks": {s: risks.get(s, 0) for s in SEVERITIES},
        "fails_most": _fails_most(evs),
        "lost": [{"id": e.scenario, "run": e.run, "node": e.node, "reason": e.reason,
                  "retried": e.retried} for e in lost],
    }


def _key(figures: dict, risks: dict, name: str) -> tuple:
    def high_first(key):
        value = figures.get(key)
        return -value if value is not None else 1.0
    return (high_first("pass_hat_k"), high_first("pass_at_1"), high_first("mean_score"),
            risks["high"], risks["medium"], name)


def _ranked(rows: list[dict]) -> list[dict]:
    rows = sorted(rows, key=lambda r: _key(r["figures"], r["risks"], r["name"]))
    return [{"rank": i, **r} for i, r in enumerate(rows, 1)]


def campaign_section(book: EvidenceBook) -> dict | None:
    c = book.campaign
    if c is None:
        return None
    # by name: a JSON round trip (the archive) sorts the keys, and a replay must read the same
    clients = {name: _entry(book, name, c.clients[name]) for name in sorted(c.clients)}
    overall = _ranked([{"name": n, "figures": e["overall"], "risks": e["risks"],
                        "invalid": e["invalid"], "fails_most": e["fails_most"]}
                       for n, e in clients.items()])
    per_scenario = {base: _ranked([{"name": n, "figures": {k: v for k, v in
                                                           e["scenarios"][base].items()
                                                           if k != "runs"},
                                    "risks": e["risks"], "invalid":
                                    e["scenarios"][base]["invalid"], "fails_most": None}
                                   for n, e in clients.items()])
                    for base in c.scenarios}
    return {"name": c.name, "engine": c.engine, "scenarios": list(c.scenarios),
            "attempts_per_scenario": c.attempts, "retries": c.retries,
            "progress": progress(book), "leaderboard": overall,
            "per_scenario": per_scenario, "clients": clients}


def _took_s(ev: ScenarioEvidence) -> float | None:
    """An attempt's own time where it ran: its GradeStarted to its `done` phase (one clock)."""
    start = ev.grade.t_ns if ev.grade is not None else ev.started.t_ns
    return (ev.done_ns - start) / 1e9 if ev.done_ns is not None else None


def progress(book: EvidenceBook) -> dict:
    """Done, running and queued attempts (per node too) and an estimate of the time left:
    the attempts' mean time where they ran x what is left / the nodes at work."""
    c = book.campaign
    total = len(c.clients) * len(c.scenarios) * c.attempts if c else 0
    judged = {ev.id: ev for ev in book.scenarios.values() if ev.attempt is not None}
    given_up = {e.scenario for e in book.lost if not e.retried} - set(judged)
    latest = {}
    for d in book.dispatched:
        latest[d.scenario] = d
    lost_runs = {(e.scenario, e.run) for e in book.lost}
    running = [d for d in latest.values() if d.scenario not in judged
               and (d.scenario, d.run) not in lost_runs]
    nodes: dict[str, dict] = {}
    for d in latest.values():
        n = nodes.setdefault(d.node, {"done": 0, "running": 0, "lost": 0})
        n["done"] += d.scenario in judged
    for d in running:
        nodes[d.node]["running"] += 1
    for e in book.lost:
        nodes.setdefault(e.node, {"done": 0, "running": 0, "lost": 0})["lost"] += 1
    done = len(judged) + len(given_up)
    queued = max(0, total - done - len(running))
    took = [t for t in map(_took_s, judged.values()) if t is not None]
    working = max(1, len([n for n in nodes.values()   # a node that lost one is gone
                          if (n["done"] or n["running"]) and not n["lost"]]))
    eta = (sum(took) / len(took) * (queued + len(running)) / working) if took else None
    return {"total": total, "done": done, "running": len(running), "queued": queued,
            "lost": len(book.lost), "given_up": len(given_up), "nodes": nodes, "eta_s": eta}
