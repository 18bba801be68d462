"""evlab as a library (`import evlab`): the headless sessions of `evlab run`, `evlab grade` and
`evlab campaign` as functions that return what was judged. The command line is these with
progress lines, a printed summary line and an exit status (commands.py, campaign.py).

    result = evlab.grade(["python3", "my_client.py", "{host}", "{port}", "{source}"],
                         attempts=1, archive="grade.tar.gz")
    result.success_rate, result.summary, result.verdicts(), result.archive

Keyword arguments are the command line's options, spelled as Python: they make the same
request as the command line's flags (sessions/spec/request.py), checked by the same code, so a
value the command line refuses is refused here with the same one-line message.
Every mistake (a bad value, an unknown task or scenario, a client that cannot run, a machine
that cannot observe, an output that cannot be written) is one EvlabError carrying the line the
command line prints; nothing is left running or written then.
"""

import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path

from probes.collectors.choose import CollectorUnavailable
from sessions.cli.campaign import campaign_session
from sessions.cli.headless import Outputs, record_session
from sessions.lab.harness import ServerStartError
from sessions.lab.plan import plan_of
from sessions.lab.session import RunError
from sessions.output.archive import ArchiveError
from sessions.output.grades import ClientGrade
from sessions.output.leaderboard import Board
from sessions.spec.campaign import CampaignError
from sessions.spec.client_spec import ClientSpecError
from sessions.spec.contract import ContractError
from sessions.spec.request import (
    OPTIONS,
    CampaignRequest,
    ReplayRequest,
    Request,
    UsageError,
    campaign_request,
    grade_request,
    run_request,
)
from sessions.spec.scenario import ScenarioError
from sessions.spec.task import TaskError
from sessions.stream.events import Event

# a user's mistake, or what the machine cannot do: one line (the command line's exit status 2)
USER_ERRORS = (UsageError, ScenarioError, ArchiveError, RunError, CollectorUnavailable,
               ServerStartError, ClientSpecError, CampaignError, TaskError, ContractError)

PathArg = str | PathLike[str]


class EvlabError(Exception):
    """What evlab refused, in the one line its command line prints (without `evlab: `)."""


@dataclass(frozen=True)
class Verdict:
    scenario: str       # a grade's attempt: `first@2`
    clause: str
    status: str         # pass, fail, inconclusive, not-applicable
    reason: str


@dataclass(frozen=True)
class Result:
    """A finished session: its exit status as the command line's (0 as declared or every valid
    attempt succeeded, 1 something missed or failed, 3 evidence missing or nothing valid, 130
    interrupted), its summary line, the JSON document (`--json`), the typed grade (`evlab
    grade`) or board (`evlab campaign`), and the archive's path if one was asked for."""

    status: int
    summary: str
    document: dict
    grade: ClientGrade | None
    board: Board | None
    archive: Path | None

    @property
    def success_rate(self) -> float | None:
        """A grade's Pass@1: the share of valid attempts that succeeded, each scenario weighing
        the same (None: no valid attempt, or not a grade)."""
        return self.grade.overall.pass_at_1 if self.grade is not None else None

    def verdicts(self) -> list[Verdict]:
        return [Verdict(sc["id"], v["id"], v["status"], v["reason"])
                for sc in self.document.get("scenarios", []) for v in sc["clauses"]]


def grade(client: str | Sequence[str] | None = None, *, spec: PathArg | None = None,
          task: str | PathArg | None = None, attempts: int | None = None,
          scenarios: Sequence[str] = (), env: Mapping[str, str] | None = None,
          timeout: float | None = None, **options) -> Result:
    """`evlab grade --headless`: the client (a command line with the task's placeholders, as a
    string or its words) or a grade file (spec), through the task's grade scenarios.
    options: jobs, collector, packets, noise, deny_egress, sandbox, memory_mib, pids,
    cpu_seconds, open_files, disk_mib (the sandbox's limits), json, report, html, archive,
    reward, ctrf, progress (called with every event, as it comes)."""
    words = shlex.join(client) if client is not None and not isinstance(client, str) else client
    progress = _progress("grade", options)
    return _session(lambda: grade_request(
        words, spec=spec, task=task, attempts=attempts, scenarios=scenarios,
        env=[f"{k}={v}" for k, v in (env or {}).items()], timeout=timeout, **options), progress)


def run(scenarios: Sequence[str] = (), *, task: str | PathArg | None = None,
        suite: str | None = None, **options) -> Result:
    """`evlab run --headless`: scenarios by name (else the task's seeded suite, or `suite`)."""
    progress = _progress("run", options)
    return _session(lambda: run_request(scenarios, suite=suite, task=task, **options), progress)


def campaign(file: PathArg, *, task: str | PathArg | None = None,
             dir: PathArg | None = None, resume: bool = False, ray: str | None = None,
             **options) -> Result:
    """`evlab campaign --headless FILE`: several clients graded and ranked."""
    progress = _progress("campaign", options)
    return _session(lambda: campaign_request(file, task=task, dir=dir, resume=resume, ray=ray,
                                             **options), progress)


def _progress(command: str, options: dict) -> Callable[[Event], None] | None:
    """The progress callback, popped from options; every other option one of the command's."""
    unknown = set(options) - OPTIONS[command] - {"progress"}
    if unknown:
        raise EvlabError(f"unknown option(s) {', '.join(sorted(unknown))}; evlab.{command} "
                         f"takes {', '.join(sorted({*OPTIONS[command], 'progress'}))}")
    return options.pop("progress", None)


def _session(build: Callable[[], Request], progress: Callable[[Event], None] | None) -> Result:
    listen = progress or (lambda event: None)   # a library prints nothing of its own
    try:
        request = build()
        if isinstance(request, CampaignRequest):
            outputs = campaign_session(request, listen, quiet=True)
        else:
            assert not isinstance(request, ReplayRequest)
            outputs = record_session(plan_of(request), request.files, listen, quiet=True)
    except USER_ERRORS as e:
        raise EvlabError(str(e)) from None
    return _result(outputs)


def _result(o: Outputs) -> Result:
    return Result(o.status, o.summary, o.document, o.grade, o.board, o.archive_path)
