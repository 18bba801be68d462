"""How a headless session ends: its one summary line on stderr and its exit status, decided in
one place for run, grade, campaign and replay from what was judged (the JSON document, the
typed grade, the campaign's board).

Exit status: 0 as declared (run: every scenario detected; grade: every valid attempt
succeeded; campaign: every attempt judged); 1 something missed or failed; 3 nothing missed but
evidence missing, an attempt invalid or never judged, or the session cut short; 2 usage error
(sessions/cli/dispatch.py); 130 interrupted (sessions/cli/headless.py).
"""

from pathlib import Path

from sessions.judging.metrics import OverallMetrics
from sessions.output.grades import ClientGrade
from sessions.output.leaderboard import Board
from sessions.output.vocabulary import figure, score_text


def ending(document: dict, grade: ClientGrade | None, board: Board | None,
           directory: Path | None = None) -> tuple[str, int]:
    """(summary line, exit status) of a finished session; a campaign's line names its
    directory when given."""
    partial = document["partial"]
    if board is not None:
        return summary_line(board, directory), campaign_exit(board, partial)
    if grade is not None:
        return grade_summary_line(grade), grade_exit(grade, partial)
    return run_summary_line(document), exit_status(document)


def run_summary_line(document: dict) -> str:
    s = document["summary"]
    invalid = f", {s['invalid']} invalid" if s["invalid"] else ""
    return (f"evlab: {s['detected']} detected, {s['missed']} missed, {s['inconclusive']} "
            f"inconclusive{invalid} of {s['scenarios']} (collector {document['collector']}, "
            f"packets {document['packets']})")


def exit_status(document: dict) -> int:
    """0 all detected; 1 something missed; 3 nothing missed but evidence missing, an attempt
    invalid (an armed fault never fired) or the session incomplete."""
    summary = document["summary"]
    if summary["missed"]:
        return 1
    if (summary["inconclusive"] or summary["invalid"] or summary["incomplete"]
            or document["partial"]):
        return 3
    return 0


def grade_summary_line(grade: ClientGrade) -> str:
    o = grade.overall
    risks = sum(len(run.risks) for run in grade.runs)
    return (f"evlab: grade of {grade.name}: Pass@1 {figure(o.pass_at_1)}, "
            f"pass^k {figure(o.pass_hat_k)}, Best-of-N {figure(o.best_of_n)}, "
            f"score {score_text(o)} "
            f"over {o.attempts - o.invalid} valid attempts ({o.invalid} invalid); "
            f"{risks} risk finding(s)")


def grade_exit(grade: ClientGrade, partial: bool) -> int:
    """grade_status, and 3 rather than 0 for a session cut short (attempts never judged)."""
    status = grade_status(grade.overall)
    return 3 if status == 0 and partial else status


def grade_status(overall: OverallMetrics) -> int:
    """Exit status of `evlab grade`: 0 every valid attempt of every scenario succeeded; 1 an
    attempt failed; 3 nothing failed but some scenario had no valid attempt."""
    if overall.pass_hat_k is not None and overall.pass_hat_k < 1:
        return 1
    if overall.scenarios_with_valid_attempts < overall.scenarios:
        return 3
    return 0


def campaign_exit(board: Board, partial: bool) -> int:
    """0 every attempt of every client judged (whatever they scored: the leaderboard says
    that); 3 an attempt given up (lost more often than the campaign's retries) or the campaign
    cut short (resume it with --resume)."""
    p = board.progress
    return 0 if p.done == p.total and not p.given_up and not partial else 3


def summary_line(board: Board, directory: Path | None = None) -> str:
    tops = [r for r in board.leaderboard if r.rank == 1]   # one per task ranked apart
    best = "".join(f"; first{f' on {top.task}' if len(tops) > 1 else ''}: {top.name} (pass^k "
                   f"{figure(top.figures.pass_hat_k)}, Pass@1 {figure(top.figures.pass_at_1)})"
                   for top in tops)
    p = board.progress
    return (f"evlab: campaign {board.name}: {p.done} of {p.total} attempts done, "
            f"{p.lost} lost to the engine{best}"
            + (f"; directory {directory}" if directory else ""))
