"""A campaign opened from its request (sessions/spec/request.py), before it runs, headless
(sessions/cli/campaign.py) or in the dashboard: the campaign file read, the engine that runs
its attempts (here, or on Ray) and its journal, new or resumed."""

from dataclasses import replace
from pathlib import Path

from sessions.campaign.driver import campaign_started
from sessions.campaign.journal import Journal, JournalError
from sessions.campaign.local import LocalEngine
from sessions.campaign.ray_engine import EngineError
from sessions.lab.cpus import default_jobs
from sessions.lab.plan import options_of
from sessions.spec.campaign import Campaign, CampaignError, load_campaign
from sessions.spec.request import CampaignRequest, UsageError
from sessions.spec.task import task_ref
from sessions.stream.campaign_events import CampaignStarted
from sessions.stream.events import Event


def campaign_dir(request: CampaignRequest, campaign: Campaign) -> Path:
    return request.dir if request.dir is not None else Path(f"evlab-campaign-{campaign.name}")


def open_journal(request: CampaignRequest, campaign: Campaign,
                 engine_name: str) -> tuple[Journal, list[Event]]:
    directory = campaign_dir(request, campaign)
    if not request.resume:
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


def make_engine(request: CampaignRequest, options):
    if request.ray is None:
        return LocalEngine(options, request.jobs or default_jobs())
    from sessions.campaign.ray_engine import RayEngine
    return RayEngine(request.ray, options, request.jobs)   # None: each node's own default


def open_campaign(request: CampaignRequest):
    """What a campaign needs before it runs (headless or in the dashboard): (campaign,
    options, engine, journal, resumed events). A mistake is a UsageError, with the engine
    closed again and nothing written."""
    try:
        campaign = load_campaign(request.file, task_ref(request.task) if request.task else None)
        options = campaign_options(request, campaign)
        engine = make_engine(request, options)
    except (CampaignError, EngineError) as e:
        raise UsageError(str(e)) from None
    try:
        journal, resumed = open_journal(request, campaign, engine.name)
    except BaseException as e:
        engine.close()
        if isinstance(e, JournalError):
            raise UsageError(str(e)) from None
        raise
    return campaign, options, engine, journal, resumed


def campaign_options(request: CampaignRequest, campaign: Campaign):
    """The request's noise, else the campaign file's; on the first task's lab, which opens
    first (a node opens its lab before the first attempt)."""
    lab = replace(request.lab, noise=request.lab.noise or tuple(campaign.noise))
    return options_of(lab, True, campaign.sandbox, campaign.tasks[0])
