"""The grade view (`evlab grade`, and each client of a campaign): who is graded, each
scenario's attempts as symbols, the metrics, and the risk findings."""

from types import SimpleNamespace

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from sessions.output.vocabulary import figure, score_text, status_symbol, status_text
from tui.model import DashboardModel
from tui.styles import STYLE

RISK_STYLE = {"high": "bold red", "medium": "yellow"}
FINISHED = ("success", "failed", "invalid")


class GradeScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,g", "dismiss", "Back")]
    border_text = "grade (g or esc: back)"

    def __init__(self, model: DashboardModel):
        super().__init__()
        self.model = model

    def summary(self) -> dict | None:
        """What grade_text shows (DashboardModel.grade_summary's shape)."""
        return self.model.grade_summary()

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="grade-box"):
            yield Static(grade_text(self.summary()), id="grade")

    def on_mount(self) -> None:
        self.query_one("#grade-box").border_title = self.border_text
        self.set_interval(0.5, self._refresh)

    def _refresh(self) -> None:
        self.query_one("#grade", Static).update(grade_text(self.summary()))


def section_summary(section: dict | None) -> dict | None:
    """A grade section of the outputs (sessions.output.grades.client_grade: `evlab grade`'s, or
    one client's of a campaign) in the shape grade_text reads."""
    if section is None:
        return None
    client, scenarios = section["client"], section["scenarios"]
    runs = [(base, run) for base, s in scenarios.items() for run in s["runs"]]
    attempts: dict[str, list] = {base: [] for base in scenarios}
    for base, run in runs:
        attempts[base].append((run["id"], _run_status(run)))
    shown = {run["id"] for _, run in runs}
    for lost in section.get("lost", ()):   # a campaign's attempts the engine gave up on
        if not lost["retried"] and lost["id"] not in shown:
            base = lost["id"].partition(":")[2].rpartition("@")[0]   # CLIENT:BASE@N
            attempts.setdefault(base, []).append((lost["id"], "invalid"))
    return {
        "grade": SimpleNamespace(command=tuple(client["command"]),
                                 executable=client["executable"], sha256=client["sha256"],
                                 attempts=section["attempts_per_scenario"]),
        "attempts": attempts,
        "metrics": scenarios,
        "overall": section["overall"],
        "risks": [(run["id"], SimpleNamespace(**r)) for _, run in runs
                  for r in run["risk_findings"]],
        "blind": [(run["id"], run["risk_scan"]["detail"]) for _, run in runs
                  if run["valid"] is not None and not run["risk_scan"]["complete"]],
    }


def _run_status(run: dict) -> str:
    if run["valid"] is None:
        return "running"
    return "invalid" if not run["valid"] else "success" if run["success"] else "failed"


def grade_text(summary: dict | None) -> Text:
    if summary is None:
        return Text("This session is not a grade: run `evlab grade --client ...`.")
    g = summary["grade"]
    out = Text()
    out.append("client  ", "bold").append(" ".join(g.command) + "\n")
    out.append(f"        {g.executable}  sha256 {g.sha256[:16]}…\n", "dim")
    out.append(f"        {g.attempts} attempt(s) per scenario, each from fresh state\n\n")
    for base, attempts in summary["attempts"].items():
        out.append(f"{base:<13}")
        for _, status in attempts:  # never colour alone: each outcome has its own symbol
            out.append(status_symbol(status) + " ", STYLE.get(status, ""))
        out.append(" " * max(1, 2 * (g.attempts - len(attempts)) + 2))
        out.append(_metrics_text(summary["metrics"][base]) + "\n")
    out.append(f"\n{'overall':<13}" + " " * (2 * g.attempts + 2)
               + _metrics_text(summary["overall"]) + "\n\n", "bold")
    out.append(f"{status_text('success')}  {status_text('failed')}  {status_text('invalid')} "
               f"(left out of the metrics)  {status_text('running')}  {status_text('queued')}"
               "\n\n", "dim")
    _risks(out, summary)
    return out


def _risks(out: Text, summary: dict) -> None:
    risks = summary["risks"]
    out.append(f"risk findings ({len(risks)}, reported, not judged)\n", "bold")
    for sid, r in risks[:30]:
        out.append(f"  {r.severity:<6} ", RISK_STYLE.get(r.severity, ""))
        out.append(f"{sid} inv {r.invocation} {r.kind}: {r.detail}\n")
    for sid, detail in summary["blind"][:10]:
        out.append("  scan   ", "yellow").append(f"{sid} {detail}\n")
    if not risks and not summary["blind"]:
        done = all(status in FINISHED
                   for attempts in summary["attempts"].values() for _, status in attempts)
        out.append("  none: every attempt's scan saw all its file, exec and connect events\n"
                   if done else "  none so far\n", "dim")


def _metrics_text(m: dict) -> str:
    return (f"Pass@1 {figure(m['pass_at_1'])}  pass^k {figure(m['pass_hat_k'])}  "
            f"Best-of-N {figure(m['best_of_n'])}  score {score_text(m, 2, '±')}  "
            f"invalid {m['invalid']}")
