"""What the JSON document says of evlab's load in one invocation (docs/json-schema.md): per
load, the rate it was started at, its requests counted by outcome, the slowest answer, and
each failed request."""

from sessions.judging.clauses.load import request_failed
from sessions.stream.evidence import InvocationEvidence

FAILED_LISTED = 50   # failed requests listed per load and invocation; the rest are counted


def load_summary(inv: InvocationEvidence) -> dict:
    launched = inv.launched.t_ns if inv.launched is not None else None
    loads: dict[str, dict] = {}
    for r in inv.load:
        entry = loads.setdefault(str(r.fields.get("load")), {
            "rate": None, "sent": None, "outcomes": {}, "latency_max_ns": None, "failed": []})
        if r.event == "load_started":
            entry["rate"] = r.fields.get("rate")
        elif r.event == "load_stopped":
            entry["sent"] = r.fields.get("sent")
        if r.event != "request":
            continue
        outcome, latency = str(r.fields.get("outcome")), r.fields.get("latency_ns")
        entry["outcomes"][outcome] = entry["outcomes"].get(outcome, 0) + 1
        if not request_failed(r.fields) and isinstance(latency, int):
            entry["latency_max_ns"] = max(entry["latency_max_ns"] or 0, latency)
        elif request_failed(r.fields) and len(entry["failed"]) < FAILED_LISTED:
            entry["failed"].append({
                "seq": r.seq, "outcome": outcome, "status": r.fields.get("status"),
                "after_launch_ns": r.t_ns - launched if launched is not None else None,
                "latency_ns": latency})
    return loads
