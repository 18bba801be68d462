"""Reports built from the event stream: Markdown (clause x scenario table and a timeline per
scenario), JSON (the --json document) and JUnit XML (one test case per scenario and clause)."""

import json
import xml.etree.ElementTree as ET
from collections.abc import Callable

from sessions.output import document
from sessions.output import file_effects as fx
from sessions.output.campaign_report import campaign_junit, campaign_markdown
from sessions.output.escape import code, xml
from sessions.output.escape import markdown as md
from sessions.output.grade_report import grade_markdown
from sessions.output.grades import ClientGrade, grade_of
from sessions.output.leaderboard import Board, board_of
from sessions.output.load_over_time import (
    REPORT_BUCKETS,
    REPORT_HEAD,
    invocation_heading,
    load_over_time,
    table_rows,
)
from sessions.output.vocabulary import event_line, in_timeline, status_text
from sessions.stream.events import (
    Event,
    ScenarioStarted,
)
from sessions.stream.evidence import EvidenceBook


def markdown(book: EvidenceBook, grade: ClientGrade | None = None,
             board: Board | None = None) -> str:
    """`grade` and `board` when the caller has them already (else made here)."""
    grade = grade if grade is not None else grade_of(book)
    board = board if board is not None else board_of(book)
    doc = document.build(book, grade, board)
    if board is not None:
        return "\n".join(campaign_markdown(board, doc["partial"], doc["end_reason"])) + "\n"
    out = ["# evlab session report", ""]
    out += [f"- collector: **{doc['collector']}**, packets: **{doc['packets']}**, "
            f"kernel {doc['kernel']}, evlab {doc['evlab_version']}, "
            f"contract v{doc['contract_version']}",
            f"- session: {'**partial** — ' if doc['partial'] else ''}{doc['end_reason']}"]
    box = doc["sandbox"]
    if box is not None:
        confined = box["summary"] if box["enabled"] else f"**NOT SANDBOXED** — {box['summary']}"
        out.append(f"- client confinement: {confined}; cgroups {box['cgroups']}"
                   + ("; egress **denied** beyond the endpoint" if box["deny_egress"] else ""))
        if box.get("network"):   # absent in an archive from before lab networks
            network = (box["network"] if box["own_network"]
                       else f"**HOST NETWORK** — {box['network']}")
            out.append(f"- network: {network}")
    summary = doc["summary"]
    if grade is None:
        out.append(f"- instrument check: {summary['detected']} detected, {summary['missed']} "
                   f"missed, {summary['inconclusive']} inconclusive of {summary['scenarios']} "
                   f"scenarios ({summary['note']})")
    if doc["capabilities"]["missing"]:
        out += ["", "## Missing capabilities", ""]
        out += [f"- **{m['name']}**: {m['detail']} — fix: `{m['fix']}`"
                for m in doc["capabilities"]["missing"]]
    if grade is not None:
        out += ["", *grade_markdown(grade)]
    out += ["", "## Verdicts", "", _table(doc), ""]
    for s in doc["scenarios"]:
        out += _scenario_section(s, book)
    return "\n".join(out) + "\n"


def _table(doc: dict) -> str:
    header = "| clause | " + " | ".join(s["id"] for s in doc["scenarios"]) + " |"
    rule = "|---|" + "---|" * len(doc["scenarios"])
    rows = []
    for clause in clause_order(doc):
        cells = []
        for s in doc["scenarios"]:
            v = next((c for c in s["clauses"] if c["id"] == clause), None)
            cell = status_text(v["status"]) if v else "…"
            if v and v["expected"] == "fail":
                cell += " (expected fail)"
            cells.append(cell)
        rows.append(f"| `{clause}` | " + " | ".join(cells) + " |")
    checks = " | ".join(status_text(s["instrument_check"])
                        for s in doc["scenarios"])
    return "\n".join([header, rule, *rows, f"| **instrument check** | {checks} |"])


def _scenario_section(s: dict, book: EvidenceBook) -> list[str]:
    faults = ", ".join(f"{f['kind']} (invocation {f['invocation']})" for f in s["faults"])
    out = [f"## {md(s['id'])}", "",
           f"faults armed: {faults or 'none'}; noise: {', '.join(s['noise']) or 'off'}", "",
           f"client {code(s['client']['path'])} sha256 `{s['client']['sha256']}`; "
           f"expected to fail: {', '.join(s['expected_failures']) or 'nothing'}; "
           f"instrument check: **{s['instrument_check']}** ({md(s['instrument_detail'])})", ""]
    out += ["| clause | verdict | expected | reason | evidence |", "|---|---|---|---|---|"]
    for c in s["clauses"]:
        refs = ", ".join(f"#{n}" for n in c["evidence"][:8])
        more = f" (+{len(c['evidence']) - 8})" if len(c["evidence"]) > 8 else ""
        out.append(f"| `{c['id']}` | {status_text(c['status'])} | {c['expected']} "
                   f"| {md(c['reason'])} | {refs}{more} |")
    out += ["", "| figure | " + " | ".join(f"inv {i['n']}" for i in s["invocations"]) + " |",
            "|---|" + "---|" * len(s["invocations"])]
    for label, get in figure_rows(s):
        out.append(f"| {label} | " + " | ".join(fmt(get(i)) for i in s["invocations"]) + " |")
    out += _file_effects(book, s)
    out += _load(book, s)
    out += ["", "Timeline (ms from scenario start):", "", "```"]
    out += _timeline(book, s["id"])
    out += ["```", ""]
    return out


def _file_effects(book: EvidenceBook, s: dict) -> list[str]:
    """Where its file changes landed (sessions/output/file_effects), as the dashboard's pane."""
    effects = fx.file_effects(book.scenarios[s["id"]])
    if not effects:
        return []
    count = len(s["invocations"])
    out = ["", "File effects (the kernel's file events that change something, by where each "
           "path resolved; bytes: the kernel's counters):", "",
           "| changes | " + " | ".join(f"inv {n}" for n in range(1, count + 1)) + " |",
           "|---|" + "---|" * count]
    out += [f"| {label} | " + " | ".join("–" if v is None else fmt(v) for v in values)
            + " |" for label, values in fx.rows(effects, count)]
    items = fx.details(effects, code)
    return out + ([""] if items else []) + [f"- invocation {n}, {what}: {', '.join(things)}"
                                            for n, what, things in items]


def _load(book: EvidenceBook, s: dict) -> list[str]:
    """evlab's load over time (sessions/output/load_over_time), as the dashboard's load view."""
    load = load_over_time(book.scenarios[s["id"]], REPORT_BUCKETS)
    if load is None:
        return []
    out = ["", f"Load over time ({', '.join(map(md, load.loads))}; requests by when they "
           "began, seconds from the scenario's start):"]
    for inv in load.invocations:
        out += ["", f"- {invocation_heading(load, inv)}", "",
                "| " + " | ".join(REPORT_HEAD) + " |", "|---" * len(REPORT_HEAD) + "|"]
        out += ["| " + " | ".join(row) + " |" for row in table_rows(load, inv)]
    return out


FIGURES = (
    ("exit code (claim)", lambda i: i["exit_code"]),
    ("connects (kernel)", lambda i: i["kernel"]["connects"]),
    ("destinations (kernel)", lambda i: ", ".join(i["kernel"]["connect_destinations"])
     if i["kernel"]["connect_destinations"] is not None else None),
    ("egress (socket layer)", lambda i: _egress(i["boundary"]["egress"])),
    ("socket bytes sent (kernel)", lambda i: i["kernel"]["sent_bytes"]),
    ("switches out (sched)", lambda i: i["kernel"]["switches_out"]),
    ("on-CPU ms (sched)", lambda i: None if i["kernel"]["cpu_ns"] is None
     else round(i["kernel"]["cpu_ns"] / 1e6, 1)),
    ("CPU ms (its cgroup)", lambda i: None if i["boundary"]["cgroup_cpu_ns"] is None
     else round(i["boundary"]["cgroup_cpu_ns"] / 1e6, 1)),
    ("decoy connections", lambda i: _decoy_connections(i["servers"])),
    ("packets / payload bytes (wire)", lambda i: None if i["packets"]["count"] is None
     else f"{i['packets']['count']} / {i['packets']['payload_bytes']:,}"),
    ("end state (verifier)", lambda i: None if i["verifier"]["match"] is None
     else f"{'ok' if i['verifier']['match'] else 'not ok'}: {i['verifier']['detail']}"),
)


def figure_rows(s: dict) -> list[tuple[str, Callable[[dict], object]]]:
    """evlab's figures, then the task's (each invocation's `figures`, by label)."""
    labels = dict.fromkeys(label for i in s["invocations"] for label in i.get("figures", {}))
    return [*FIGURES, *((label, lambda i, label=label: i.get("figures", {}).get(label))
                        for label in labels)]


def _decoy_connections(servers: dict) -> int | None:
    decoys = [s for s in servers.values() if s["role"] == "decoy"]
    return sum(s["records"].get("connection_opened", 0) for s in decoys) if decoys else None


def _egress(egress: dict | None) -> str | None:
    """Each destination its cgroup's sockets used: calls, and payload bytes on the wire."""
    if egress is None:
        return None
    sent = {(f["protocol"], f["address"], f["port"]): f["bytes"] for f in egress["packets"]}
    return ", ".join(f"{c['kind']} {c['protocol']} {c['address']}:{c['port']} x{c['calls']} "
                     f"({sent.get((c['protocol'], c['address'], c['port']), 0):,} B)"
                     + (" REFUSED" if c["refused"] else "")
                     for c in egress["calls"]) or "none"


def fmt(value) -> str:
    if value is None:
        return "not observed"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def _timeline(book: EvidenceBook, scenario: str) -> list[str]:
    lines, start, decoys = [], None, set()
    for e in sorted(book.events, key=lambda e: e.seq):
        if getattr(e, "scenario", None) != scenario:
            continue
        if isinstance(e, ScenarioStarted):
            start, decoys = e.t_ns, {n for n, role in e.roles.items() if role == "decoy"}
        text = event_line(e) if in_timeline(e, decoys) else None
        if text and start is not None:
            lines.append(f"{(e.t_ns - start) / 1e6:9.1f}  #{e.seq:<6} {text}")
    return lines


def junit(book: EvidenceBook) -> str:
    board = board_of(book)
    if board is not None:
        return campaign_junit(board)
    doc = document.build(book, board=board)
    suites = ET.Element("testsuites", name="evlab")
    for s, ev in zip(doc["scenarios"], book.scenarios.values(), strict=True):
        suite = ET.SubElement(suites, "testsuite", name=xml(s["id"]))
        failures = skipped = 0
        for c in s["clauses"]:
            wrong = ((c["expected"] == "fail" and c["status"] in ("pass", "not-applicable"))
                     or (c["expected"] != "fail" and c["status"] == "fail"))
            f, k = _case(suite, s["id"], c["id"], c["status"], c["reason"],
                         f"expected {c['expected']}, got {c['status']}" if wrong else None)
            failures, skipped = failures + f, skipped + k
        for g in ev.gates:  # a grading attempt's gates
            f, k = _case(suite, s["id"], f"gate {g.gate}", g.status, g.reason,
                         "gate failed" if g.status == "fail" else None)
            failures, skipped = failures + f, skipped + k
        suite.set("tests", str(len(suite)))
        suite.set("failures", str(failures))
        suite.set("skipped", str(skipped))
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"


def _case(suite, scenario: str, name: str, status: str, reason: str,
          failure: str | None) -> tuple[int, int]:
    """One test case; (failures, skipped) it adds."""
    case = ET.SubElement(suite, "testcase", classname=xml(f"evlab.{scenario}"), name=name)
    reason = xml(reason)
    if failure:
        ET.SubElement(case, "failure", message=failure).text = reason
    elif status == "inconclusive":
        ET.SubElement(case, "skipped", message=reason)
    ET.SubElement(case, "system-out").text = f"{status}: {reason}"
    return (1, 0) if failure else (0, 1) if status == "inconclusive" else (0, 0)


def render(events: list[Event], fmt: str) -> str:
    book = EvidenceBook.of(events)
    if fmt == "md":
        return markdown(book)
    if fmt == "json":
        return json.dumps(document.build(book), indent=2) + "\n"
    if fmt == "junit":
        return junit(book)
    raise ValueError(f"unknown report format {fmt!r}: choose md, json or junit")


def clause_order(doc: dict) -> list[str]:
    """The task's clauses in its contract's order, then any other a scenario was judged on."""
    return list(dict.fromkeys([*doc["task"]["clauses"],
                               *(c["id"] for s in doc["scenarios"] for c in s["clauses"])]))
