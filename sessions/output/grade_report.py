"""The Markdown of a grade: who was graded, the metrics, clauses and gates x attempts, and the
risk findings. Built from the JSON document's `grade` section (sessions/document.py)."""

from sessions.judging.gates import GATES
from sessions.output.vocabulary import figure, score_text, status_symbol, status_text
from sessions.spec.contract import CLAUSE_IDS


def _cell(status: str | None) -> str:
    return status_symbol(status) if status else "…"


def _outcome(run: dict) -> str:
    if run["valid"] is None:
        return status_text("not-judged")
    if not run["valid"]:
        return status_text("invalid")
    return status_text("success" if run["success"] else "failed")


def _identity(grade: dict) -> list[str]:
    c = grade["client"]
    out = [f"- command: `{' '.join(c['command'])}`",
           f"- executable: `{c['executable']}` sha256 `{c['sha256']}`"]
    out += [f"- file `{path}` sha256 `{digest}`" for path, digest in c["files"].items()]
    out += [f"- shipped `{name}` sha256 `{digest}`"
            for name, digest in c.get("shipped", {}).items()]
    if c["env"] is not None:   # None: a campaign client none of whose attempts came back
        out.append("- environment: " + ", ".join(f"`{k}={v}`"
                                                 for k, v in sorted(c["env"].items())))
    return out


def _metrics_table(grade: dict) -> list[str]:
    names = list(grade["scenarios"])
    columns = [grade["scenarios"][n] for n in names] + [grade["overall"]]
    rows = [("Pass@1", lambda m: figure(m["pass_at_1"])),
            ("pass^k (k = valid attempts)", lambda m: figure(m["pass_hat_k"])),
            ("Best-of-N", lambda m: figure(m["best_of_n"])),
            ("mean score ± SEM", score_text),
            ("valid / invalid attempts",
             lambda m: f"{m['attempts'] - m['invalid']} / {m['invalid']}")]
    out = ["| metric | " + " | ".join(names) + " | overall |",
           "|---|" + "---|" * (len(names) + 1)]
    out += [f"| {label} | " + " | ".join(fn(m) for m in columns) + " |" for label, fn in rows]
    return out


def _attempts_table(name: str, runs: list[dict]) -> list[str]:
    out = [f"### {name}: clauses and gates × attempts", "",
           "| | " + " | ".join(f"@{r['attempt']}" for r in runs) + " |",
           "|---|" + "---|" * len(runs)]
    for clause in CLAUSE_IDS:
        out.append(f"| `{clause}` | " + " | ".join(
            _cell(r["clauses"].get(clause)) for r in runs) + " |")
    for gate in GATES:
        out.append(f"| gate `{gate}` | " + " | ".join(
            _cell(r["gates"].get(gate, {}).get("status")) for r in runs) + " |")
    out.append("| **attempt** | " + " | ".join(_outcome(r) for r in runs) + " |")
    out.append("")
    out += [f"- @{r['attempt']}: {r['reason']}" for r in runs]
    failing = [(r, g, v) for r in runs for g, v in r["gates"].items() if v["status"] != "pass"]
    out += [f"- @{r['attempt']} gate `{g}` {v['status']}: {v['reason']}" for r, g, v in failing]
    return out + [""]


def _risks(grade: dict) -> list[str]:
    runs = [r for s in grade["scenarios"].values() for r in s["runs"]]
    found = [(r["id"], f) for r in runs for f in r["risk_findings"]]
    blind = [(r["id"], r["risk_scan"]["detail"]) for r in runs if not r["risk_scan"]["complete"]]
    out = [f"- **{f['severity']}** {f['kind']} — {rid} invocation {f['invocation']}: "
           f"{f['detail']} (events {', '.join(map(str, f['evidence'][:5]))})"
           for rid, f in found]
    out += [f"- **scan {detail}** — {rid}: findings there may be missing" for rid, detail in blind]
    if not out:
        out = ["No risk findings, and the kernel delivered every file, exec and connect event: "
               "no exec of another program, no write outside the working directory, no write "
               "to the source, no other connection, no read outside the source and system "
               "libraries."]
    return out


def grade_markdown(grade: dict) -> list[str]:
    out = ["## Grade", "", *_identity(grade),
           f"- attempts per scenario: {grade['attempts_per_scenario']} (each from fresh state)",
           "", *_metrics_table(grade), "", f"_{grade['metric_definitions']}._", ""]
    for name, metrics in grade["scenarios"].items():
        out += _attempts_table(name, metrics["runs"])
    return out + ["### Risk findings (reported, not judged)", "", *_risks(grade), ""]
