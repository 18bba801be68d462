"""The Markdown of a grade: who was graded, the metrics, clauses and gates x attempts, and the
risk findings. Rendered from the typed grade (sessions/output/grades.py)."""

from sessions.judging.metrics import Metrics, OverallMetrics
from sessions.output.escape import code
from sessions.output.escape import markdown as md
from sessions.output.grades import (
    METRIC_DEFINITIONS,
    AttemptRow,
    ClientGrade,
    clauses_of,
    gates_of_runs,
)
from sessions.output.vocabulary import figure, score_text, status_symbol, status_text


def _cell(status: str | None) -> str:
    return status_symbol(status) if status else "…"


def _outcome(run: AttemptRow) -> str:
    return status_text("not-judged" if run.status == "running" else run.status)


def _identity(grade: ClientGrade) -> list[str]:
    c = grade.identity
    out = [f"- command: {code(' '.join(c['command']))}",
           f"- executable: {code(c['executable'])} sha256 `{c['sha256']}`"]
    out += [f"- file {code(path)} sha256 `{digest}`" for path, digest in c["files"].items()]
    out += [f"- shipped {code(name)} sha256 `{digest}`"
            for name, digest in c.get("shipped", {}).items()]
    if c["env"] is not None:   # None: a campaign client none of whose attempts came back
        out.append("- environment: " + ", ".join(code(f"{k}={v}")
                                                 for k, v in sorted(c["env"].items())))
    return out


def _metrics_table(grade: ClientGrade) -> list[str]:
    names = list(grade.scenarios)
    columns: list[Metrics | OverallMetrics] = [grade.scenarios[n].metrics for n in names]
    columns.append(grade.overall)
    rows = [("Pass@1", lambda m: figure(m.pass_at_1)),
            ("pass^k (k = valid attempts)", lambda m: figure(m.pass_hat_k)),
            ("Best-of-N", lambda m: figure(m.best_of_n)),
            ("mean score ± SEM", score_text),
            ("valid / invalid attempts", lambda m: f"{m.attempts - m.invalid} / {m.invalid}")]
    out = ["| metric | " + " | ".join(names) + " | overall |",
           "|---|" + "---|" * (len(names) + 1)]
    out += [f"| {label} | " + " | ".join(fn(m) for m in columns) + " |" for label, fn in rows]
    return out


def _attempts_table(name: str, runs: tuple[AttemptRow, ...]) -> list[str]:
    out = [f"### {name}: clauses and gates × attempts", "",
           "| | " + " | ".join(f"@{r.attempt}" for r in runs) + " |",
           "|---|" + "---|" * len(runs)]
    for clause in clauses_of(runs):
        out.append(f"| `{clause}` | " + " | ".join(
            _cell(r.clauses.get(clause)) for r in runs) + " |")
    for gate in gates_of_runs(runs):
        out.append(f"| gate `{gate}` | " + " | ".join(
            _cell(next((g.status for g in r.gates if g.gate == gate), None))
            for r in runs) + " |")
    out.append("| **attempt** | " + " | ".join(_outcome(r) for r in runs) + " |")
    out.append("")
    out += [f"- @{r.attempt}: {md(r.judged.reason) if r.judged else 'not judged'}"
            for r in runs]
    out += [f"- @{r.attempt} gate `{g.gate}` {g.status}: {md(g.reason)}"
            for r in runs for g in r.gates if g.status != "pass"]
    return out + [""]


def _risks(grade: ClientGrade) -> list[str]:
    runs = grade.runs
    out = [f"- **{f.severity}** {f.kind} — {md(r.id)} invocation {f.invocation}: "
           f"{md(f.detail)} (events {', '.join(map(str, f.evidence[:5]))})"
           for r in runs for f in r.risks]
    out += [f"- **scan {md(r.scan_detail)}** — {md(r.id)}: findings there may be missing"
            for r in runs if not r.scan_complete]
    if not out:
        out = ["No risk findings, and the kernel delivered every file, exec and connect event: "
               "no exec of another program, no write outside the working directory, no write "
               "to the watched input, no other connection, no read outside the task's inputs "
               "and system libraries."]
    return out


def grade_markdown(grade: ClientGrade) -> list[str]:
    out = ["## Grade", "", *_identity(grade),
           f"- attempts per scenario: {grade.attempts_per_scenario} (each from fresh state)",
           "", *_metrics_table(grade), "", f"_{METRIC_DEFINITIONS}._", ""]
    for name, s in grade.scenarios.items():
        out += _attempts_table(name, s.runs)
    return out + ["### Risk findings (reported, not judged)", "", *_risks(grade), ""]
