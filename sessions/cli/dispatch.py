"""The command line read once and run: a headless command here, or the dashboard, a front end
that registers itself under the entry-point group `evlab.front_ends` (tui/ does, as
`dashboard`), so nothing on the headless path imports it. A session's command and the
dashboard take its request (parser.py `request_of`), not the parsed arguments.

A command's module is imported when it runs: `evlab report` or `replay` loads no lab, no
campaign engine and no BPF collector (~0.12 s of CPU less than all of them, at every call)."""

import argparse
import importlib
import sys
from collections.abc import Callable

from sessions.cli.parser import build_parser, request_of
from sessions.spec.request import Request, UsageError

# command -> (module, function): those that read take the parsed arguments, the others a request
READING = {"tasks": ("sessions.cli.commands", "cmd_tasks"),
           "list": ("sessions.cli.commands", "cmd_list"),
           "report": ("sessions.cli.commands", "cmd_report")}
SESSIONS = {"run": ("sessions.cli.headless", "cmd_session"),
            "grade": ("sessions.cli.headless", "cmd_session"),
            "replay": ("sessions.cli.commands", "cmd_replay"),
            "campaign": ("sessions.cli.campaign", "cmd_campaign")}


def _command(where: tuple[str, str]) -> Callable:
    module, name = where
    return getattr(importlib.import_module(module), name)


def main(argv: list[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


def wants_dashboard(args: argparse.Namespace) -> bool:
    return args.command is None or (args.command in ("run", "grade", "campaign", "replay")
                                    and not args.headless)


def run(args: argparse.Namespace) -> int:
    """Run parsed arguments: the dashboard, or a headless command."""
    try:
        if args.command == "doctor":
            from probes.doctor import preflight
            return preflight.main(["--json"] if args.json else [])
        if getattr(args, "jobs", None) and args.jobs > 1 and not args.headless:
            raise UsageError("--jobs runs headless only (add --headless): the dashboard runs "
                             "one scenario at a time")
        if args.command in READING:
            return _command(READING[args.command])(args)
        request = request_of(args)
        if wants_dashboard(args):
            return front_end("dashboard")(request)
        return _command(SESSIONS[args.command])(request)
    except KeyboardInterrupt:
        print("evlab: interrupted", file=sys.stderr)
        return 130
    except Exception as e:   # a user's mistake is one line; anything else is evlab's own
        from sessions.cli.api import USER_ERRORS
        if not isinstance(e, USER_ERRORS):
            raise
        print(f"evlab: {e}", file=sys.stderr)
        return 2


def front_end(name: str) -> Callable[[Request], int]:
    """A front end's `run(request) -> exit status`, as its package registered it."""
    from importlib.metadata import entry_points
    found = entry_points(group="evlab.front_ends", name=name)
    if not found:
        raise UsageError(f"the {name} is not installed here (make setup installs it); add "
                         "--headless to run without it")
    return next(iter(found)).load()
