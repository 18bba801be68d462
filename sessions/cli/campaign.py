"""`evlab campaign FILE.toml`: several clients graded and ranked, here or on a Ray cluster.

Its summary line and exit status: sessions/cli/endings.py.
"""

import shutil
import sys
from pathlib import Path

from sessions.campaign.driver import campaign_started, run_campaign
from sessions.campaign.journal import Journal, JournalError
from sessions.campaign.local import LocalEngine
from sessions.campaign.ray_engine import EngineError
from sessions.cli.headless import TASK_MISTAKES, Outputs, record
from sessions.cli.parser import UsageError
from sessions.cli.plan import options_of
from sessions.lab.cpus import default_jobs
from sessions.output.escape import visible
from sessions.output.judged import JudgedStream
from sessions.output.leaderboard import progress
from sessions.spec.campaign import Campaign, CampaignError, load_campaign
from sessions.spec.task import task_ref
from sessions.stream.campaign_events import AttemptLost, CampaignStarted
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


def campaign_dir(args, campaign: Campaign) -> Path:
    return args.dir if args.dir is not None else Path(f"evlab-campaign-{campaign.name}")


def open_journal(args, campaign: Campaign, engine_name: str) -> tuple[Journal, list[Event]]:
    directory = campaign_dir(args, campaign)
    if not args.resume:
        return Journal.create(directory, campaign.text), []
    journal, events = Journal.reopen(directory, campaign.text)
    first = next((e for e in events if isinstance(e, CampaignStarted)), None)
    if first is None:
        return journal, []
    now = campaign_started(campaign, engine_name).clients
    changed = [n for n in now if now[n] != first.clients.get(n)]
    if changed:
        raise JournalError(f"{directory}: client(s) {', '.join(changed)} changed since the "
                           "campaign started (their files' sha256); start a new campaign")
    return journal, events


def make_engine(args, options):
    if args.ray is None:
        return LocalEngine(options, args.jobs or default_jobs())
    from sessions.campaign.ray_engine import RayEngine
    return RayEngine(args.ray, options, args.jobs)   # None: each node's own default


def cmd_campaign(args) -> int:
    if not args.headless:
        raise UsageError("sessions.cli is headless only: add --headless (`evlab campaign` "
                         "without it opens the dashboard)")
    return campaign_session(args).status


def campaign_session(args, progress: Consumer | None = None, quiet: bool = False) -> Outputs:
    """Run a campaign headless: what it wrote and judged."""
    campaign, _options, engine, journal, resumed = open_campaign(args)
    stream = JudgedStream(journal)
    try:
        return record(args, stream, progress or CampaignProgress(stream.book),
                      lambda staging: run_campaign(stream, stream.book, campaign, journal,
                                                   engine, resumed),
                      staging=journal.evidence, directory=journal.dir, quiet=quiet)
    except TASK_MISTAKES:
        if not args.resume:
            _discard(journal.dir, made=args.dir is None)
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


def open_campaign(args):
    """What a campaign needs before it runs (headless or in the dashboard): (campaign,
    options, engine, journal, resumed events). A mistake is a UsageError, with the engine
    closed again and nothing written."""
    try:
        campaign = load_campaign(args.file, task_ref(args.task) if args.task else None)
        options = campaign_options(args, campaign)
        engine = make_engine(args, options)
    except (CampaignError, EngineError) as e:
        raise UsageError(str(e)) from None
    try:
        journal, resumed = open_journal(args, campaign, engine.name)
    except BaseException as e:
        engine.close()
        if isinstance(e, JournalError):
            raise UsageError(str(e)) from None
        raise
    return campaign, options, engine, journal, resumed


def campaign_options(args, campaign: Campaign):
    if not args.noise and campaign.noise:
        args.noise = ",".join(campaign.noise)
    # the first task's lab opens first (a node opens its lab before the first attempt)
    return options_of(args, True, campaign.sandbox, campaign.tasks[0])
