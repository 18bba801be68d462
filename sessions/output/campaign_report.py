"""A campaign's Markdown and JUnit: the leaderboard (overall and per scenario), the attempts the
engine lost, then each client's grade. Rendered from the typed board
(sessions/output/leaderboard.py)."""

import xml.etree.ElementTree as ET

from sessions.output.escape import code, xml
from sessions.output.escape import markdown as md
from sessions.output.grade_report import grade_markdown
from sessions.output.leaderboard import Board, Ranked
from sessions.output.vocabulary import figure, score_text


def _risks(r: dict[str, int]) -> str:
    return " / ".join(str(r[s]) for s in ("high", "medium", "low"))


def _row(r: Ranked, with_extra: bool) -> str:
    m = r.figures
    cells = [str(r.rank), md(r.name), figure(m.pass_at_1), figure(m.pass_hat_k),
             figure(m.best_of_n), score_text(m), str(r.invalid)]
    if with_extra:
        most = r.fails_most
        cells += [_risks(r.risks), f"{most.name} ({most.count}×)" if most else "—"]
    return "| " + " | ".join(cells) + " |"


def _board(rows: tuple[Ranked, ...], with_extra: bool) -> list[str]:
    head = "| rank | client | Pass@1 | pass^k | Best-of-N | score ± SEM | invalid |"
    if with_extra:
        head += " risks high / medium / low | fails most |"
    return [head, "|" + "---|" * (head.count("|") - 1), *(_row(r, with_extra) for r in rows)]


def campaign_markdown(c: Board, partial: bool, end_reason: str) -> list[str]:
    p = c.progress
    out = [f"# evlab campaign report: {md(c.name)}", "",
           f"- engine: **{c.engine}**; scenarios {', '.join(c.scenarios)}; "
           f"{c.attempts_per_scenario} attempt(s) each; an attempt the engine loses runs "
           f"again up to {c.retries} time(s)",
           f"- campaign: {'**partial** — ' if partial else ''}{end_reason}; "
           f"{p.done} of {p.total} attempts done, {p.running} running, "
           f"{p.queued} queued, {p.lost} lost to the engine",
           "", "## Leaderboard", ""]
    for task, rows in c.by_task():
        out += ([f"### task {code(task)}", ""] if len(c.tasks) > 1 else []) \
            + [*_board(rows, True), ""]
    out += ["_Ranked by pass^k, then Pass@1, then mean score, then fewer high and medium risk "
            "findings; the clients of each task apart. Invalid attempts (the engine's or the "
            "environment's doing, not the client's) are left out of every figure._", ""]
    for base, rows in c.per_scenario.items():
        out += [f"### {base}", "", *_board(rows, False), ""]
    lost = [e for entry in c.clients.values() for e in entry.lost]
    if lost:
        out += ["## Attempts the engine lost (invalid, not the client's)", ""]
        out += [f"- {code(e.scenario)} run {e.run} on {md(e.node)}: {md(e.reason)} — "
                + ("run again" if e.retried else "**not run again**") for e in lost]
        out.append("")
    for name, entry in c.clients.items():
        out += [f"## Client {code(name)}", "", *grade_markdown(entry.grade)[2:]]
    return out


def campaign_junit(c: Board) -> str:
    """A test suite per client, a test case per attempt: failure when the client failed it,
    skipped when the attempt was invalid."""
    suites = ET.Element("testsuites", name=xml(f"evlab campaign {c.name}"))
    for name, entry in c.clients.items():
        suite = ET.SubElement(suites, "testsuite", name=xml(name))
        failures = skipped = 0
        for base, s in entry.grade.scenarios.items():
            for run in s.runs:
                case = ET.SubElement(suite, "testcase", classname=xml(f"evlab.{name}.{base}"),
                                     name=xml(run.id))
                reason = xml(run.judged.reason) if run.judged else "not judged"
                if run.status == "invalid":
                    ET.SubElement(case, "skipped", message=reason)
                    skipped += 1
                elif run.status != "success":
                    ET.SubElement(case, "failure", message=reason).text = reason
                    failures += 1
                ET.SubElement(case, "system-out").text = reason
        for e in entry.lost:
            case = ET.SubElement(suite, "testcase", classname=xml(f"evlab.{name}.engine"),
                                 name=xml(f"{e.scenario} run {e.run}"))
            ET.SubElement(case, "skipped", message=xml(f"lost on {e.node}: {e.reason}"))
            skipped += 1
        suite.set("tests", str(len(suite)))
        suite.set("failures", str(failures))
        suite.set("skipped", str(skipped))
    return ET.tostring(suites, encoding="unicode", xml_declaration=True) + "\n"
