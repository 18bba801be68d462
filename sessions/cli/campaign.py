"""`evlab campaign FILE.toml`: several clients graded and ranked, here or on a Ray cluster.

Opening one (its file, engine and journal): sessions/campaign/opening.py; its summary line
and exit status: sessions/output/endings.py.
"""

import shutil
import sys
from pathlib import Path

from sessions.campaign.driver import run_campaign
from sessions.campaign.opening import open_campaign
from sessions.cli.headless import TASK_MISTAKES, Outputs, record
from sessions.output.escape import visible
from sessions.output.judged import JudgedStream
from sessions.output.leaderboard import progress
from sessions.spec.request import CampaignRequest
from sessions.stream.campaign_events import AttemptLost
from sessions.stream.events import AttemptJudged, Event
from sessions.stream.evidence import EvidenceBook
from sessions.stream.stream import Consumer


class CampaignProgress:
    """One line on stderr per attempt judged or lost: where it ran, done / running / queued,
    and the time left."""

    def __init__(self, book: EvidenceBook):
        self.book = book

    def __call__(self, event: Event) -> None:
        if not isinstance(event, (AttemptJudged, AttemptLost)) or self.book.campaign is None:
            return
        p = progress(self.book)
        where = next((d.node for d in reversed(self.book.dispatched)
                      if d.scenario == event.scenario), "?")
        what = (event.reason if isinstance(event, AttemptJudged)
                else f"lost ({event.reason}); " + ("run again" if event.retried
                                                   else "not run again"))
        eta = f", about {p.eta_s:.0f} s left" if p.eta_s is not None and p.queued else ""
        nodes = "; " + " · ".join(f"{name} {n.done} done, {n.running} running"
                                  + (f", {n.lost} lost" if n.lost else "")
                                  for name, n in sorted(p.nodes.items())) \
            if len(p.nodes) > 1 else ""
        print(visible(f"[{p.done}/{p.total}] {event.scenario:<28} on {where}: {what[:90]} "
                      f"({p.running} running, {p.queued} queued{eta}{nodes})"),
              file=sys.stderr, flush=True)


def cmd_campaign(request: CampaignRequest) -> int:
    return campaign_session(request).status


def campaign_session(request: CampaignRequest, progress: Consumer | None = None,
                     quiet: bool = False) -> Outputs:
    """Run a campaign headless: what it wrote and judged."""
    campaign, _options, engine, journal, resumed = open_campaign(request)
    stream = JudgedStream(journal)
    try:
        return record(request.files, stream, progress or CampaignProgress(stream.book),
                      lambda staging: run_campaign(stream, stream.book, campaign, journal,
                                                   engine, resumed),
                      staging=journal.evidence, directory=journal.dir, quiet=quiet)
    except TASK_MISTAKES:
        if not request.resume:
            _discard(journal.dir, made=request.dir is None)
        raise
    finally:
        engine.close()


def _discard(directory: Path, made: bool) -> None:
    """A new campaign that judged nothing (its task's mistake, found as its first lab started)
    leaves nothing: what it wrote in a folder it was given, or the folder it made."""
    if made:
        shutil.rmtree(directory, ignore_errors=True)
        return
    for child in directory.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
