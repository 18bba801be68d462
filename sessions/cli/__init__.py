"""evlab's headless command line. A user's mistake is one clear line and exit status 2, never a
traceback.

Exit status of `run`: 0 the instrument judged every scenario as declared (all detected) — not
"every backup was correct"; 1 a scenario was missed; 3 nothing missed but evidence was missing
(inconclusive) or the session was cut short; 2 usage error; 130 interrupted.
"""


import sys

from fixture.harness import ServerStartError
from probes.collectors import CollectorUnavailable
from probes.doctor import preflight as doctor
from sessions.cli.campaign import cmd_campaign
from sessions.cli.commands import (
    chosen_scenarios,
    cmd_grade,
    cmd_list,
    cmd_replay,
    cmd_report,
    cmd_run,
    grade_spec,
    grade_started,
)
from sessions.cli.headless import options_of
from sessions.cli.parser import UsageError, build_parser
from sessions.lab.session import RunError
from sessions.output.archive import ArchiveError
from sessions.spec.client_spec import ClientSpecError
from sessions.spec.scenario import ScenarioError

__all__ = ["UsageError", "build_parser", "chosen_scenarios", "grade_spec", "grade_started",
           "main", "options_of"]


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "doctor":
            return doctor.main(["--json"] if args.json else [])
        if args.command == "list":
            return cmd_list()
        if args.command == "run":
            return cmd_run(args)
        if args.command == "grade":
            return cmd_grade(args)
        if args.command == "report":
            return cmd_report(args)
        if args.command == "replay":
            return cmd_replay(args)
        if args.command == "campaign":
            return cmd_campaign(args)
        parser.print_help()
        return 0
    except (UsageError, ScenarioError, ArchiveError, RunError, CollectorUnavailable,
            ServerStartError, ClientSpecError) as e:
        print(f"evlab: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("evlab: interrupted", file=sys.stderr)
        return 130
