"""A campaign's stream: CampaignStarted, then every attempt as it comes back from where it ran
(its own opening, GradeStarted and observations, judged here as a replay would judge them), the
engine's dispatches and losses, and one SessionEnded.

    run_campaign(stream, campaign, journal, engine, resumed_events)
"""

import dataclasses
import time
from collections.abc import Sequence

from sessions.campaign.jobs import Job, plan
from sessions.campaign.journal import Journal
from sessions.campaign.shipping import Files, ShippingError, pack
from sessions.lab.attempts import AttemptPiece
from sessions.lab.session import VERSION, end_reason
from sessions.spec.campaign import Campaign
from sessions.spec.task import Task, load_task
from sessions.stream.campaign_events import AttemptDispatched, AttemptLost, CampaignStarted
from sessions.stream.codec import EventFormatError, from_json
from sessions.stream.events import (
    DERIVED,
    AttemptJudged,
    Event,
    GradeStarted,
    SessionEnded,
    SessionStarted,
)
from sessions.stream.evidence import EvidenceBook
from sessions.stream.stream import EventStream

CAMPAIGN_EVENTS = (CampaignStarted, AttemptDispatched, AttemptLost)


def campaign_started(campaign: Campaign, engine: str) -> CampaignStarted:
    return CampaignStarted(time.monotonic_ns(), campaign.name, engine,
                           {c.name: c.identity() for c in campaign.clients},
                           tuple(s.id for s in campaign.scenarios), campaign.attempts,
                           campaign.retries, time.time_ns())


class Merger:
    """The engine's sink: publishes what happens to each attempt into the campaign's stream
    and keeps the journal in step (every attempt durable once published)."""

    def __init__(self, stream: EventStream, campaign: Campaign, journal: Journal):
        self.stream, self.campaign, self.journal = stream, campaign, journal
        self._files: dict[str, Files] = {}
        # what every node must run: this evlab, and each task as the driver has it
        self._tasks = {t: load_task(t or None) for t in campaign.tasks}

    def files(self, client: str) -> Files:
        """The client's shipped files, read once (what every node receives)."""
        if client not in self._files:
            entry = next(c for c in self.campaign.clients if c.name == client)
            self._files[client] = pack(entry)
        return self._files[client]

    def dispatched(self, job: Job, node: str) -> None:
        self.stream.publish(AttemptDispatched(time.monotonic_ns(), job.client, job.id,
                                              job.template.id, job.attempt, job.run, node))
        self.journal.sync()

    def finished(self, job: Job, piece: AttemptPiece) -> None:
        try:
            events = [from_json(line) for line in piece.lines]
            _check_piece(job, events, self._tasks[job.task])
            self.journal.keep_files(piece.files, job.id)
        except (EventFormatError, ShippingError) as e:
            self.lost(job, piece.node, f"the node's record is unusable: {e}", retry=False)
            return
        for event in events:
            self.stream.publish(event)
        self.journal.sync()

    def lost(self, job: Job, node: str, reason: str, retry: bool = True) -> bool:
        retried = retry and job.run <= self.campaign.retries
        self.stream.publish(AttemptLost(time.monotonic_ns(), job.client, job.id,
                                        job.template.id, job.attempt, job.run, node, reason,
                                        retried))
        self.journal.sync()
        return retried


def _check_piece(job: Job, events: list[Event], task: Task) -> None:
    """A piece from a node is the attempt asked for, as observations only: one opening, one
    GradeStarted of that client, events of that attempt. A judgement, a campaign event or an
    end in it would be the node speaking for the judge or the driver."""
    if not events or not isinstance(events[0], SessionStarted):
        raise EventFormatError("it does not start with the node's SessionStarted")
    first = events[0]
    there = (first.evlab_version, first.contract_version)
    here = (VERSION, task.contract.version)
    if there != here:   # a node on other evlab code judges by other rules
        raise EventFormatError(f"the node runs evlab {there[0]} with contract v{there[1]}, "
                               f"the driver evlab {here[0]} with contract v{here[1]}")
    if (first.task_id, first.task_sha256) != (task.id, task.sha256):   # other task files
        raise EventFormatError(f"the node ran task {first.task_id} "
                               f"(sha256 {first.task_sha256[:12]}…), the driver's is "
                               f"{task.id} (sha256 {task.sha256[:12]}…)")
    for e in events:
        if isinstance(e, (*DERIVED, *CAMPAIGN_EVENTS, SessionEnded)) or (
                isinstance(e, SessionStarted) and e is not events[0]):
            raise EventFormatError(f"it holds a {type(e).__name__}, which only the driver makes")
        if isinstance(e, GradeStarted) and e.client != job.client:
            raise EventFormatError(f"it grades {e.client!r}, not {job.client!r}")
        scenario = getattr(e, "scenario", None)
        if scenario is not None and scenario != job.id:
            raise EventFormatError(f"it holds events of {scenario!r}, not {job.id!r}")
    if sum(isinstance(e, GradeStarted) for e in events) != 1:
        raise EventFormatError("it does not say once which client it ran")


def remaining(jobs: list[Job], book: EvidenceBook) -> list[Job]:
    """The jobs a resumed campaign still has to run: those never judged, each numbered after
    the runs it already had."""
    judged = {ev.id for ev in book.scenarios.values()
              if isinstance(ev.attempt, AttemptJudged)}
    runs: dict[str, int] = {}
    for d in book.dispatched:
        runs[d.scenario] = max(runs.get(d.scenario, 0), d.run)
    return [dataclasses.replace(j, run=runs[j.id] + 1) if j.id in runs else j
            for j in jobs if j.id not in judged]


def run_campaign(stream: EventStream, book: EvidenceBook, campaign: Campaign, journal: Journal,
                 engine, resumed: Sequence[Event] = ()) -> None:
    """Publish the campaign (or replay what a stopped one had finished), run what remains on
    the engine; SessionEnded says how it ended."""
    reason = "complete"
    try:
        if resumed:
            for event in resumed:
                stream.publish(event)
            journal.discard()            # already in the journal
        else:
            stream.publish(campaign_started(campaign, engine.name))
        journal.sync()
        merger = Merger(stream, campaign, journal)
        engine.run(remaining(plan(campaign), book), merger.files, merger)
    except BaseException as e:
        reason = end_reason(e)
        raise
    finally:
        stream.publish(SessionEnded(time.monotonic_ns(), partial=reason != "complete",
                                    reason=reason))
