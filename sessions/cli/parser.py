"""evlab's command line: the parser, its examples and its one-line errors, and the request
its arguments make (`request_of`, the one place argparse's Namespace is read into a request)."""

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from probes.boundary.limits import SandboxLimits
from probes.collectors.kinds import KINDS
from sessions.spec import request as req
from sessions.spec.request import LIMITS, PACKETS, Refused, Request
from sessions.spec.suites import NOISE_KINDS
from sessions.spec.task import SUITE_NAMES
from sessions.stream.compat import OLD_TASK as DEFAULT_TASK  # a command naming no --task

EPILOG = """examples:
  evlab tasks                                   the tasks evlab judges programs on
  evlab list                                    the scenarios and what each must fail
  evlab run --all --headless                    run the task's seeded scenarios, no dashboard
  evlab grade --task fetch --client 'curl -fsS -o {out} {url}' --attempts 1 --headless
  evlab run --suite faults --headless           the client under injected faults
  evlab run baseline retry --headless --json out.json --archive s.tar.gz
  evlab run my-client.toml --headless           a scenario file of your own
  evlab report s.tar.gz --format junit          JUnit XML from a saved session
  evlab report s.tar.gz --html report.html      one page to open in a browser (self-contained)
  evlab replay s.tar.gz --headless              re-judge a saved session from its events
  evlab grade --client 'python3 my_client.py {host} {port} {source}' --headless
                                                grade a client of your own, 3 attempts each
  evlab grade my-grade.toml --attempts 5 --headless --report grade.md
  evlab campaign clients.toml --headless --report board.md
                                                grade several clients, ranked in a leaderboard
  evlab campaign clients.toml --ray auto --headless   the same on a Ray cluster of evlab nodes
  evlab doctor [--json]                         what this machine can observe, and the fixes
  (every command that runs or lists scenarios takes --task ID|FOLDER; `evlab tasks` lists them)

exit status of run: 0 every scenario judged as declared (the instrument works; not "every
client did right"), 1 a scenario was missed, 3 evidence missing or the run cut short,
2 usage error, 130 interrupted. exit status of grade: 0 every valid attempt succeeded, 1 an
attempt failed, 3 a scenario had no valid attempt.
"""


def _argument_type(check: Callable[[str], object]) -> Callable[[str], object]:
    """An argparse type of a request's check (sessions/spec/request.py): its words, as the
    library's are."""
    def parse(text: str) -> object:
        try:
            return check(text)
        except Refused as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return parse


SPEED, SECONDS = _argument_type(req.SPEED), _argument_type(req.SECONDS)
_positive_int = _argument_type(req.positive_int)


class _Parser(argparse.ArgumentParser):
    """argparse with evlab's one-line usage errors (exit status 2, no usage dump)."""

    def error(self, message: str):
        self.exit(2, f"evlab: {self.line(message)}\n")

    def line(self, message: str) -> str:
        return f"{self.prog.removeprefix('evlab ')}: {message}" if self.prog != "evlab" \
            else message


def parser_class(refuse: Callable[[str], NoReturn]) -> type[argparse.ArgumentParser]:
    """The parser, its one-line usage errors handed to refuse (the library's: raised)."""
    class Refusing(_Parser):
        def error(self, message: str) -> NoReturn:
            refuse(self.line(message))
    return Refusing


def build_parser(cls: type[argparse.ArgumentParser] = _Parser) -> argparse.ArgumentParser:
    p = cls(prog="evlab", epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Execution-evidence lab: judge what a client "
                                "did from the kernel, the wire, the task's servers and a verifier.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("tasks", help="list the built-in tasks: id, summary, clauses")
    _task_argument(sub.add_parser("list", help="list the built-in scenarios"))
    _run_parser(sub)
    rp = sub.add_parser("report", help="render a saved session's report")
    rp.add_argument("archive", type=Path)
    rp.add_argument("--format", choices=("md", "json", "junit", "html"), default=None,
                    help="what to print (or write to --output): md (the default unless --html "
                    "is given), json, junit or html")
    rp.add_argument("--output", "-o", type=Path, help="write here instead of stdout")
    _html_argument(rp)
    rl = sub.add_parser("replay", help="replay a saved session")
    rl.add_argument("archive", type=Path)
    rl.add_argument("--headless", action="store_true", help="re-judge and print, no dashboard")
    rl.add_argument("--speed", type=SPEED, default=None,
                    help="1.0 = as recorded; default: as fast as possible")
    _task_argument(rl, "(a task folder whose own predicates re-judge its clauses: an archive "
                   "keeps the contract, never code)")
    g = sub.add_parser("grade", help="grade any client: attempts, lifecycle gates, risks",
                       description="Run a client of your own through its task's grade "
                       "scenarios (`evlab list --task ID`), N attempts each.")
    _task_argument(g, "(default: the grade file's [grade] task, else the default task)")
    g.add_argument("spec", nargs="?", type=Path, metavar="GRADE.toml",
                   help="a grade file ([client] command, env, timeout_s; [grade] attempts)")
    g.add_argument("--client", metavar="COMMAND",
                   help="the client's command line with the task's placeholders (`evlab tasks`)")
    g.add_argument("--attempts", type=int, metavar="N", help="attempts per scenario (default 3)")
    g.add_argument("--scenario", action="append", metavar="ID",
                   help="grade scenario(s) to run (default: all; see `evlab list`)")
    g.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="add to the client's environment")
    g.add_argument("--timeout", type=SECONDS, metavar="S",
                   help="kill an invocation after S seconds (default 20)")
    _attempt_arguments(g, f"ambient noise during every attempt: {','.join(NOISE_KINDS)} "
                          "(default with --noise: all)")
    _jobs_argument(g)
    _campaign_parser(sub)
    _doctor_parser(sub)
    return p


def _run_parser(sub) -> None:
    r = sub.add_parser("run", help="run scenarios and judge them")
    _task_argument(r)
    r.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                   help="scenario ids or .toml files (default with --all: every built-in one)")
    r.add_argument("--all", action="store_true",
                   help="the task's seeded scenarios (the instrument's own check)")
    r.add_argument("--suite", choices=SUITE_NAMES, help="a built-in suite of the task: seeded, "
                   "faults or grade")
    r.add_argument("--headless", action="store_true", help="no dashboard; progress lines only")
    r.add_argument("--collector", choices=KINDS, default="auto")
    r.add_argument("--packets", choices=PACKETS, default="on")
    r.add_argument("--noise", nargs="?", const=",".join(NOISE_KINDS), default="",
                   metavar="KINDS", help="ambient noise during every scenario: "
                   f"{','.join(NOISE_KINDS)} (default with --noise: all)")
    r.add_argument("--json", type=Path, metavar="PATH", help="write the JSON document here")
    r.add_argument("--archive", type=Path, metavar="PATH", help="write the session archive here")
    _verifier_arguments(r)
    _html_argument(r)
    _jobs_argument(r)
    _boundary_arguments(r)


def _task_argument(parser, default: str = f"(default: {DEFAULT_TASK})") -> None:
    parser.add_argument("--task", metavar="ID|FOLDER",
                        help=f"the task: a built-in one's id (evlab tasks) or a task folder "
                        f"{default}")


def _verifier_arguments(parser) -> None:
    """Files a harness's verifier reads (sessions/output/harbor.py)."""
    parser.add_argument("--reward", type=Path, metavar="PATH",
                        help="write Harbor's reward.json here: the headline reward, Pass@1, "
                        "pass^k, each clause's pass rate")
    parser.add_argument("--ctrf", type=Path, metavar="PATH",
                        help="write a CTRF JSON test report here: one test per clause and "
                        "attempt")


def _html_argument(parser) -> None:
    parser.add_argument("--html", type=Path, metavar="PATH",
                        help="write the HTML report here (one self-contained page)")


def _jobs_argument(parser) -> None:
    parser.add_argument("--jobs", type=_positive_int, metavar="N",
                        help="run N scenarios at once, each on a lab of its own (headless; "
                        "default: one per two CPUs)")


def _doctor_parser(sub) -> None:
    d = sub.add_parser("doctor", help="check what this machine can observe")
    d.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _campaign_parser(sub) -> None:
    c = sub.add_parser("campaign", help="grade several clients and rank them (a leaderboard)",
                       description="Grade every client of a campaign file on its scenarios, "
                       "here (one attempt at a time) or on a Ray cluster, and rank them. "
                       "File format: docs/campaign.md.")
    c.add_argument("file", type=Path, metavar="CAMPAIGN.toml")
    _task_argument(c, "(default: the campaign file's [campaign] task, else the default task)")
    c.add_argument("--dir", type=Path, metavar="DIR", help="the campaign's directory, kept "
                   "for --resume (default: ./evlab-campaign-NAME)")
    c.add_argument("--resume", action="store_true",
                   help="continue a stopped campaign in its directory; finished attempts "
                   "are not run again")
    c.add_argument("--ray", metavar="auto|ADDRESS",
                   help="run on a Ray cluster (each node offering the resource evlab=1)")
    c.add_argument("--jobs", type=_positive_int, metavar="N",
                   help="attempts at once on each node (here, or each Ray node), each on a lab "
                   "of its own (default: one per two CPUs of the node)")
    _attempt_arguments(c, "ambient noise during every attempt (the campaign file's "
                          "[campaign] noise otherwise)")


def _attempt_arguments(parser, noise_help: str) -> None:
    """What grade and campaign share: observers, outputs, noise, the client's boundary."""
    parser.add_argument("--headless", action="store_true",
                        help="no dashboard; progress lines only")
    parser.add_argument("--collector", choices=KINDS, default="auto")
    parser.add_argument("--packets", choices=PACKETS, default="on")
    parser.add_argument("--json", type=Path, metavar="PATH", help="write the JSON document here")
    parser.add_argument("--archive", type=Path, metavar="PATH", help="write the archive here")
    parser.add_argument("--report", type=Path, metavar="PATH",
                        help="write the Markdown report here")
    _html_argument(parser)
    _verifier_arguments(parser)
    parser.add_argument("--noise", nargs="?", const=",".join(NOISE_KINDS), default="",
                        metavar="KINDS", help=noise_help)
    _boundary_arguments(parser)


def _boundary_arguments(parser) -> None:
    b = parser.add_argument_group("the client's boundary (its cgroup and sandbox)")
    b.add_argument("--deny-egress", action="store_true",
                   help="refuse (EPERM) every destination but the endpoint; still judged")
    b.add_argument("--no-sandbox", action="store_true",
                   help="run the client unconfined, as evlab's user (recorded and shown)")
    d = SandboxLimits()
    for key, flag, unit, field, scale in LIMITS:
        b.add_argument(flag, type=_positive_int, dest=key, metavar=unit.upper(),
                       help=f"sandbox limit (default {getattr(d, field) // scale} {unit})")


def request_of(args: argparse.Namespace) -> Request:
    """What bare `evlab`, `run`, `grade`, `campaign` or `replay` asks for: the parsed flags
    handed to the request's builders, which check them as they check evlab.grade/run/campaign's
    keyword arguments."""
    if args.command is None:
        return req.RunRequest()   # the dashboard on the default task's seeded suite
    if args.command == "replay":
        return req.replay_request(args.archive, speed=args.speed, task=args.task)
    options = {"collector": args.collector, "packets": args.packets, "noise": args.noise,
               "sandbox": not args.no_sandbox, "deny_egress": args.deny_egress,
               **{key: getattr(args, key) for key, *_ in LIMITS},
               **{key: getattr(args, key) for key in req.FILE_KEYS if hasattr(args, key)}}
    if args.command == "run":
        return req.run_request(args.scenarios, everything=args.all, suite=args.suite,
                               task=args.task, jobs=args.jobs, **options)
    if args.command == "grade":
        return req.grade_request(args.client, spec=args.spec, task=args.task,
                                 attempts=args.attempts, scenarios=args.scenario or (),
                                 env=args.env, timeout=args.timeout, jobs=args.jobs, **options)
    return req.campaign_request(args.file, task=args.task, dir=args.dir, resume=args.resume,
                                ray=args.ray, jobs=args.jobs, **options)
