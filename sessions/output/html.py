"""The HTML report (`--html PATH`): one self-contained page to open in any browser and share.

Styles and a few lines of script are inline and nothing is fetched (the page's Content Security
Policy forbids every load: no fonts, images, scripts or styles from anywhere). It shows the
leaderboard (a campaign), the grade (`evlab grade`) or the verdict matrix (`evlab run`) first;
then the session's facts (observers, sandbox, network, missing capabilities, lost events); then
every scenario or attempt with its clauses and gates, the evidence that decided each (the events
by number, each as one line), its risk findings, figures, claims and timeline (inline SVG,
sessions/output/timeline_svg.py).

Rendered from the values every output shares: the JSON document (document.py), the typed grade
(grades.py), the board (leaderboard.py), the report's figures (report.py) and the timeline
(timeline.py); nothing is judged or graded again here. Client text is data (escape.html).

Every verdict carries machine-readable attributes, so a test can compare the page with the JSON
document: `data-scenario` with `data-clause` or `data-gate` and `data-verdict`; `data-check`
(a scenario's instrument check); `data-outcome` (a grading attempt: success, failed, invalid,
running); `data-client` with `data-rank` (the leaderboard).
"""

import json
import re

from sessions.output import document
from sessions.output import file_effects as fx
from sessions.output import load_over_time as lot
from sessions.output.escape import html as esc
from sessions.output.escape import visible
from sessions.output.grades import (
    METRIC_DEFINITIONS,
    AttemptRow,
    ClientGrade,
    clauses_of,
    gates_of_runs,
    grade_of,
)
from sessions.output.html_page import wrap
from sessions.output.leaderboard import Board, Ranked, board_of
from sessions.output.report import clause_order, figure_rows, fmt
from sessions.output.timeline import timeline_of
from sessions.output.timeline_svg import legend, svg
from sessions.output.vocabulary import fields_line, figure, score_text, status_text
from sessions.stream.evidence import EvidenceBook

EVIDENCE_SHOWN = 12     # event lines per verdict (the rest by number: the archive has them all)
LINE_MAX = 400          # characters of one event line or claim


def page(book: EvidenceBook, grade: ClientGrade | None = None,
         board: Board | None = None) -> str:
    """The page; `grade` and `board` when the caller has them already (else made here)."""
    grade = grade if grade is not None else grade_of(book)
    board = board if board is not None else board_of(book)
    doc = document.build(book, grade, board)
    anchors = {s["id"]: f"a-{i}" for i, s in enumerate(doc["scenarios"], 1)}
    runs = {run.id: run for g in _grades(grade, board) for run in g.runs}
    if board is not None:
        title, main = f"evlab campaign: {board.name}", _campaign(board, anchors)
    elif grade is not None:
        title = f"evlab grade: {grade.name}"
        main = ["<h2>Grade</h2>", *_grade(grade, anchors)]
    else:
        title, main = "evlab session report", _matrix(doc, anchors)
    body = [f"<h1>{esc(title)}</h1>", *main, _facts(doc, board is not None),
            '<h2>Attempts</h2>' if runs else "<h2>Scenarios</h2>",
            '<p><button type="button" data-open="1">expand all</button> '
            '<button type="button" data-open="0">collapse all</button></p>']
    body += [_scenario(s, anchors[s["id"]], book, runs.get(s["id"])) for s in doc["scenarios"]]
    return wrap(esc(title), "\n".join(body))


def _grades(grade: ClientGrade | None, board: Board | None) -> list[ClientGrade]:
    if board is not None:
        return [entry.grade for entry in board.clients.values()]
    return [grade] if grade is not None else []


# --- small pieces --------------------------------------------------------------------------------
def _data(**attrs: object) -> str:
    return "".join(f' data-{k.replace("_", "-")}="{esc(str(v))}"' for k, v in attrs.items())


def _status(status: str, tag: str = "td", note: str = "", **attrs: object) -> str:
    """A verdict as a cell: its symbol and word (never colour alone), coloured by class."""
    kind = re.sub(r"[^a-z-]", "", status)
    note = f' <span class="note">{note}</span>' if note else ""
    return (f'<{tag} class="s-{kind}"{_data(**attrs)}><span class="word">'
            f"{esc(status_text(status))}</span>{note}</{tag}>")


def _table(head: list[str], rows: list[str], cls: str = "") -> str:
    """A table that scrolls sideways on a narrow screen (or, of class stack, becomes a block per
    row there); head and rows already HTML."""
    return (f'<div class="scroll"><table{f" class={cls}" if cls else ""}><thead><tr>'
            + "".join(f"<th>{h}</th>" for h in head)
            + "</tr></thead><tbody>" + "".join(f"<tr>{r}</tr>" for r in rows)
            + "</tbody></table></div>")


def _line(text: str) -> str:
    return esc(visible(text, LINE_MAX))


# --- the session's facts -------------------------------------------------------------------------
def _facts(doc: dict, campaign: bool) -> str:
    warn: set[str] = set()
    facts = [("observers", f"collector {doc['collector']}, packets {doc['packets']}"),
             ("kernel", f"{doc['kernel']}"),
             ("evlab", f"{doc['evlab_version']}, contract v{doc['contract_version']}"),
             ("session", ("partial — " if doc["partial"] else "") + str(doc["end_reason"]))]
    if doc["partial"]:
        warn.add("session")
    box = doc["sandbox"]
    if box is None:
        facts.append(("client confinement", "not recorded"))
    else:
        facts.append(("client confinement",
                      (box["summary"] if box["enabled"] else f"NOT SANDBOXED — {box['summary']}")
                      + f"; cgroups {box['cgroups']}"
                      + ("; egress denied beyond the endpoint" if box["deny_egress"] else "")))
        if not box["enabled"]:
            warn.add("client confinement")
        if box.get("network"):   # absent in an archive from before lab networks
            facts.append(("network", box["network"] if box["own_network"]
                          else f"HOST NETWORK — {box['network']}"))
            if not box["own_network"]:
                warn.add("network")
    lost = [i["kernel"]["lost_events"] for s in doc["scenarios"] for i in s["invocations"]
            if i["kernel"]["lost_events"] is not None]
    facts.append(("kernel events lost", f"{sum(lost):,} over {len(lost)} invocation(s)"
                  if lost else "not observed"))
    if sum(lost):
        warn.add("kernel events lost")
    rows = "".join(f'<dt>{name}</dt><dd{" class=warn" if name in warn else ""}>{esc(value)}</dd>'
                   for name, value in facts)
    missing = doc["capabilities"]["missing"]
    caps = ("<dd>none</dd>" if not missing else '<dd class="warn"><ul>' + "".join(
        f"<li><b>{esc(m['name'])}</b>: {esc(m['detail'])} — fix: <code>{esc(m['fix'])}</code>"
        "</li>" for m in missing) + "</ul></dd>")
    note = ('<p class="note">A campaign\'s facts are those of the attempt that came back last; '
            "each attempt names its own observers.</p>" if campaign else "")
    return (f'<section id="facts"><h2>Session</h2><dl class="facts">{rows}'
            f"<dt>capabilities missing</dt>{caps}</dl>{note}</section>")


# --- `evlab run`: clauses x scenarios ----------------------------------------------------------
def _matrix(doc: dict, anchors: dict[str, str]) -> list[str]:
    s = doc["summary"]
    line = (f"{s['detected']} detected, {s['missed']} missed, {s['inconclusive']} inconclusive, "
            f"{s['invalid']} invalid of {s['scenarios']} scenarios ({s['note']})")
    clauses = clause_order(doc)
    head = ["clause", *(f'<a href="#{anchors[sc["id"]]}">{esc(sc["id"])}</a>'
                        for sc in doc["scenarios"])]
    rows = []
    for clause in clauses:
        cells = []
        for sc in doc["scenarios"]:
            v = next((c for c in sc["clauses"] if c["id"] == clause), None)
            cells.append(_status(v["status"], note="expected fail" if v["expected"] == "fail"
                                 else "", scenario=sc["id"], clause=clause,
                                 verdict=v["status"]) if v else "<td>…</td>")
        rows.append(f"<th><code>{esc(clause)}</code></th>" + "".join(cells))
    rows.append("<th>instrument check</th>" + "".join(
        _status(sc["instrument_check"], scenario=sc["id"], check=sc["instrument_check"])
        for sc in doc["scenarios"]))
    return ["<h2>Verdicts</h2>", f'<p class="summary">{esc(line)}</p>', _table(head, rows),
            '<p class="note">Expected failures are the scenario\'s declaration; a scenario is '
            "detected when every clause came out as declared.</p>"]


# --- `evlab grade` (and each client of a campaign) ------------------------------------------------
def _identity(grade: ClientGrade) -> str:
    c = grade.identity
    items = [("command", " ".join(c["command"])),
             ("executable", f"{c['executable']} sha256 {c['sha256']}")]
    items += [("file", f"{path} sha256 {digest}") for path, digest in c["files"].items()]
    items += [("shipped", f"{name} sha256 {digest}")
              for name, digest in c.get("shipped", {}).items()]
    if c["env"] is not None:
        items.append(("environment", " ".join(f"{k}={v}" for k, v in sorted(c["env"].items()))))
    items.append(("attempts per scenario", f"{grade.attempts_per_scenario}, each from fresh state"))
    return '<dl class="facts">' + "".join(f"<dt>{k}</dt><dd><code>{esc(v)}</code></dd>"
                                          for k, v in items) + "</dl>"


def _metrics(grade: ClientGrade) -> str:
    columns = [*(s.metrics for s in grade.scenarios.values()), grade.overall]
    rows = [("Pass@1", lambda m: figure(m.pass_at_1)),
            ("pass^k (k = valid attempts)", lambda m: figure(m.pass_hat_k)),
            ("Best-of-N", lambda m: figure(m.best_of_n)), ("mean score ± SEM", score_text),
            ("valid / invalid attempts", lambda m: f"{m.attempts - m.invalid} / {m.invalid}")]
    return _table(["metric", *map(esc, grade.scenarios), "overall"],
                  [f"<th>{label}</th>" + "".join(f"<td>{fn(m)}</td>" for m in columns)
                   for label, fn in rows])


def _attempts(base: str, runs: tuple[AttemptRow, ...], anchors: dict[str, str]) -> str:
    head = [esc(base), *(f'<a href="#{anchors.get(r.id, "")}">@{r.attempt}</a>' for r in runs)]
    rows = [f"<th><code>{clause}</code></th>" + "".join(
        _status(r.clauses[clause], scenario=r.id, clause=clause, verdict=r.clauses[clause])
        if clause in r.clauses else "<td>…</td>" for r in runs) for clause in clauses_of(runs)]
    for gate in gates_of_runs(runs):
        cells = [next((g for g in r.gates if g.gate == gate), None) for r in runs]
        rows.append(f"<th>gate <code>{gate}</code></th>" + "".join(
            _status(g.status, scenario=r.id, gate=gate, verdict=g.status) if g else "<td>…</td>"
            for r, g in zip(runs, cells, strict=True)))
    rows.append("<th>attempt</th>" + "".join(
        _status("not-judged" if r.status == "running" else r.status, scenario=r.id,
                outcome=r.status) for r in runs))
    return _table(head, rows)


def _risk_list(runs: list[AttemptRow]) -> str:
    items = [f'<li><b class="risk-{esc(f.severity)}">{esc(f.severity)}</b> {esc(f.kind)} — '
             f"{esc(r.id)} invocation {f.invocation}: {_line(f.detail)} (events "
             f"{', '.join(f'#{n}' for n in f.evidence[:8])})</li>"
             for r in runs for f in r.risks]
    items += [f'<li class="warn">scan {esc(r.scan_detail)} — {esc(r.id)}: findings there may '
              "be missing</li>" for r in runs if r.judged is not None and not r.scan_complete]
    return (f"<ul>{''.join(items)}</ul>" if items else
            "<p>No risk findings, and the kernel delivered every file, exec and connect event."
            "</p>")


def _grade(grade: ClientGrade, anchors: dict[str, str]) -> list[str]:
    out = [_identity(grade), _metrics(grade), f'<p class="note">{esc(METRIC_DEFINITIONS)}.</p>',
           "<h3>Clauses and gates × attempts</h3>"]
    out.append('<div class="side">' + "".join(_attempts(base, s.runs, anchors)
                                              for base, s in grade.scenarios.items()) + "</div>")
    out += [f'<p class="note">{esc(a.scenario)}: {esc(a.reason)}</p>' for a in grade.given_up]
    return [*out, "<h3>Risk findings (reported, not judged)</h3>", _risk_list(grade.runs)]


# --- `evlab campaign`: the leaderboard -----------------------------------------------------------
def _ranked(rows: tuple[Ranked, ...], extra: bool) -> str:
    head = ["rank", "client", "Pass@1", "pass^k", "Best-of-N", "score ± SEM", "invalid"]
    out = []
    for r in rows:
        m = r.figures
        cells = [str(r.rank), f"<b>{esc(r.name)}</b>", figure(m.pass_at_1),
                 figure(m.pass_hat_k), figure(m.best_of_n), score_text(m), str(r.invalid)]
        if extra:
            most = r.fails_most
            cells += [" / ".join(str(r.risks[s]) for s in ("high", "medium", "low")),
                      f"{esc(most.name)} ({most.count}×)" if most else "—"]
        attrs = _data(client=r.name, rank=r.rank) if extra else ""
        out.append(f'<td{attrs}>' + "</td><td>".join(cells) + "</td>")
    return _table(head + (["risks high / medium / low", "fails most"] if extra else []), out)


def _campaign(board: Board, anchors: dict[str, str]) -> list[str]:
    p = board.progress
    out = [f'<p class="summary">engine <b>{esc(board.engine)}</b>; scenarios '
           f"{esc(', '.join(board.scenarios))}; {board.attempts_per_scenario} attempt(s) each; "
           f"{p.done} of {p.total} attempts done, {p.running} running, {p.queued} queued, "
           f"{p.lost} lost to the engine (run again up to {board.retries} time(s))</p>",
           "<h2>Leaderboard</h2>"]
    for task, rows in board.by_task():
        out += ([f"<h3>task {esc(task)}</h3>"] if len(board.tasks) > 1 else []) \
            + [_ranked(rows, True)]
    out += ['<p class="note">Ranked by pass^k, then Pass@1, then mean score, then fewer high and '
           "medium risk findings; the clients of each task apart. Invalid attempts are left out of "
            "every figure.</p>"]
    for base, rows in board.per_scenario.items():
        out += [f"<h3>{esc(base)}</h3>", _ranked(rows, False)]
    lost = [e for entry in board.clients.values() for e in entry.lost]
    if lost:
        out += ["<h3>Attempts the engine lost (invalid, not the client's)</h3>", "<ul>" + "".join(
            f"<li><code>{esc(e.scenario)}</code> run {e.run} on {esc(e.node)}: {esc(e.reason)}"
            f" — {'run again' if e.retried else '<b>not run again</b>'}</li>" for e in lost)
            + "</ul>"]
    for name, entry in board.clients.items():
        out += [f'<h2>Client <code>{esc(name)}</code></h2>', *_grade(entry.grade, anchors)]
    return out


# --- one scenario or attempt -------------------------------------------------------------------
def _evidence(refs: list[int], book: EvidenceBook, t0: int) -> str:
    if not refs:
        return '<span class="note">none</span>'
    lines = "".join(f"<li><code>#{n}</code> " + (_line(fields_line(book.by_seq[n], t0))
                                                 if n in book.by_seq else "(not in the stream)")
                    + "</li>" for n in refs[:EVIDENCE_SHOWN])
    if len(refs) > EVIDENCE_SHOWN:
        lines += f'<li class="note">and {len(refs) - EVIDENCE_SHOWN} more in events.jsonl</li>'
    numbers = " ".join(f"#{n}" for n in refs[:6]) + (" …" if len(refs) > 6 else "")
    return f'<details class="ev"><summary>{numbers}</summary><ol>{lines}</ol></details>'


def _verdicts(s: dict, run: AttemptRow | None, book: EvidenceBook, t0: int) -> str:
    rows = [f"<th><code>{esc(c['id'])}</code></th>"
            + _status(c["status"], scenario=s["id"], clause=c["id"], verdict=c["status"])
            + f"<td>{esc(c['expected'])}</td><td>{_line(c['reason'])}</td>"
            f"<td>{esc(c['failure_class'] or '')}</td><td>{_evidence(c['evidence'], book, t0)}</td>"
            for c in s["clauses"]]
    rows += [f"<th>gate <code>{esc(g.gate)}</code></th>"
             + _status(g.status, scenario=s["id"], gate=g.gate, verdict=g.status)
             + f"<td></td><td>{_line(g.reason)}</td><td>{esc(g.failure_class or '')}</td>"
             f"<td>{_evidence(list(g.evidence), book, t0)}</td>"
             for g in (run.gates if run else ())]
    return _table(["clause / gate", "verdict", "expected", "reason", "failure class",
                   "evidence (events)"], rows, "stack")


def _figures(s: dict) -> str:
    head = ["figure", *(f"inv {i['n']}" for i in s["invocations"])]
    return _table(head, [f"<th>{esc(label)}</th>" + "".join(f"<td>{_line(fmt(get(i)))}</td>"
                                                            for i in s["invocations"])
                         for label, get in figure_rows(s)])


def _file_effects(s: dict, book: EvidenceBook) -> str:
    """Where its file changes landed (sessions/output/file_effects), as the dashboard's pane."""
    effects = fx.file_effects(book.scenarios[s["id"]])
    if not effects:
        return ""
    count = len(s["invocations"])
    table = _table(["changes", *(f"inv {n}" for n in range(1, count + 1))],
                   [f"<th>{esc(label)}</th>" + "".join(
                       f"<td>{'–' if v is None else f'{v:,}'}</td>" for v in values)
                    for label, values in fx.rows(effects, count)])
    def path(p: str) -> str:
        return f"<code>{_line(p)}</code>"
    items = "".join(f"<li>invocation {n}, {esc(what)}: {', '.join(things)}</li>"
                    for n, what, things in fx.details(effects, path))
    return f"<h4>File effects</h4>{table}" + (f"<ul>{items}</ul>" if items else "")


def _load(s: dict, book: EvidenceBook) -> str:
    """evlab's load over time (sessions/output/load_over_time), as the dashboard's load view."""
    load = lot.load_over_time(book.scenarios[s["id"]], lot.REPORT_BUCKETS)
    if load is None:
        return ""
    return (f"<h4>Load over time ({esc(', '.join(load.loads))})</h4><p>requests by when they "
            "began, seconds from the scenario's start</p>" + "".join(
                f"<p>{esc(lot.invocation_heading(load, inv))}</p>"
                + _table([esc(h) for h in lot.REPORT_HEAD],
                         ["".join(f"<td>{esc(c)}</td>" for c in row)
                          for row in lot.table_rows(load, inv)])
                for inv in load.invocations))


def _claims(s: dict) -> str:
    items = [f"<li>invocation {i['n']}: exit {fmt(i['exit_code'])}"
             + (" (timed out, killed)" if i["timed_out"] else "") + "<ol>"
             + "".join(f"<li><code>{_line(json.dumps(c, sort_keys=True, ensure_ascii=False))}"
                       "</code></li>" for c in i["claims"]) + "</ol></li>"
             for i in s["invocations"]]
    return f'<ul class="claims">{"".join(items)}</ul>'


def _scenario(s: dict, anchor: str, book: EvidenceBook, run: AttemptRow | None) -> str:
    ev = book.scenarios[s["id"]]
    if run is not None:
        badge = _status("not-judged" if run.status == "running" else run.status, "span",
                        scenario=s["id"], outcome=run.status)
        why = run.judged.reason if run.judged else "not judged"
    else:
        badge = _status(s["instrument_check"], "span", scenario=s["id"],
                        check=s["instrument_check"])
        why = s["instrument_detail"]
    faults = ", ".join(f"{f.get('kind')} (invocation {f.get('invocation')})" for f in s["faults"])
    where = f"; collector {run.collector}, packets {run.packets}" if run else ""
    where += f"; node {run.node}" if run and run.node else ""
    tl = timeline_of(ev)
    risks = f"<h4>Risk findings</h4>{_risk_list([run])}" if run else ""
    return (f'<details class="attempt" id="{anchor}"{_data(scenario=s["id"])}>'
            f"<summary>{badge} <b>{esc(s['id'])}</b> <span class=why>{_line(why)}</span>"
            f"</summary><p>client <code>{esc(s['client']['path'])}</code> sha256 "
            f"<code>{esc(s['client']['sha256'])}</code>; faults armed: {esc(faults or 'none')};"
            f" noise: {esc(', '.join(s['noise']) or 'off')}; expected to fail: "
            f"{esc(', '.join(s['expected_failures']) or 'nothing')}{esc(where)}; "
            f"instrument check <span{_data(scenario=s['id'], check=s['instrument_check'])}>"
            f"{esc(s['instrument_check'])}</span></p>"
            f"<h4>Clauses and gates</h4>{_verdicts(s, run, book, ev.started.t_ns)}{risks}"
            f"<h4>Timeline</h4><div class=\"scroll\">{svg(tl)}</div>{legend(tl)}"
            f"<h4>Figures</h4>{_figures(s)}{_file_effects(s, book)}{_load(s, book)}"
            f"<h4>Claims and exits</h4>{_claims(s)}</details>")
