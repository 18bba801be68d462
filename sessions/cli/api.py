"""evlab as a library (`import evlab`): the headless sessions of `evlab run`, `evlab grade` and
`evlab campaign` as functions that return what was judged. The command line is these with
progress lines, a printed summary line and an exit status (commands.py, campaign.py).

    result = evlab.grade(["python3", "my_client.py", "{host}", "{port}", "{source}"],
                         attempts=1, archive="grade.tar.gz")
    result.success_rate, result.summary, result.verdicts(), result.archive

Keyword arguments are the command line's options, spelled as Python: each is read by the same
parser, so a value the command line refuses is refused here with the same one-line message.
Every mistake (a bad value, an unknown task or scenario, a client that cannot run, a machine
that cannot observe, an output that cannot be written) is one EvlabError carrying the line the
command line prints; nothing is left running or written then.
"""

import argparse
import shlex
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import NoReturn

from probes.collectors.choose import CollectorUnavailable
from sessions.cli.campaign import campaign_session
from sessions.cli.headless import Outputs, record_session
from sessions.cli.parser import UsageError, build_parser, parser_class
from sessions.cli.plan import plan_of
from sessions.lab.harness import ServerStartError
from sessions.lab.session import RunError
from sessions.output.archive import ArchiveError
from sessions.output.grades import ClientGrade
from sessions.output.leaderboard import Board
from sessions.spec.campaign import CampaignError
from sessions.spec.client_spec import ClientSpecError
from sessions.spec.contract import ContractError
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
    options: jobs, collector, packets, noise, deny_egress, sandbox, json, report, html,
    archive, reward, ctrf, progress (called with every event, as it comes)."""
    words = shlex.join(client) if client is not None and not isinstance(client, str) else client
    return _session("grade", [str(spec)] if spec is not None else [], {
        "--client": words, "--task": task, "--attempts": attempts, "--scenario": scenarios,
        "--env": [f"{k}={v}" for k, v in (env or {}).items()], "--timeout": timeout}, options)


def run(scenarios: Sequence[str] = (), *, task: str | PathArg | None = None,
        suite: str | None = None, **options) -> Result:
    """`evlab run --headless`: scenarios by name (else the task's seeded suite, or `suite`)."""
    return _session("run", list(scenarios), {"--task": task, "--suite": suite}, options)


def campaign(file: PathArg, *, task: str | PathArg | None = None,
             dir: PathArg | None = None, resume: bool = False, ray: str | None = None,
             **options) -> Result:
    """`evlab campaign --headless FILE`: several clients graded and ranked."""
    return _session("campaign", [str(file)], {"--task": task, "--dir": dir,
                                              "--resume": resume, "--ray": ray}, options)


def _session(command: str, positional: list[str], given: dict, options: dict) -> Result:
    progress: Callable[[Event], None] | None = options.pop("progress", None)
    args = _parse(command, positional, {**given, **_options(options)})
    listen = progress or (lambda event: None)   # a library prints nothing of its own
    try:
        if command == "campaign":
            outputs = campaign_session(args, listen, quiet=True)
        else:
            outputs = record_session(plan_of(args), args, listen, quiet=True)
    except USER_ERRORS as e:
        raise EvlabError(str(e)) from None
    return _result(outputs)


def _result(o: Outputs) -> Result:
    return Result(o.status, o.summary, o.document, o.grade, o.board, o.archive_path)


# option name -> flag; booleans are flags without a value
_FLAGS = {"jobs": "--jobs", "collector": "--collector", "packets": "--packets",
          "noise": "--noise", "deny_egress": "--deny-egress", "json": "--json",
          "report": "--report", "html": "--html", "archive": "--archive", "reward": "--reward",
          "ctrf": "--ctrf"}


def _options(options: dict) -> dict:
    unknown = set(options) - set(_FLAGS) - {"sandbox"}
    if unknown:
        raise EvlabError(f"unknown option(s) {', '.join(sorted(unknown))}; evlab takes "
                         f"{', '.join(sorted({*_FLAGS, 'sandbox', 'progress'}))}")
    out = {_FLAGS[k]: v for k, v in options.items() if k in _FLAGS}
    if "--noise" in out and not isinstance(out["--noise"], str):
        out["--noise"] = ",".join(out["--noise"])
    if options.get("sandbox") is False:
        out["--no-sandbox"] = True
    return out


def _parse(command: str, positional: list[str], flags: dict) -> argparse.Namespace:
    argv = [command, "--headless", *positional]
    for flag, value in flags.items():
        if value is None or value is False or (isinstance(value, (list, tuple)) and not value):
            continue
        if value is True:
            argv.append(flag)
        elif isinstance(value, (list, tuple)):
            argv += [f"{flag}={each}" for each in value]
        else:
            argv.append(f"{flag}={value}")   # a value that begins with `-` is still its value
    return build_parser(parser_class(_refuse)).parse_args(argv)


def _refuse(message: str) -> NoReturn:
    raise EvlabError(message)
