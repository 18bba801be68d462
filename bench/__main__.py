"""`make bench` (or `.venv/bin/python -m bench`, as root after `make setup`): evlab measured.

What is measured, each figure the median of repeated runs, each ratio of medians from this run:

1. Observer overhead (bench/overhead.py): wall time and the client's CPU time (os.wait4
   rusage) of two clients, untraced; under evlab's BCC collector (compiled before timing,
   launched, pumped at 10 Hz and finished as the runner does); under `strace -f -c -o
   /dev/null` (strace's own CPU reported apart through bench/rusage_wrap.c); and under a
   bpftrace script counting read(2) exits and bytes for the client's comm (timed only after
   bpftrace printed that it attached). Two diagnostics: `evlab-idle`, the collector loaded and
   the client not tracked; `bpf-floor`, bpftrace programs on raw_syscalls enter and exit that
   return at once (what any tracer on those tracepoints costs). Clients: the fixture's
   hash-storm second invocation (128 MiB hashed) and bench/readloop.c (1,000,000 reads of
   16 bytes).
2. Exactness under load (bench/exactness.py): evlab's read count and bytes for every timed
   readloop run against the known truth (the loader's reads measured with zero reads).
3. Suite time and 4. memory (bench/suite.py): `evlab run --all --headless` traced and with
   `--collector none`; peak summed RSS of the evlab process tree sampled every 50 ms. The BCC
   collector's one-off costs (compile, close with and without uprobes) are timed apart
   (bench/collector_cost.py) to explain the traced suite's fixed cost.
5. Dashboard cost (bench/tmux_run.py, bench/flood.py): the TUI's own CPU per wall second in
   tmux during the live suite and after it; key latency under 50,000 synthetic events/s.
6. Grading cost (bench/grade.py): the grade scenarios run plain and as `evlab grade` attempts
   (isolation, cleanup, durability, restore, gates), and a default 3-attempt grade of the
   Python client.
6b. A task's target (bench/target_writes.py): 64 MiB written to a tmpfs of its own in 4 KiB
   pieces, by write(2) and by io_uring, untraced and under the collector with it as the target:
   wall and CPU ratios, and every traced run's target_write_bytes exact, 0 events lost.
7. Cgroup socket hooks (bench/hooks.py): what the connect, UDP sendmsg and egress-packet hooks
   evlab attaches to a client's cgroup add per TCP connect, per UDP datagram and per packet
   (bench/sockloop.c on loopback, in a fresh cgroup, hooks attached or not, the collector
   loaded throughout); the egress totals of every hooked run checked against the truth.
8. Campaigns (bench/campaign.py): `evlab campaign` of 2 clients x the 4 grade scenarios x 2
   attempts, here and with --ray on Ray's test cluster on this machine (a head and two evlab
   worker raylets, started once, its start timed apart), against plain `evlab grade` of the
   same clients (16 attempts too): wall times, attempts a minute, ray / local; each attempt's
   own time from the run's archive (campaign: dispatch to judged; plain grade: set-up to
   judged; start-up excluded), the engine's added time per attempt beyond a plain grade
   attempt and their ratio; and whether every local and ray run judged every attempt alike.
9. Attempts at once (bench/jobs.py): `evlab run --all` and `evlab grade` of the C baseline and
   of the Python client (4 grade scenarios x 2 attempts) with --jobs 1 and --jobs 2, side by
   side in each of 20 repetitions: whether --jobs 2 judged every clause, gate and outcome as
   --jobs 1 did, wall times, attempts a minute and their ratio, the default --jobs here.
10. Other runtimes (bench/runtimes.py): honest backup clients in Java 17, Go, Rust (rustc
   alone), Perl and Bash, written from fixture/backup/protocol.md (bench/runtimes/), each
   installed from Debian when missing, built, and graded by a default `evlab grade` (3
   attempts x the 4 grade scenarios): whether every attempt passed every clause and gate, and
   the evidence of any failure. A runtime that cannot be installed or built is skipped with
   the reason.
11. The HTML report (bench/html_shots.py): a grade's page and the recorded campaign's in
   Debian's chromium at 1280 and 390 pixels wide, screenshots in bench/shots/ for review; no
   console error, every verdict the page carries equal to the JSON document's.
12. Floods (bench/client_floods.py): one grade attempt of a client flooding evlab's view per
   kind of flood (CHECKs, one-byte segments, kernel events, claims, connections): the evlab
   tree's peak memory and the wall time against their bounds, and the attempt's outcome.
13. CPU budget under load (bench/cpu_budget.py): honest C, Python and Node.js clients graded
   beside a CPU hog on every core, 50 attempts each: cpu-budget false alarms (goal 0).
13b. What a program started costs (bench/process_starts.py): a Bash client's 400 cp and mv on
   the mirror task, graded quiet and beside a CPU hog on every core, side by side: the cgroup
   CPU of one fork + exec of a small tool, its loaded / quiet ratio, against cpu-budget's
   allowance per program started.
14. A soak (bench/soak.py): every task's real tools and honest clients (curl, wget, rsync, cp,
   backup's reference and other-runtime clients, the tests' fetch and mirror clients) graded
   over their grade scenarios quiet, then beside a CPU hog per core and another lab running the
   seeded suite in a loop: how many verdicts (every clause and gate of every attempt) differ.
14b. The fuzzers at full breadth (bench/fuzz.py): tests/test_receiver_fuzz.py's and
   tests/test_archive_fuzz.py's wrong-type hypothesis fuzzers, which `make test` runs on the
   same 200 and 30 examples every time, run 3 times with 1,000 new random examples each:
   whether every run passed (a failure keeps its report and its
   @reproduce_failure blob), and each run's wall time (about 20 s a run here).
15. The test suite (bench/make_test.py): `make test` once, set-up done: its wall time and
   whether it passed.

Writes bench/results.json (raw samples and medians) and bench/results.md (the table, also
printed). Progress goes to stderr. About 20-23 minutes on a 2-core machine: about 9 of them
the jobs section (120 evlab runs), 3 make test, most of the rest strace doing readloop's
1,000,000 reads (40-105 s a run here, depending on CPU placement), and about 75 s of
campaigns, about 1 of the other runtimes (plus any apt-get install), about 1 of the receiver
fuzz. Options: --only
overhead,suite,dashboard,grade,throughput,target,hooks,campaign,jobs,runtimes,html,floods,
cpu,starts,soak,fuzz,tests runs some
sections (for development).
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

from bench import (
    campaign,
    client_floods,
    collector_cost,
    cpu_budget,
    exactness,
    flood,
    fuzz,
    grade,
    hooks,
    html_shots,
    jobs,
    make_test,
    overhead,
    process_starts,
    report,
    runtimes,
    soak,
    suite,
    target_writes,
    throughput,
    tmux_run,
    workloads,
)
from bench.measure import median, say

HERE = Path(__file__).resolve().parent
SECTIONS = ("overhead", "suite", "dashboard", "grade", "throughput", "target", "hooks",
            "campaign",
            "jobs", "runtimes", "html", "floods", "cpu", "starts", "soak",
            "fuzz", "tests")
HASH_STORM_REPEATS = {"untraced": 10, "evlab": 10, "strace": 5, "bpftrace": 10,
                      "evlab-idle": 5, "bpf-floor": 5}
READLOOP_REPEATS = {"untraced": 3, "evlab": 3, "strace": 1, "bpftrace": 3,
                    "evlab-idle": 2, "bpf-floor": 2}
ROUNDS = 3
SUITE_REPEATS = 4
GRADE_REPEATS = 3
THROUGHPUT_REPEATS = 3
COST_REPEATS = 2
TMUX_REPEATS = 3
HOOKS_ROUNDS = 9
CAMPAIGN_REPEATS = 3
JOBS_REPEATS = jobs.REPEATS
NOTES = [
    "Rounds: every condition's block runs once per round, in an order rotated each round; "
    "observers are set up before and torn down after their block, so none is loaded while "
    "another condition is timed.",
    "Wall time: from just before the client's fork to its reaped exit. Client CPU: user + "
    "system from os.wait4 (BPF programs on a tracepoint run in the client's context and are "
    "charged to it).",
    "evlab: open_collector('bcc', functions=(hash_file, send_payload, busy_wait)) compiled "
    "once per block outside the timing; collector.launch(), a thread polling snapshot() and "
    "poll_events() every 100 ms as the runner does, os.wait4, collector.finish().",
    "strace: `strace -f -c -o /dev/null bench-rusage-wrap FILE CLIENT...`; the wrapper writes "
    "the client's own rusage, strace's own CPU is the rest of strace's wait4 rusage (the "
    "wrapper's ~1 ms included). Its wall time includes strace's start-up (a few ms).",
    "bpftrace: one bpftrace per block, `tracepoint:raw_syscalls:sys_exit /comm == CLIENT && "
    "args->id == 0/` counting calls and summing positive returns per pid; started, then runs "
    "are timed only once it printed 'attached' (start-up excluded), stopped with SIGINT after "
    "the block. Filtered by comm (the pid is not known before the fork).",
    "Memory: psutil every 50 ms, RSS of the evlab process plus all descendants summed (a page "
    "shared by several processes counts in each, so this is an upper bound on real use).",
    "Dashboard CPU: psutil cpu_times of the evlab TUI process only (children excluded), from "
    "its start until the screen shows every scenario detected; the lab runs in that process, "
    "so the headless evlab process's own CPU over the same suite is given beside it.",
    "Cgroup hooks: bench/sockloop.c, every run in a fresh ClientCgroup (join_argv), to "
    f"127.0.0.1: {hooks.WORKLOADS['udp']:,} sendto() of 16 bytes on an unconnected UDP socket "
    "(per datagram: the sendmsg4 hook and the egress hook on its packet); "
    f"{hooks.WORKLOADS['udp-connected']:,} send() on a connected one (the egress hook alone: "
    f"per packet); {hooks.WORKLOADS['connect']:,} TCP socket + connect + close with SO_LINGER 0 "
    "(per connect: the connect4 hook and the egress hook on SYN, ACK, RST). Datagrams go to a "
    "bound UDP socket of the bench that is never read (a closed port would add an ICMP reply per "
    "datagram), connects to a listener a thread accepts and closes. Conditions: cgroup-only; "
    "hooks (watch_cgroup(..., allowed=[the destination], deny=False) before the launch, "
    "unwatch_cgroup after); hooks-deny (deny=True, the destination allowed). One BccCollector, "
    "compiled before timing, stays loaded through all three (the client untracked), so only the "
    f"hooks differ. In each of {HOOKS_ROUNDS} rounds every workload runs once per condition, "
    "back to back, the order rotated per round. Added per op = (median hooked - median "
    "cgroup-only) / N, of wall (fork to reaped exit), of the client's own clock around its loop, "
    "and of client CPU (os.wait4; loopback delivery runs in the sender's context, so the "
    "receiving side is in it, alike in every condition). Hooks' BPF run time: the kernel's BPF "
    "stats of this process's cgroup programs (on for this section only: evlab leaves them "
    "off, they cost every BPF program run on the machine ~30 ns).",
]


def machine() -> dict:
    model = next((line.split(":", 1)[1].strip()
                  for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    info = {"cpu": model, "cpus": os.cpu_count(), "kernel": platform.release(),
            "python": platform.python_version()}
    info["summary"] = (f"{info['cpus']} x {model}, Linux {info['kernel']}, "
                       f"Python {info['python']}")
    return info


def provenance() -> dict:
    """The commit measured and whether the working tree differed from it (read-only git)."""
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=HERE.parent, capture_output=True,
                                  text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            return ""
    return {"commit": git("rev-parse", "--short", "HEAD") or "unknown",
            "modified_files": len(git("status", "--porcelain", "--untracked-files=no")
                                  .splitlines())}


def run_overhead(results: dict) -> None:
    results["overhead"], results["exactness"] = {}, {}
    for setup, repeats, check in ((workloads.hash_storm, HASH_STORM_REPEATS,
                                   exactness.check_hash_storm),
                                  (workloads.readloop, READLOOP_REPEATS,
                                   exactness.check_readloop)):
        with setup() as workload:
            result = overhead.measure(workload, ROUNDS, repeats)
        syscalls = median(r["syscalls"] for r in result["conditions"]["evlab"]["runs"])
        result["analysis"] = overhead.analysis(result, int(syscalls))
        results["overhead"][workload.name] = result
        results["exactness"][workload.name] = check(result)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"comma-separated sections: {', '.join(SECTIONS)}")
    args = parser.parse_args(argv)
    only = [s for s in args.only.split(",") if s]
    if unknown := set(only) - set(SECTIONS):
        parser.error(f"unknown section(s): {', '.join(sorted(unknown))}")
    if os.geteuid() != 0:
        print("bench: needs root (BCC, bpftrace, the traced suite); run `sudo make bench`",
              file=sys.stderr)
        return 2
    started = time.monotonic()
    results: dict = {"started": time.strftime("%Y-%m-%d %H:%M:%S %z"),
                     "command": "make bench" if args.only == ",".join(SECTIONS)
                     else f"python -m bench --only {args.only}",
                     "machine": machine(), "source": provenance(), "notes": NOTES}
    steps = {"overhead": [("overhead", run_overhead)],
             "suite": [("suite", lambda r: r.update(suite=suite.measure(SUITE_REPEATS))),
                       ("collector_cost", lambda r: r.update(
                           collector_cost=collector_cost.measure(COST_REPEATS)))],
             "dashboard": [("dashboard_tmux", lambda r: r.setdefault("dashboard", {}).update(
                               tmux=tmux_run.measure(TMUX_REPEATS))),
                           ("dashboard_flood", lambda r: r.setdefault("dashboard", {}).update(
                               flood=flood.measure()))],
             "grade": [("grade", lambda r: r.update(grade=grade.measure(GRADE_REPEATS)))],
             "throughput": [("throughput", lambda r: r.update(
                 throughput=throughput.measure(THROUGHPUT_REPEATS)))],
             "target": [("target", lambda r: r.update(target=target_writes.measure()))],
             "hooks": [("hooks", lambda r: r.update(hooks=hooks.measure(HOOKS_ROUNDS)))],
             "campaign": [("campaign", lambda r: r.update(
                 campaign=campaign.measure(CAMPAIGN_REPEATS)))],
             "jobs": [("jobs", lambda r: r.update(jobs=jobs.measure(JOBS_REPEATS)))],
             "runtimes": [("runtimes", lambda r: r.update(runtimes=runtimes.measure()))],
             "html": [("html", lambda r: r.update(html=html_shots.measure()))],
             "floods": [("floods", lambda r: r.update(floods=client_floods.measure()))],
             "cpu": [("cpu", lambda r: r.update(cpu=cpu_budget.measure()))],
             "starts": [("starts", lambda r: r.update(starts=process_starts.measure()))],
             "soak": [("soak", lambda r: r.update(soak=soak.measure()))],
             "fuzz": [("fuzz", lambda r: r.update(fuzz=fuzz.measure()))],
             "tests": [("tests", lambda r: r.update(tests=make_test.measure()))]}
    for section in only:
        for name, step in steps[section]:
            load = results.setdefault("load_average_1min", {})[name] = [os.getloadavg()[0]]
            try:
                step(results)
            except Exception as e:  # one broken section must not lose the others' figures
                say(f"{name} failed: {type(e).__name__}: {e}")
                results.setdefault("errors", {})[name] = f"{type(e).__name__}: {e}"
            load.append(os.getloadavg()[0])
            write(results, started)  # after every step: an interrupted bench keeps its figures
    table = report.markdown(results)
    (HERE / "results.md").write_text(table)
    print(table)
    say(f"done in {results['duration_s']:.0f} s: bench/results.json, bench/results.md")
    return 1 if results.get("errors") else 0


def write(results: dict, started: float) -> None:
    results["duration_s"] = time.monotonic() - started
    results["targets"] = report.targets(results)
    (HERE / "results.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
