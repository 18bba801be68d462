"""The `evlab` console script. It reads the command line first (the parser imports only names
and defaults), and a command that will open a lab with the BCC collector here starts compiling
it at once: the compile (~0.3 s, in libbcc without the GIL, in a thread of its own working
directory) runs beside the imports of the rest of evlab (~0.3 s) and the session's set-up."""

import os
import signal
import sys


def compiles(args) -> bool:
    """Whether this command will compile the collector in this process."""
    if os.geteuid() != 0 or args.command not in (None, "run", "grade", "campaign"):
        return False
    if getattr(args, "ray", None) or getattr(args, "collector", "auto") in ("none", "strace"):
        return False   # a Ray campaign's labs are on the nodes; no BPF asked for
    if getattr(args, "headless", False) and args.command != "campaign":
        from sessions.lab.cpus import default_jobs
        jobs = args.jobs if args.jobs is not None else default_jobs()
        if jobs > 1:
            return False   # each lab is a process of its own (sessions/lab/schedule.py)
    return True


def main() -> int:
    from probes.interrupts import interrupt_once
    from sessions.cli.parser import build_parser
    ahead = False
    try:
        # SIGTERM and SIGHUP during start-up end evlab as Ctrl-C does (a session installs its
        # own handlers once it has something to tear down): "interrupted", status 130
        for sig in (signal.SIGTERM, signal.SIGHUP):   # Ctrl-C's is Python's own
            signal.signal(sig, interrupt_once)
        args = build_parser().parse_args(sys.argv[1:])
        ahead = compiles(args)
        if ahead:
            from probes.bcc.load import compile_ahead
            compile_ahead()
        from sessions.cli.dispatch import run
        code = run(args)
    except SystemExit as e:   # the parser's usage errors, --help
        if not (e.code is None or isinstance(e.code, int)):
            raise
        code = e.code or 0
    except KeyboardInterrupt:
        print("evlab: interrupted", file=sys.stderr)
        code = 130
    except BrokenPipeError:
        # the reader went away (`evlab list | head`): nothing more to say, and Python must
        # not fail flushing stdout at exit either
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 128 + signal.SIGPIPE
    if ahead:
        from probes.bcc.load import compiling_unused
        if compiling_unused():
            # No lab took it (a usage error, an interrupt): exit now rather than wait out a
            # compile nobody will load; nothing else is pending, the kernel frees its maps.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    if ahead and code == 130:
        # Interrupted with the collector loaded: every output is written and every lab torn
        # down by now, so leave without the interpreter's finalization, where libbcc's objects
        # are freed after the modules they need (seen once: SIGSEGV after "partial results
        # written", under load) and could change the exit status the run already decided.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code
