"""The grade view (`evlab grade`, and each client of a campaign): who is graded, each
scenario's attempts as symbols, the metrics, and the risk findings — the typed grade
(sessions/output/grades.py) the reports render too."""

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from sessions.judging.metrics import Metrics, OverallMetrics
from sessions.output.escape import visible
from sessions.output.grades import ClientGrade
from sessions.output.vocabulary import figure, score_text, status_symbol, status_text
from tui.model import DashboardModel
from tui.styles import STYLE

RISK_STYLE = {"high": "bold red", "medium": "yellow"}
FINISHED = ("success", "failed", "invalid")


class GradeScreen(ModalScreen):
    BINDINGS = [Binding("escape,q,g", "dismiss", "Back")]
    border_text: str | Text = "grade (g or esc: back)"

    def __init__(self, model: DashboardModel):
        super().__init__()
        self.model = model

    def grade(self) -> ClientGrade | None:
        """The grade shown (`evlab grade`'s; a campaign client's in ClientGradeScreen)."""
        return self.model.client_grade()

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="grade-box"):
            yield Static(grade_text(self.grade()), id="grade")

    def on_mount(self) -> None:
        self.query_one("#grade-box").border_title = self.border_text
        self.set_interval(0.5, self._refresh)

    def _refresh(self) -> None:
        self.query_one("#grade", Static).update(grade_text(self.grade()))


def grade_text(grade: ClientGrade | None) -> Text:
    if grade is None:
        return Text("This session is not a grade: run `evlab grade --client ...`.")
    k, c = grade.attempts_per_scenario, grade.identity
    statuses = grade.statuses()
    out = Text()
    out.append("client  ", "bold").append(visible(" ".join(grade.command)) + "\n")
    out.append(visible(f"        {c['executable']}  sha256 {c['sha256'][:16]}…") + "\n", "dim")
    out.append(f"        {k} attempt(s) per scenario, each from fresh state\n\n")
    for base, attempts in statuses.items():
        out.append(f"{base:<13}")
        for _, status in attempts:  # never colour alone: each outcome has its own symbol
            out.append(status_symbol(status) + " ", STYLE.get(status, ""))
        out.append(" " * max(1, 2 * (k - len(attempts)) + 2))
        out.append(_metrics_text(grade.scenarios[base].metrics) + "\n")
    out.append(f"\n{'overall':<13}" + " " * (2 * k + 2)
               + _metrics_text(grade.overall) + "\n\n", "bold")
    out.append(f"{status_text('success')}  {status_text('failed')}  {status_text('invalid')} "
               f"(left out of the metrics)  {status_text('running')}  {status_text('queued')}"
               "\n\n", "dim")
    _risks(out, grade, statuses)
    return out


def _risks(out: Text, grade: ClientGrade, statuses: dict[str, list[tuple[str, str]]]) -> None:
    risks = [(run.id, r) for run in grade.runs for r in run.risks]
    blind = grade.blind_scans()
    out.append(f"risk findings ({len(risks)}, reported, not judged)\n", "bold")
    for sid, r in risks[:30]:
        out.append(f"  {r.severity:<6} ", RISK_STYLE.get(r.severity, ""))
        out.append(visible(f"{sid} inv {r.invocation} {r.kind}: {r.detail}") + "\n")
    for sid, detail in blind[:10]:
        out.append("  scan   ", "yellow").append(visible(f"{sid} {detail}") + "\n")
    if not risks and not blind:
        done = all(status in FINISHED
                   for attempts in statuses.values() for _, status in attempts)
        out.append("  none: every attempt's scan saw all its file, exec and connect events\n"
                   if done else "  none so far\n", "dim")


def _metrics_text(m: Metrics | OverallMetrics) -> str:
    return (f"Pass@1 {figure(m.pass_at_1)}  pass^k {figure(m.pass_hat_k)}  "
            f"Best-of-N {figure(m.best_of_n)}  score {score_text(m, 2, '±')}  "
            f"invalid {m.invalid}")
