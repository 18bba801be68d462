"""The `evlab` console script's first step: a command that will open a lab with the BCC
collector starts compiling it now, so the compile (~0.7 s, in libbcc without the GIL) runs
beside the imports of the rest of evlab (~0.3 s) and the session's set-up. Then tui.main."""

import os
import sys

_SESSIONS = (None, "run", "grade", "campaign")   # the commands that open a lab here


def compiles(argv: list[str]) -> bool:
    """Whether this command line will compile the collector in this process, guessed before
    the parser is imported (tui.main reads it properly): a wrong guess costs time only."""
    if os.geteuid() != 0 or (argv[0] if argv else None) not in _SESSIONS:
        return False
    for i, arg in enumerate(argv):
        if arg in ("-h", "--help") or arg.startswith("--ray"):   # a Ray campaign: on its nodes
            return False
        chosen = arg.partition("=")[2] if arg.startswith("--collector=") else (
            argv[i + 1] if arg == "--collector" and i + 1 < len(argv) else None)
        if chosen in ("none", "strace"):
            return False
    return True


def main() -> int:
    argv = sys.argv[1:]
    if not compiles(argv):
        from tui.main import main as evlab
        return evlab(argv)
    from probes.bcc_load import compile_ahead, compiling_unused
    compile_ahead()
    from tui.main import main as evlab
    try:
        code = evlab(argv)
    except SystemExit as e:   # the parser's usage errors
        if not (e.code is None or isinstance(e.code, int)):
            raise
        code = e.code or 0
    if compiling_unused():
        # No lab was opened (a usage error, say): exit now rather than wait out a compile whose
        # program nobody will load; nothing else is pending, and the kernel frees its maps.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
