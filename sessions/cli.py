"""evlab's headless command line. A user's mistake is one clear line and exit status 2, never a
traceback.

Exit status of `run`: 0 the instrument judged every scenario as declared (all detected) — not
"every backup was correct"; 1 a scenario was missed; 3 nothing missed but evidence was missing
(inconclusive) or the session was cut short; 2 usage error; 130 interrupted.
"""

import argparse
import json
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from fixture.harness import ServerStartError
from probes import doctor
from probes.collectors import KINDS, CollectorUnavailable
from probes.interrupts import raise_or_defer
from probes.owned_tmp import make_owned_dir
from probes.sandbox import SandboxLimits
from sessions.judging.grading import figure, grade_status, score_text
from sessions.judging.judge import VerdictEngine
from sessions.lab.runner import Options, RunError, run_session
from sessions.output import document, report
from sessions.output.archive import ArchiveError, ArchiveWriter, load_archive
from sessions.spec.client_spec import (
    ClientSpec,
    ClientSpecError,
    from_command,
    from_file,
    parse_env,
)
from sessions.spec.scenario import (
    GRADE_DIR,
    NOISE_KINDS,
    SUITES,
    ScenarioError,
    load_all,
    load_dir,
    select,
)
from sessions.stream.events import (
    Event,
    GradeStarted,
    ScenarioJudged,
    ScenarioStarted,
    StaleCleaned,
)
from sessions.stream.evidence import EvidenceBook
from sessions.stream.replay import replay
from sessions.stream.stream import EventStream

EPILOG = """examples:
  evlab list                                    the scenarios and what each must fail
  evlab run --all --headless                    run the eight seeded scenarios, no dashboard
  evlab run --suite faults --headless           the client under injected faults
  evlab run baseline retry --headless --json out.json --archive s.tar.gz
  evlab run my-client.toml --headless           a scenario file of your own
  evlab report s.tar.gz --format junit          JUnit XML from a saved session
  evlab replay s.tar.gz --headless              re-judge a saved session from its events
  evlab grade --client 'python3 my_client.py {host} {port} {source}' --headless
                                                grade a client of your own, 3 attempts each
  evlab grade my-grade.toml --attempts 5 --headless --report grade.md
  evlab doctor [--json]                         what this machine can observe, and the fixes

exit status of run: 0 every scenario judged as declared (the instrument works; not "every
backup was correct"), 1 a scenario was missed, 3 evidence missing or the run cut short,
2 usage error, 130 interrupted. exit status of grade: 0 every valid attempt succeeded, 1 an
attempt failed, 3 a scenario had no valid attempt.
"""


class UsageError(Exception):
    """A user's mistake: printed as one line, exit status 2."""


class _Interrupted(KeyboardInterrupt):
    pass


def _bounded_float(low: float, high: float, what: str):
    """An argparse type: a number in [low, high] (so a replay cannot take 10^300 times as
    long as the recording, nor a timeout outlast the machine)."""
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = float("nan")
        if not low <= value <= high:   # also rejects nan and ±inf
            raise argparse.ArgumentTypeError(f"expected {what} from {low:g} to {high:g}, "
                                             f"got {text!r}")
        return value
    return parse


SPEED = _bounded_float(0.01, 1000, "a speed")
SECONDS = _bounded_float(0.1, 600, "seconds")


class _Parser(argparse.ArgumentParser):
    """argparse with evlab's one-line usage errors (exit status 2, no usage dump)."""

    def error(self, message: str):
        self.exit(2, f"evlab: {self.prog.removeprefix('evlab ')}: {message}\n"
                     if self.prog != "evlab" else f"evlab: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="evlab", epilog=EPILOG,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Execution-evidence lab: judge what a client "
                                "did from the kernel, the wire, the receiver and a verifier.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("list", help="list the built-in scenarios")
    r = sub.add_parser("run", help="run scenarios and judge them")
    r.add_argument("scenarios", nargs="*", metavar="SCENARIO",
                   help="scenario ids or .toml files (default with --all: every built-in one)")
    r.add_argument("--all", action="store_true",
                   help="the eight seeded scenarios (the instrument's own check)")
    r.add_argument("--suite", choices=tuple(SUITES), help="a built-in suite: seeded or faults")
    r.add_argument("--headless", action="store_true", help="no dashboard; progress lines only")
    r.add_argument("--collector", choices=KINDS, default="auto")
    r.add_argument("--packets", choices=("on", "off", "required"), default="on")
    r.add_argument("--noise", nargs="?", const=",".join(NOISE_KINDS), default="",
                   metavar="KINDS", help="ambient noise during every scenario: "
                   f"{','.join(NOISE_KINDS)} (default with --noise: all)")
    r.add_argument("--json", type=Path, metavar="PATH", help="write the JSON document here")
    r.add_argument("--archive", type=Path, metavar="PATH", help="write the session archive here")
    _boundary_arguments(r)
    rp = sub.add_parser("report", help="render a saved session's report")
    rp.add_argument("archive", type=Path)
    rp.add_argument("--format", choices=("md", "json", "junit"), default="md")
    rp.add_argument("--output", "-o", type=Path, help="write here instead of stdout")
    rl = sub.add_parser("replay", help="replay a saved session")
    rl.add_argument("archive", type=Path)
    rl.add_argument("--headless", action="store_true", help="re-judge and print, no dashboard")
    rl.add_argument("--speed", type=SPEED, default=None,
                    help="1.0 = as recorded; default: as fast as possible")
    g = sub.add_parser("grade", help="grade any client: attempts, lifecycle gates, risks",
                       description="Run a client of your own through the grade scenarios "
                       "(normal, interrupted, mismatch, stale; each with an unchanged "
                       "re-run), N attempts each.")
    g.add_argument("spec", nargs="?", type=Path, metavar="GRADE.toml",
                   help="a grade file ([client] command, env, timeout_s; [grade] attempts)")
    g.add_argument("--client", metavar="COMMAND",
                   help="the client's command line with {host} {port} {source} [{decoy_port}]")
    g.add_argument("--attempts", type=int, metavar="N", help="attempts per scenario (default 3)")
    g.add_argument("--scenario", action="append", metavar="ID",
                   help="grade scenario(s) to run (default: all; see `evlab list`)")
    g.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                   help="add to the client's environment")
    g.add_argument("--timeout", type=SECONDS, metavar="S",
                   help="kill an invocation after S seconds (default 20)")
    g.add_argument("--headless", action="store_true", help="no dashboard; progress lines only")
    g.add_argument("--collector", choices=KINDS, default="auto")
    g.add_argument("--packets", choices=("on", "off", "required"), default="on")
    g.add_argument("--json", type=Path, metavar="PATH", help="write the JSON document here")
    g.add_argument("--archive", type=Path, metavar="PATH", help="write the session archive here")
    g.add_argument("--report", type=Path, metavar="PATH", help="write the Markdown report here")
    g.add_argument("--noise", nargs="?", const=",".join(NOISE_KINDS), default="",
                   metavar="KINDS", help="ambient noise during every attempt: "
                   f"{','.join(NOISE_KINDS)} (default with --noise: all)")
    _boundary_arguments(g)
    g.set_defaults(noise="")
    d = sub.add_parser("doctor", help="check what this machine can observe")
    d.add_argument("--json", action="store_true", help="print JSON instead of a table")
    return p


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
        parser.print_help()
        return 0
    except (UsageError, ScenarioError, ArchiveError, RunError, CollectorUnavailable,
            ServerStartError, ClientSpecError) as e:
        print(f"evlab: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("evlab: interrupted", file=sys.stderr)
        return 130


def cmd_list() -> int:
    for suite, directory in SUITES.items():
        print(f"{suite} suite (evlab run --suite {suite}):")
        for s in load_dir(directory):
            fails = ", ".join(s.expect_fail) or ("(attempt invalid)" if s.expect_invalid
                                                 else "nothing")
            print(f"  {s.id:<22} must fail: {fails:<32} {s.description}")
    return 0


def noise_kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(k for k in text.split(",") if k)
    unknown = set(kinds) - set(NOISE_KINDS)
    if unknown:
        raise UsageError(f"--noise: unknown kind(s) {', '.join(sorted(unknown))}; "
                         f"choose from {', '.join(NOISE_KINDS)}")
    return kinds


def chosen_scenarios(names: list[str], everything: bool, suite: str | None = None):
    if sum(map(bool, (names, everything, suite))) > 1:
        raise UsageError("give scenario names, --all or --suite, not several")
    if suite:
        return load_dir(SUITES[suite])
    if everything or not names:
        return load_dir()
    return select(names, load_all())


def _raise_interrupt(signum, frame):
    # Once: a second Ctrl-C or SIGTERM must not cut the teardown that the first one started.
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    raise_or_defer(_Interrupted())   # not inside BCC's callbacks, where it would be lost


class Progress:
    """One line per scenario on stderr as it is judged."""

    def __init__(self, total: int):
        self.total, self.done, self.started = total, 0, {}

    def __call__(self, event: Event) -> None:
        if isinstance(event, StaleCleaned):
            print(f"evlab: {event.detail}", file=sys.stderr, flush=True)
        elif isinstance(event, ScenarioStarted):
            self.started[event.scenario] = time.monotonic()
        elif isinstance(event, ScenarioJudged):
            self.done += 1
            took = time.monotonic() - self.started.get(event.scenario, time.monotonic())
            print(f"[{self.done}/{self.total}] {event.scenario:<18} {event.instrument_check:<12} "
                  f"{took:4.1f} s  {event.detail}", file=sys.stderr, flush=True)


def cmd_run(args) -> int:
    if not args.headless:
        raise UsageError("sessions.cli is headless only: add --headless (the dashboard is `evlab`)")
    scenarios = chosen_scenarios(args.scenarios, args.all, args.suite)
    doc = record_session(scenarios, args)
    if doc is None:
        return 130
    s = doc["summary"]
    invalid = f", {s['invalid']} invalid" if s["invalid"] else ""
    print(f"evlab: {s['detected']} detected, {s['missed']} missed, {s['inconclusive']} "
          f"inconclusive{invalid} of {s['scenarios']} (collector {doc['collector']}, packets "
          f"{doc['packets']})", file=sys.stderr)
    return document.exit_status(doc)


# flag, SandboxLimits field, unit, scale; and each field's key in a grade file's [sandbox]
LIMIT_FLAGS = (("--memory", "memory_bytes", "MiB", 1 << 20), ("--pids", "pids", "tasks", 1),
               ("--cpu-seconds", "cpu_s", "s", 1), ("--open-files", "open_files", "files", 1),
               ("--disk", "disk_bytes", "MiB", 1 << 20))
TOML_KEYS = {"memory_bytes": "memory_mib", "pids": "pids", "cpu_s": "cpu_seconds",
             "open_files": "open_files", "disk_bytes": "disk_mib"}


def _boundary_arguments(parser) -> None:
    b = parser.add_argument_group("the client's boundary (its cgroup and sandbox)")
    b.add_argument("--deny-egress", action="store_true",
                   help="refuse (EPERM) every destination but the receiver; still judged")
    b.add_argument("--no-sandbox", action="store_true",
                   help="run the client unconfined, as evlab's user (recorded and shown)")
    d = SandboxLimits()
    for flag, field, unit, scale in LIMIT_FLAGS:
        b.add_argument(flag, type=_positive_int, dest=f"limit_{field}", metavar=unit.upper(),
                       help=f"sandbox limit (default {getattr(d, field) // scale} {unit})")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if not 0 < value <= 1 << 40:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def options_of(args, grading: bool = False, from_file: dict | None = None) -> Options:
    """The runner's options from run's or grade's flags (a grade file's [sandbox] table fills
    what the flags leave out). A graded client is untrusted: grade refuses to run it
    unconfined unless --no-sandbox says so."""
    from_file, d = from_file or {}, SandboxLimits()
    limits = {}
    for _flag, field, _unit, scale in LIMIT_FLAGS:
        given = getattr(args, f"limit_{field}")
        if given is None:
            given = from_file.get(TOML_KEYS[field])
        limits[field] = given * scale if given is not None else getattr(d, field)
    sandbox = "off" if args.no_sandbox else "required" if grading else "auto"
    return Options(args.collector, args.packets, noise=noise_kinds(args.noise),
                   sandbox=sandbox, deny_egress=args.deny_egress or from_file.get(
                       "deny_egress", False), limits=SandboxLimits(**limits))


def record_session(scenarios, args, grade: GradeStarted | None = None,
                   sandbox: dict | None = None) -> dict | None:
    """Run scenarios headless, writing --json, --archive (and --report) whatever happens;
    the JSON document, or None when interrupted."""
    check_outputs(("--json", args.json), ("--report", getattr(args, "report", None)),
                  ("--archive", args.archive))
    staging = make_owned_dir("evlab-archive-")
    book, writer, events = EvidenceBook(), ArchiveWriter(staging), []
    stream = EventStream([VerdictEngine(), book, writer, events.append,
                          Progress(len(scenarios))])
    previous = {sig: signal.signal(sig, _raise_interrupt)
                for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    interrupted = False
    try:
        run_session(stream, scenarios, staging, options_of(args, grade is not None, sandbox),
                    grade)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        try:
            doc = document.build(book)
            if args.json:
                _deliver("--json", args.json,
                         lambda p: _write_atomic(p, json.dumps(doc, indent=2) + "\n"))
            if getattr(args, "report", None):
                _deliver("--report", args.report,
                         lambda p: _write_atomic(p, report.markdown(events)))
            if args.archive:
                path = _deliver("--archive", args.archive, writer.finish)
                print(f"evlab: archive written to {path}", file=sys.stderr)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    if interrupted:
        print("evlab: interrupted; partial results written", file=sys.stderr)
        return None
    return doc


def check_outputs(*outputs: tuple[str, Path | None]) -> None:
    """Before anything runs: every output can go where it is asked to (a regular file in a
    directory evlab may write), so a long run is never lost to a typo."""
    for flag, path in outputs:
        if path is None:
            continue
        if path.exists() and not path.is_file():
            raise UsageError(f"{flag} {path}: not a regular file (a directory or a device)")
        where = path.parent
        while not where.exists() and where != where.parent:
            where = where.parent
        try:
            tempfile.TemporaryFile(dir=where).close()
        except OSError as e:
            raise UsageError(f"{flag} {path}: cannot write in {where} ({e.strerror})") from None


def _deliver(flag: str, path: Path, write) -> Path:
    """Write an output; if that still fails at the end, keep it in the temp directory and say
    where, instead of losing the run's result."""
    try:
        write(path)
        return path
    except OSError as e:
        fd, kept = tempfile.mkstemp(prefix="evlab-kept-", suffix="".join(path.suffixes))
        os.close(fd)
        write(Path(kept))
        print(f"evlab: could not write {flag} {path} ({e.strerror or e}); kept at {kept}",
              file=sys.stderr)
        return Path(kept)


def _write_atomic(path: Path, text: str) -> None:
    """Whole or not at all: a reader (or a leftover of the client's) never sees a half file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.partial-write")
    try:
        tmp.write_text(text)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def grade_spec(args) -> ClientSpec:
    if (args.spec is None) == (args.client is None):
        raise UsageError("grade: give --client 'COMMAND {host} {port} {source}' or a grade "
                         ".toml file (exactly one)")
    env = parse_env(args.env)
    if args.spec is not None:
        overrides = {"attempts": args.attempts, "timeout_s": args.timeout,
                     "scenarios": tuple(args.scenario) if args.scenario else None}
        return from_file(args.spec, extra_env=env,
                         **{k: v for k, v in overrides.items() if v is not None})
    return from_command(args.client, env=env, timeout_s=args.timeout,
                        attempts=args.attempts if args.attempts is not None else 3,
                        scenarios=tuple(args.scenario or ()))


def cmd_grade(args) -> int:
    if not args.headless:
        raise UsageError("sessions.cli is headless only: add --headless (`evlab grade` without "
                         "it opens the dashboard)")
    spec = grade_spec(args)
    attempts = spec.attempt_scenarios(load_dir(GRADE_DIR))
    grade = grade_started(spec, attempts)
    doc = record_session(attempts, args, grade, spec.sandbox)
    if doc is None:
        return 130
    print(grade_summary_line(doc["grade"]), file=sys.stderr)
    return grade_exit(doc)


def grade_started(spec: ClientSpec, attempts) -> GradeStarted:
    return GradeStarted(time.monotonic_ns(), spec.command, str(spec.executable), spec.sha256,
                        spec.files, spec.env, spec.attempts,
                        tuple(dict.fromkeys(a.base for a in attempts)))


def grade_summary_line(grade: dict) -> str:
    o = grade["overall"]
    risks = sum(len(r["risk_findings"]) for s in grade["scenarios"].values() for r in s["runs"])
    return (f"evlab: grade of {grade['client']['executable']}: Pass@1 {figure(o['pass_at_1'])}, "
            f"pass^k {figure(o['pass_hat_k'])}, Best-of-N {figure(o['best_of_n'])}, "
            f"score {score_text(o)} "
            f"over {o['attempts'] - o['invalid']} valid attempts ({o['invalid']} invalid); "
            f"{risks} risk finding(s)")


def untrusted(archive: Path, work):
    """Judge an archive's events: well-typed (sessions/events.py checks every field) yet still
    untrusted. Anything they make fail is the archive's fault, said in one line."""
    try:
        return work()
    except (ArchiveError, UsageError):
        raise
    except Exception as e:   # noqa: BLE001 - turned into the archive's one-line error
        raise ArchiveError(f"{archive}: its events cannot be judged ({type(e).__name__}: "
                           f"{str(e)[:200]})") from None


def cmd_report(args) -> int:
    loaded = load_archive(args.archive)
    text = untrusted(args.archive, lambda: report.render(loaded.events, args.format))
    if args.output:
        check_outputs(("--output", args.output))
        _deliver("--output", args.output, lambda p: _write_atomic(p, text))
    else:
        sys.stdout.write(text)
    return 0


def cmd_replay(args) -> int:
    if not args.headless:
        raise UsageError("sessions.cli is headless only: add --headless (the dashboard is `evlab`)")
    loaded = load_archive(args.archive)
    book = EvidenceBook()

    def rejudge() -> dict:
        clients = loaded.manifest.get("clients")
        stream = EventStream([VerdictEngine(), book, Progress(
            len(clients) if isinstance(clients, dict) else 0)])
        replay(loaded.events, stream, speed=args.speed)
        return document.build(book)

    doc = untrusted(args.archive, rejudge)
    if loaded.partial:
        print("evlab: this archive is partial (the session was cut short)", file=sys.stderr)
    if doc["grade"] is not None:
        print(grade_summary_line(doc["grade"]), file=sys.stderr)
        return grade_exit(doc)
    return document.exit_status(doc)


def grade_exit(doc: dict) -> int:
    """grade_status, and 3 rather than 0 for a session cut short (attempts never judged)."""
    status = grade_status(doc["grade"]["overall"])
    return 3 if status == 0 and doc["partial"] else status
