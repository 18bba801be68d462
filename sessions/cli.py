"""evlab's headless command line. Errors are one clear line and a non-zero exit, never a
traceback for a user's mistake."""

import argparse
import sys

from probes import doctor

EPILOG = """examples:
  evlab doctor            what this machine can observe, and how to fix what it cannot
  evlab doctor --json     the same as JSON
"""


class UsageError(Exception):
    """A user's mistake: printed as one line, exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="evlab", epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Execution-evidence lab: judge what a client "
                                "did from the kernel, the wire, the receiver and a verifier.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    d = sub.add_parser("doctor", help="check what this machine can observe")
    d.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        if args.command == "doctor":
            return doctor.main(["--json"] if args.json else [])
        parser.print_help()
        return 0
    except UsageError as e:
        print(f"evlab: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
