"""The commands that read: tasks, list, report and replay. None opens a lab, and nothing here
imports one (run and grade: sessions/cli/headless.py). Replay takes its request
(sessions/spec/request.py); tasks, list and report read their few arguments."""

import sys
from pathlib import Path

from sessions.cli.outputs import check_outputs, deliver, write_atomic
from sessions.cli.progress import CampaignProgress, Progress
from sessions.output import document, html, report
from sessions.output.archive import ArchiveError, load_archive
from sessions.output.endings import ending
from sessions.output.grades import ClientGrade
from sessions.output.judged import JudgedStream
from sessions.output.leaderboard import Board
from sessions.spec.request import ReplayRequest, UsageError
from sessions.spec.scenario import load_suite
from sessions.spec.task import builtin_tasks, load_task
from sessions.stream.evidence import EvidenceBook
from sessions.stream.replay import replay


def cmd_tasks(args=None) -> int:
    for folder in builtin_tasks():
        task = load_task(folder)
        print(f"{task.id} (version {task.version}): {task.summary}")
        print(f"  clauses: {', '.join(task.clause_ids)}")
        print(f"  suites: {', '.join(task.suites)}; placeholders: "
              f"{' '.join('{' + p + '}' for p in task.placeholders)}")
    return 0


def cmd_list(args=None) -> int:
    given = getattr(args, "task", None)
    task = load_task(given)
    option = f" --task {given}" if given else ""
    for suite in task.suites:
        print(f"{suite} suite (evlab run{option} --suite {suite}):")
        for s in load_suite(suite, task):
            fails = ", ".join(s.expect_fail) or ("(attempt invalid)" if s.expect_invalid
                                                 else "nothing")
            print(f"  {s.id:<22} must fail: {fails:<32} {s.description}")
    return 0


def untrusted(archive: Path, work):
    """Judge an archive's events: well-typed (sessions/stream/codec.py checks every field) yet still
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


def cmd_replay(request: ReplayRequest) -> int:
    if request.task:
        load_task(request.task)   # its own predicates, found again by the record's task digest
    loaded = load_archive(request.archive)
    book = EvidenceBook()

    def rejudge() -> tuple[dict, ClientGrade | None, Board | None]:
        clients = loaded.manifest.get("clients")
        progress = (CampaignProgress(book) if loaded.manifest.get("campaign") else
                    Progress(len(clients) if isinstance(clients, dict) else 0))
        stream = JudgedStream(progress, book=book, contracts=loaded.contracts)
        replay(loaded.events, stream, speed=request.speed)
        return document.judged(book)

    doc, grade, board = untrusted(request.archive, rejudge)
    if loaded.partial:
        print(f"evlab: this archive is partial: {doc['end_reason']}", file=sys.stderr)
    line, status = ending(doc, grade, board)
    print(line, file=sys.stderr)
    return status
