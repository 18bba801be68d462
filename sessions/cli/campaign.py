"""`evlab campaign FILE.toml`: several clients graded and ranked, here or on a Ray cluster.

Opening one (its file, engine and journal): sessions/campaign/opening.py; its summary line
and exit status: sessions/output/endings.py.
"""

import shutil
from pathlib import Path

from sessions.campaign.driver import run_campaign
from sessions.campaign.opening import open_campaign
from sessions.cli.headless import TASK_MISTAKES, Outputs, record
from sessions.cli.progress import CampaignProgress
from sessions.output.judged import JudgedStream
from sessions.spec.request import CampaignRequest
from sessions.stream.stream import Consumer


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
