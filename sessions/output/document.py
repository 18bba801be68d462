"""The `--json` document: per scenario figures and verdicts, built from the event stream.

A figure that was not observed is null, never 0. Schema: docs/json-schema.md.
"""

from collections import Counter

from sessions.output.figures import task_figures
from sessions.output.grades import ClientGrade, grade_of
from sessions.output.leaderboard import Board, board_of
from sessions.output.load_summary import load_summary
from sessions.spec.task import record_of
from sessions.stream.evidence import (
    EvidenceBook,
    InvocationEvidence,
    ScenarioEvidence,
    sequence_bytes,
)

SCHEMA_VERSION = 2   # 2: each server's records by name; docs/json-schema.md


def _kernel(inv: InvocationEvidence) -> dict:
    final = inv.final
    counters = final.counters if final else {}

    def get(name):
        return counters.get(name)

    observed_connects = "connects" in counters
    return {
        "connects": get("connects"),
        "connect_destinations": (sorted({f"{c.address}:{c.port}" if c.address else c.family
                                         for c in inv.connects}) if observed_connects else None),
        "source_read_bytes": get("source_read_bytes"),
        "read_bytes": get("read_bytes"),
        "sent_bytes": get("sock_sent_bytes"),
        "received_bytes": get("sock_recv_bytes"),
        "function_calls": dict(final.functions) if final else {},
        "switches_out": get("switches_out"),
        "cpu_ns": get("oncpu_ns"),
        "syscalls": get("syscalls"),
        "lost_events": get("lost_events"),
        "longest_busy_stretch_ns": get("busy_max_ns"),
        "source_mmaps": get("source_mmaps"),
        "source_mapped_bytes": get("source_mapped_bytes"),
        "own_read_bytes": get("own_read_bytes"),
        "busy_ns": get("busy_ns"),
        "busy_start_ns": get("busy_start_ns"),
        "launch_cpu_ns": get("launch_oncpu_ns"),
        "tasks_left_at_exit": get("leftover_tasks"),
    }


def _boundary(inv: InvocationEvidence) -> dict:
    """The invocation's cgroup and what its socket hooks saw leave (null: not observed)."""
    b, summary = inv.boundary, inv.egress_summary
    return {
        "cgroup_cpu_ns": b.cpu_ns if b else None,
        "memory_peak_bytes": b.memory_peak if b else None,
        "limit_hits": dict(b.limit_hits) if b else None,
        "egress": ({"calls": [dict(c) for c in summary.calls],
                    "packets": [dict(f) for f in summary.flows]} if summary else None),
    }


def _servers(ev: ScenarioEvidence, inv: InvocationEvidence) -> dict:
    """Each of the task's servers: its role, its records by event (counted), how often the
    lab started it again after it died, and why it could not, when it could not."""
    return {name: _server(inv, name, role) for name, role in ev.started.roles.items()}


def _server(inv: InvocationEvidence, name: str, role: str) -> dict:
    records = inv.records.get(name, [])
    own = inv.client_records(records)
    again = [r for r in inv.harness if r.event == f"{name}_restarted"]
    return {"role": role, "records": dict(sorted(Counter(r.event for r in own).items())),
            "load_records": len(records) - len(own),
            "restarts": sum(not r.fields.get("failed") for r in again),
            "restarts_failed": [r.fields["failed"] for r in again if r.fields.get("failed")]}


def _packets(inv: InvocationEvidence, endpoint_port: int) -> dict:
    if inv.packet_stats is None:
        return {"count": None, "payload_bytes": None, "to_endpoint_bytes": None,
                "dropped": None, "error": None}
    return {"count": len(inv.packets), "payload_bytes": sequence_bytes(inv.packets),
            "to_endpoint_bytes": inv.wire_bytes_to(endpoint_port),
            "dropped": inv.packet_stats.dropped_by_kernel,
            "error": inv.packet_stats.error or None}


def _invocation(ev: ScenarioEvidence, inv: InvocationEvidence) -> dict:
    v = inv.verifier
    return {
        "n": inv.n,
        "exit_code": inv.exited.exit_code if inv.exited else None,
        "timed_out": inv.exited.timed_out if inv.exited else None,
        "claims": [c.claim for c in inv.claims],
        "kernel": _kernel(inv),
        "operations": _operations(ev, inv),
        "boundary": _boundary(inv),
        "servers": _servers(ev, inv),
        "faults_fired": sum(r.event == "fault_fired" for r in inv.endpoint + inv.proxy),
        "packets": _packets(inv, ev.started.endpoint_port),
        "verifier": ({"saved": bool(v.fields.get("saved", v.match)), "match": v.match,
                      "saved_sha256": _text_or_none(v.fields.get("saved_sha256")),
                      "detail": v.described}
                     if v else {"saved": None, "match": None, "saved_sha256": None,
                                "detail": None}),
        "figures": dict(task_figures(ev, inv)),
        "load": load_summary(inv),
    }


def _operations(ev: ScenarioEvidence, inv: InvocationEvidence) -> dict:
    """The kernel's operations of the invocation (null: not observed, a collector other than
    BCC): the kill family's calls as asked, each signal sent, each truncation, each end of its
    tree's processes and each start and end of a server's."""
    if ev.collector != "bcc":
        return {"signal_calls": None, "signals": None, "truncations": None, "processes": None}

    def fields(e) -> dict:
        return {k: v for k, v in vars(e).items() if k not in ("scenario", "invocation", "seq")}

    return {"signal_calls": [fields(s) for s in inv.signals if s.target is None],
            "signals": [fields(s) for s in inv.signals if s.target is not None],
            "truncations": [fields(t) for t in inv.truncations],
            "processes": [fields(p) for p in inv.lives]}


def _text_or_none(value) -> str | None:
    return value if isinstance(value, str) else None


def _scenario(ev: ScenarioEvidence) -> dict:
    s = ev.started
    return {
        "id": s.scenario,
        "client": {"path": s.client_path, "sha256": s.client_sha256},
        "scenario_file": s.scenario_file,
        "faults": list(s.faults),
        "noise": list(s.noise),
        "expected_failures": list(s.expected_failures),
        "attempt": ev.started.attempt or None,
        "instrument_check": ev.judged.instrument_check if ev.judged else "incomplete",
        "instrument_detail": ev.judged.detail if ev.judged else "the scenario did not finish",
        "servers": {name: {"role": role, "port": s.ports.get(name)}
                    for name, role in s.roles.items()},
        "network": s.network,
        "invocations": [_invocation(ev, ev.invocations[n])
                        for n in sorted(ev.invocations)],
        "clauses": [{"id": v.clause, "status": v.status, "expected": v.expected,
                     "reason": v.reason, "failure_class": v.failure_class,
                     "evidence": list(v.evidence)} for v in ev.verdicts],
    }


def session_header(book: EvidenceBook) -> dict:
    """What ran, where, with which observers, and how it ended: shared with the manifest."""
    session = book.session
    return {
        "evlab_version": session.evlab_version if session else None,
        "kernel": session.kernel if session else None,
        "collector": session.collector if session else None,
        "packets": session.packets if session else None,
        "contract_version": session.contract_version if session else None,
        "task": record_of(session),
        "cpu_pace": session.cpu_pace if session else None,
        "capabilities": {"missing": [{"name": m.name, "detail": m.detail, "fix": m.fix}
                                     for m in book.missing]},
        "sandbox": ({"enabled": book.sandbox.enabled, "summary": book.sandbox.summary,
                     "settings": book.sandbox.settings, "cgroups": book.sandbox.cgroups,
                     "deny_egress": book.sandbox.deny_egress,
                     "network": book.sandbox.network,
                     "own_network": book.sandbox.own_network} if book.sandbox else None),
        "partial": book.ended.partial if book.ended else True,
        "end_reason": book.ended.reason if book.ended else _still_open(book),
    }


def _still_open(book: EvidenceBook) -> str:
    """An export taken while the session was running (the dashboard's `e`)."""
    done, last = book.complete_through()
    return ("exported while the session was open; "
            + (f"complete through scenario {done} ({last})" if done else "no scenario complete"))


def judged(book: EvidenceBook) -> tuple[dict, ClientGrade | None, Board | None]:
    """The document with the typed grade and board it was built from, each made once (what a
    finished session's outputs and its summary line are written from)."""
    grade, board = grade_of(book), board_of(book)
    return build(book, grade, board), grade, board


def build(book: EvidenceBook, grade: ClientGrade | None = None,
          board: Board | None = None) -> dict:
    """The document; `grade` and `board` when the caller has them already (else made here)."""
    grade = grade if grade is not None else grade_of(book)
    board = board if board is not None else board_of(book)
    scenarios = [_scenario(ev) for ev in book.scenarios.values()]
    checks = [s["instrument_check"] for s in scenarios]
    return {
        "schema_version": SCHEMA_VERSION,
        **session_header(book),
        "summary": {
            "scenarios": len(scenarios),
            "detected": checks.count("detected"),
            "missed": checks.count("missed"),
            "inconclusive": checks.count("inconclusive"),
            "invalid": checks.count("invalid"),
            "graded": checks.count("graded"),
            "incomplete": checks.count("incomplete"),
            "note": "exit status 0 means the instrument judged every scenario as it declared "
                    "(all detected), not that every client did right",
        },
        "scenarios": scenarios,
        "grade": grade.to_json() if grade is not None else None,
        "campaign": board.to_json() if board is not None else None,
    }
