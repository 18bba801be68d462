"""The headless commands: list, run, grade, report, replay."""

import sys
from pathlib import Path

from sessions.cli.campaign import CampaignProgress, campaign_exit, summary_line
from sessions.cli.headless import Progress, record_session
from sessions.cli.outputs import check_outputs, deliver, write_atomic
from sessions.cli.parser import UsageError
from sessions.cli.plan import plan_of
from sessions.judging.metrics import OverallMetrics
from sessions.output import document, html, report
from sessions.output.archive import ArchiveError, load_archive
from sessions.output.grades import ClientGrade, grade_of
from sessions.output.judged import JudgedStream
from sessions.output.leaderboard import Board, board_of
from sessions.output.vocabulary import figure, score_text
from sessions.spec.scenario import SUITES, load_dir
from sessions.stream.evidence import EvidenceBook
from sessions.stream.replay import replay


def cmd_list(args=None) -> int:
    for suite, directory in SUITES.items():
        print(f"{suite} suite (evlab run --suite {suite}):")
        for s in load_dir(directory):
            fails = ", ".join(s.expect_fail) or ("(attempt invalid)" if s.expect_invalid
                                                 else "nothing")
            print(f"  {s.id:<22} must fail: {fails:<32} {s.description}")
    return 0


def cmd_run(args) -> int:
    if not args.headless:
        raise UsageError("sessions.cli is headless only: add --headless (the dashboard is `evlab`)")
    plan = plan_of(args)
    out = record_session(plan, args)
    if out is None:
        return 130
    doc = out.document
    s = doc["summary"]
    invalid = f", {s['invalid']} invalid" if s["invalid"] else ""
    print(f"evlab: {s['detected']} detected, {s['missed']} missed, {s['inconclusive']} "
          f"inconclusive{invalid} of {s['scenarios']} (collector {doc['collector']}, packets "
          f"{doc['packets']})", file=sys.stderr)
    return exit_status(doc)


def cmd_grade(args) -> int:
    if not args.headless:
        raise UsageError("sessions.cli is headless only: add --headless (`evlab grade` without "
                         "it opens the dashboard)")
    plan = plan_of(args)
    out = record_session(plan, args)
    if out is None:
        return 130
    assert out.grade is not None   # the session published its GradeStarted when it opened
    print(grade_summary_line(out.grade), file=sys.stderr)
    return grade_exit(out.grade, out.document["partial"])


def grade_summary_line(grade: ClientGrade) -> str:
    o = grade.overall
    risks = sum(len(run.risks) for run in grade.runs)
    return (f"evlab: grade of {grade.identity['executable']}: Pass@1 {figure(o.pass_at_1)}, "
            f"pass^k {figure(o.pass_hat_k)}, Best-of-N {figure(o.best_of_n)}, "
            f"score {score_text(o)} "
            f"over {o.attempts - o.invalid} valid attempts ({o.invalid} invalid); "
            f"{risks} risk finding(s)")


def untrusted(archive: Path, work):
    """Judge an archive's events: well-typed (sessions/events.py checks every field) yet still
    untrusted. Anything they make fail is the archive's fault, said in one line."""
    try:
        return work()
    except (ArchiveError, UsageError):
        raise
    except Exception as e:   # noqa: BLE001 - turned into the archive's one-line error
        raise ArchiveError(f"{archive}: its events cannot be judged ({type(e).__name__}: "
                           f"{str(e)[:200]})") from None


def cmd_report(args) -> int:
    """--format to stdout (or --output); --html PATH writes the page as run, grade and campaign
    do (alone, it prints nothing)."""
    check_outputs(("--output", args.output), ("--html", args.html))
    loaded = load_archive(args.archive)
    fmt = args.format or (None if args.html else "md")
    page = (untrusted(args.archive, lambda: html.page(EvidenceBook.of(loaded.events)))
            if args.html or fmt == "html" else "")
    if args.html:
        deliver("--html", args.html, lambda p: write_atomic(p, page))
    if fmt is None:
        return 0
    text = page if fmt == "html" else untrusted(args.archive,
                                                lambda: report.render(loaded.events, fmt))
    if args.output:
        deliver("--output", args.output, lambda p: write_atomic(p, text))
    else:
        sys.stdout.write(text)
    return 0


def cmd_replay(args) -> int:
    if not args.headless:
        raise UsageError("sessions.cli is headless only: add --headless (the dashboard is `evlab`)")
    loaded = load_archive(args.archive)
    book = EvidenceBook()

    def rejudge() -> tuple[dict, ClientGrade | None, Board | None]:
        clients = loaded.manifest.get("clients")
        progress = (CampaignProgress(book) if loaded.manifest.get("campaign") else
                    Progress(len(clients) if isinstance(clients, dict) else 0))
        stream = JudgedStream(progress, book=book)
        replay(loaded.events, stream, speed=args.speed)
        grade, board = grade_of(book), board_of(book)
        return document.build(book, grade, board), grade, board

    doc, grade, board = untrusted(args.archive, rejudge)
    if loaded.partial:
        print(f"evlab: this archive is partial: {doc['end_reason']}", file=sys.stderr)
    if board is not None:
        print(summary_line(board), file=sys.stderr)
        return campaign_exit(board, doc["partial"])
    if grade is not None:
        print(grade_summary_line(grade), file=sys.stderr)
        return grade_exit(grade, doc["partial"])
    return exit_status(doc)


def grade_exit(grade: ClientGrade, partial: bool) -> int:
    """grade_status, and 3 rather than 0 for a session cut short (attempts never judged)."""
    status = grade_status(grade.overall)
    return 3 if status == 0 and partial else status


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


def grade_status(overall: OverallMetrics) -> int:
    """Exit status of `evlab grade`: 0 every valid attempt of every scenario succeeded; 1 an
    attempt failed; 3 nothing failed but some scenario had no valid attempt."""
    if overall.pass_hat_k is not None and overall.pass_hat_k < 1:
        return 1
    if overall.scenarios_with_valid_attempts < overall.scenarios:
        return 3
    return 0
