"""Observer overhead: each workload under every observer, interleaved in rounds.

A round runs every condition's block once, in an order rotated from round to round (so no
condition always runs first or last); a block sets its observer up (untimed), runs the client
`repeats[condition]` times, and tears the observer down, so no observer is loaded while
another condition is measured. Ratios are of medians taken in this same run.

The evlab block also runs the client once more, untimed, with the kernel's BPF statistics on
(they cost every BPF program run, so no timed run has them): the programs' own run time.
"""

import time

from bench.measure import check_exit, median, ratio, say
from bench.observers import observer
from bench.workloads import Workload

CONDITIONS = ("untraced", "evlab", "strace", "bpftrace", "evlab-idle", "bpf-floor")


def measure(workload: Workload, rounds: int, repeats: dict[str, int]) -> dict:
    runs: dict[str, list] = {c: [] for c in CONDITIONS}
    loader: list[dict] = []
    measured: list[dict] = []   # evlab's untimed runs with BPF statistics
    bpftrace_counts: dict[int, dict] = {}
    blocks: list[dict] = []  # each block's untimed set-up and tear-down
    for r in range(rounds):
        order = CONDITIONS[r % len(CONDITIONS):] + CONDITIONS[:r % len(CONDITIONS)]
        for condition in order:
            say(f"{workload.name}: round {r + 1}/{rounds}, {condition} "
                 f"x{repeats[condition]}")
            started = time.perf_counter()
            with observer(condition, workload.comm) as obs:
                setup = time.perf_counter() - started
                for _ in range(repeats[condition]):
                    run = obs.run(workload.argv, workload.source, workload.timeout_s)
                    runs[condition].append(check_exit(run, f"{workload.name} ({condition})"))
                if condition == "evlab" and workload.loader_argv:
                    run = obs.run(workload.loader_argv, workload.source, workload.timeout_s)
                    loader.append(check_exit(run, f"{workload.name} with no work").as_dict())
                if condition == "evlab":
                    run = obs.run(workload.argv, workload.source, workload.timeout_s,
                                  measure_bpf=True)
                    measured.append(check_exit(run, f"{workload.name} (BPF stats)").as_dict())
                ended = time.perf_counter()
            blocks.append({"round": r + 1, "condition": condition, "setup_s": setup,
                           "teardown_s": time.perf_counter() - ended})
            bpftrace_counts.update(getattr(obs, "counts", {}))
    for run in runs["bpftrace"]:
        run.extra.update(bpftrace_counts.get(run.pid, {}))
    return {**summarize(workload, runs, loader), "blocks": blocks, "bpf_measured": measured}


def summarize(workload: Workload, runs: dict[str, list], loader: list[dict]) -> dict:
    conditions = {}
    for condition, samples in runs.items():
        conditions[condition] = {
            "runs": [s.as_dict() for s in samples],
            "median_wall_s": median(s.wall_s for s in samples),
            "median_cpu_s": median(s.cpu_s for s in samples),
            "median_tracer_cpu_s": median(s.extra.get("tracer_cpu_s") for s in samples),
        }
    ratios = {}
    pairs = [(c, "untraced") for c in CONDITIONS[1:]] + [("strace", "evlab"),
                                                         ("bpftrace", "evlab")]
    for a, b in pairs:
        for what in ("wall", "cpu"):
            ratios[f"{a}/{b} {what}"] = ratio(conditions[a][f"median_{what}_s"],
                                              conditions[b][f"median_{what}_s"])
    syscalls = median(s.extra.get("syscalls") for s in runs["evlab"])
    base = conditions["untraced"]["median_wall_s"]
    added = {c: (conditions[c]["median_wall_s"] - base) / syscalls * 1e6
             for c in CONDITIONS[1:]
             if syscalls and base is not None and conditions[c]["median_wall_s"] is not None}
    return {"argv": workload.argv, "truth": workload.truth, "conditions": conditions,
            "ratios": ratios, "loader_runs": loader, "syscalls": syscalls,
            "added_us_per_syscall": added}



def analysis(result: dict, syscalls: int) -> str:
    """Where evlab's added time goes, per syscall of the client, from this run's medians."""
    added = result.get("added_us_per_syscall", {})
    parts = [f"Where the time goes, per client syscall (~{syscalls:,} in a run), added wall "
             "time vs untraced: "
             + ", ".join(f"{cond} {us:+.3f} µs" for cond, us in added.items()) + "."]
    measured = result.get("bpf_measured", [])
    bpf = median(r.get("bpf_run_s") for r in measured)
    if bpf is not None and syscalls:
        parts.append(f"evlab's BPF programs' own run time (kernel BPF statistics, all its "
                     f"programs, all processes, in {len(measured)} untimed run(s) with the "
                     f"statistics on): {bpf / syscalls * 1e6:.3f} µs per client syscall.")
    return " ".join(parts)
