"""The command line read once and run: a headless command here, or the dashboard, a front end
that registers itself under the entry-point group `evlab.front_ends` (tui/ does, as
`dashboard`), so nothing on the headless path imports it. A session's command and the
dashboard take its request (parser.py `request_of`), not the parsed arguments."""

import argparse
import sys
from collections.abc import Callable
from importlib.metadata import entry_points

from probes.doctor import preflight
from sessions.cli.api import USER_ERRORS
from sessions.cli.campaign import cmd_campaign
from sessions.cli.commands import cmd_list, cmd_replay, cmd_report, cmd_session, cmd_tasks
from sessions.cli.parser import build_parser, request_of
from sessions.spec.request import Request, UsageError

READING: dict[str, Callable[[argparse.Namespace], int]] = {
    "tasks": cmd_tasks, "list": cmd_list, "report": cmd_report}
SESSIONS: dict[str, Callable] = {"run": cmd_session, "grade": cmd_session,
                                 "replay": cmd_replay, "campaign": cmd_campaign}


def main(argv: list[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


def wants_dashboard(args: argparse.Namespace) -> bool:
    return args.command is None or (args.command in ("run", "grade", "campaign", "replay")
                                    and not args.headless)


def run(args: argparse.Namespace) -> int:
    """Run parsed arguments: the dashboard, or a headless command."""
    try:
        if args.command == "doctor":
            return preflight.main(["--json"] if args.json else [])
        if getattr(args, "jobs", None) and args.jobs > 1 and not args.headless:
            raise UsageError("--jobs runs headless only (add --headless): the dashboard runs "
                             "one scenario at a time")
        if args.command in READING:
            return READING[args.command](args)
        request = request_of(args)
        if wants_dashboard(args):
            return front_end("dashboard")(request)
        return SESSIONS[args.command](request)
    except USER_ERRORS as e:
        print(f"evlab: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("evlab: interrupted", file=sys.stderr)
        return 130


def front_end(name: str) -> Callable[[Request], int]:
    """A front end's `run(request) -> exit status`, as its package registered it."""
    found = entry_points(group="evlab.front_ends", name=name)
    if not found:
        raise UsageError(f"the {name} is not installed here (make setup installs it); add "
                         "--headless to run without it")
    return next(iter(found)).load()
