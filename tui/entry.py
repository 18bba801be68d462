"""The `evlab` console script's first step: a command that will open a lab with the BCC
collector starts compiling it now, so the compile (~0.7 s, in libbcc without the GIL) runs
beside the imports of the rest of evlab (~0.3 s) and the session's set-up. Then tui.main."""

import os
import signal
import sys

_SESSIONS = (None, "run", "grade", "campaign")   # the commands that open a lab here


def compiles(argv: list[str]) -> bool:
    """Whether this command line will compile the collector in this process, guessed before
    the parser is imported (tui.main reads it properly): a wrong guess costs time only."""
    if os.geteuid() != 0 or (argv[0] if argv else None) not in _SESSIONS:
        return False
    if any(arg in ("-h", "--help") or arg.startswith("--ray") for arg in argv):
        return False   # help, or a Ray campaign (its labs are on the nodes)
    if _value(argv, "--collector") in ("none", "strace"):
        return False
    if "--headless" in argv and _jobs(argv) > 1:
        return False   # each lab is a process of its own (sessions/lab/schedule.py)
    return True


def _value(argv: list[str], flag: str) -> str | None:
    for i, arg in enumerate(argv):
        if arg.startswith(flag + "="):
            return arg.partition("=")[2]
        if arg == flag and i + 1 < len(argv):
            return argv[i + 1]
    return None


def _jobs(argv: list[str]) -> int:
    from sessions.lab.cpus import default_jobs
    jobs = _value(argv, "--jobs")
    return int(jobs) if jobs is not None and jobs.isdigit() else default_jobs()


def main() -> int:
    from probes.interrupts import interrupt_once
    argv = sys.argv[1:]
    ahead = False
    try:
        # SIGTERM and SIGHUP during start-up end evlab as Ctrl-C does (a session installs its
        # own handlers once it has something to tear down): "interrupted", status 130
        for sig in (signal.SIGTERM, signal.SIGHUP):   # Ctrl-C's is Python's own
            signal.signal(sig, interrupt_once)
        ahead = compiles(argv)
        if ahead:
            from probes.bcc.load import compile_ahead
            compile_ahead()
        from tui.main import main as evlab
        code = evlab(argv)
    except SystemExit as e:   # the parser's usage errors
        if not (e.code is None or isinstance(e.code, int)):
            raise
        code = e.code or 0
    except KeyboardInterrupt:
        print("evlab: interrupted", file=sys.stderr)
        code = 130
    if ahead:
        from probes.bcc.load import compiling_unused
        if compiling_unused():
            # No lab took it (a usage error, an interrupt): exit now rather than wait out a
            # compile nobody will load; nothing else is pending, the kernel frees its maps.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return code
