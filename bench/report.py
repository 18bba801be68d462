"""results.json -> the Markdown table: targets first, then each section's figures."""

from bench import (
    campaign,
    client_floods,
    cpu_budget,
    fuzz,
    hooks,
    jobs,
    make_test,
    process_starts,
    runtimes,
    soak,
)
from bench.measure import median
from bench.overhead import CONDITIONS


def targets(results: dict) -> list[dict]:
    """Every target with its measured value; `met` is True, False, None (not measured) or
    "report" (a figure reported without a goal)."""
    out = []

    def add(name, value, goal, met, unit=""):
        out.append({"target": name, "value": value, "goal": goal, "unit": unit,
                    "met": None if value is None else met})

    for workload, limit in (("hash-storm", 1.10), ("readloop", 1.5)):
        ratios = results.get("overhead", {}).get(workload, {}).get("ratios", {})
        for what in ("wall", "cpu"):
            value = ratios.get(f"evlab/untraced {what}")
            add(f"{workload}: evlab/untraced {what} time", value, f"<= {limit:.2f}x",
                value is not None and value <= limit, "x")
    added = results.get("overhead", {}).get("readloop", {}).get("added_us_per_syscall", {})
    evlab, floor, idle = (added.get(c) for c in ("evlab", "bpf-floor", "evlab-idle"))
    add("readloop: evlab added µs/syscall ≤ bpf-floor's", evlab,
        "<= bpf-floor" + (f" ({floor:.3f} µs)" if floor is not None else ""),
        evlab is not None and floor is not None and evlab <= floor, "µs3")
    add("readloop: evlab-idle added µs/syscall ≤ 0.10", idle, "<= 0.10 µs",
        idle is not None and idle <= 0.10, "µs3")
    exact = results.get("exactness", {}).get("readloop")
    add("readloop: reads, bytes exact, 0 lost events", exact and exact["passed"], "exact",
        bool(exact and exact["passed"]))
    suite = results.get("suite", {})
    traced = suite.get("traced", {}).get("median_wall_s")
    add("suite traced (BCC + packets) wall time, BPF compile included", traced, "<= 3 s",
        traced is not None and traced <= 3, "s")
    ratio = suite.get("ratio_traced_none_wall")
    add("suite traced / --collector none", ratio, "<= 3x", ratio is not None and ratio <= 3, "x")
    rss = suite.get("traced", {}).get("median_peak_tree_rss_mb")
    add("peak RSS of the evlab process tree", rss, "< 300 MB", rss is not None and rss < 300,
        "MB")
    flow = results.get("throughput", {})
    cost = flow.get("harness_ms_per_attempt")
    add("grade: harness cost per attempt (attempt wall minus its client invocations), median",
        cost, "<= 150 ms", cost is not None and cost <= 150, "ms")
    add("grade: attempts per minute, one at a time", flow.get("attempts_per_min"), "report",
        "report", "/min")
    target = results.get("target", {})
    for how in ("write", "uring"):
        for what in ("wall", "cpu"):
            add(f"target writes ({how}, 64 MiB in 4 KiB): evlab / untraced {what} time",
                target.get(how, {}).get(f"ratio_{what}"), "report", "report", "x")
    add("target_write_bytes exact in every traced run, 0 events lost", target.get("exact"),
        "exact", bool(target.get("exact")))
    for task, what in (("fetch", "nginx"), ("reload", "nginx operated, under load"),
                       ("rotate", "nginx operated, under load")):
        graded = flow.get(task, {})
        add(f"{task} grade ({what}): harness cost per attempt, median",
            graded.get("harness_ms_per_attempt"), "report", "report", "ms")
        add(f"{task} / backup: harness cost per attempt", graded.get("ratio_to_backup"),
            "report", "report", "x")
        same = graded.get("every_attempt_passed") and graded.get("verdicts_identical")
        add(f"{task} grade: every attempt passed, verdicts identical across runs", same,
            "identical", bool(same))
    starts = flow.get("endpoint_start_ms", {})
    add("endpoint start-up to `listening`: nginx (fetch), median", starts.get("fetch"), "report",
        "report", "ms")
    add("endpoint start-up to `listening`: receiver (backup), median", starts.get("backup"),
        "report", "report", "ms")
    add("nginx / receiver start-up", flow.get("endpoint_start_ratio_nginx_receiver"), "report",
        "report", "x")
    add("lab network per attempt: namespace made and removed, median", flow.get("lab_network_ms"),
        "report", "report", "ms")
    add("lab network: one call run inside it (an attempt makes about six), median",
        flow.get("lab_network_run_ms"), "report", "report", "ms")
    add("lab network's share of the harness cost per attempt (made, removed, six calls)",
        flow.get("lab_network_share"), "report", "report", "x")
    same = flow.get("verdicts_identical")
    add("grade: every clause, gate and outcome identical across the repeated grades", same,
        "identical", bool(same))
    pss = flow.get("peak_tree_pss_mb")   # summed RSS counts shared pages once per process
    add("grade 4 x 3: peak memory of the evlab tree (summed PSS)", pss, "<= 250 MB",
        pss is not None and pss <= 250, "MB")
    add("grade 4 x 3: the same as summed RSS", flow.get("peak_tree_rss_mb"), "report", "report",
        "MB")
    screen = results.get("dashboard", {}).get("flood", {}).get("max_screen_s")
    add("key-to-screen at 50k events/s, max (no target given: the tests' 200 ms bound)",
        screen, "< 200 ms", screen is not None and screen < 0.2, "s")
    hooked = results.get("hooks", {}).get("workloads", {})

    def added(workload):
        return hooked.get(workload, {}).get("per_op", {}).get("hooks", {}).get("wall_us")

    value = added("udp")
    add("cgroup hooks: added wall time per UDP datagram (sendmsg + egress hooks)", value,
        "<= 1 µs", value is not None and value <= 1, "µs")
    add("cgroup hooks: added wall time per packet (egress hook alone, connected UDP)",
        added("udp-connected"), "report", "report", "µs")
    add("cgroup hooks: added wall time per TCP connect (connect hook + its packets)",
        added("connect"), "report", "report", "µs")
    checks = [w["exactness"] for w in hooked.values()]
    exact = all(c["passed"] for c in checks) if checks else None
    add("cgroup hooks: egress calls, packets, bytes exact (every hooked run)", exact, "exact",
        bool(exact))
    graded = runtimes.passing(results.get("runtimes", {}))
    add("honest clients in Java, Go, Rust, Perl, Bash: runtimes whose every attempt passed "
        "every clause and gate", graded, "all graded",
        graded is not None and graded.split(" of ")[0] == graded.split(" of ")[1])
    floods = results.get("floods", {}).get("floods")
    held = (f"{sum(client_floods.held(r) for r in floods.values())} of {len(floods)}"
            if floods else None)
    add("floods: within 400 MB and timeouts + 10 s, judged valid and failed", held,
        "every flood", held is not None and held.split(" of ")[0] == held.split(" of ")[1])
    alarms = cpu_budget.false_alarms(results.get("cpu"))
    add("cpu-budget false alarms: honest C, Python, Node beside a hog on every core", alarms,
        "0", alarms is not None and alarms.startswith("0 of"))
    misses = cpu_budget.false_alarms(results.get("cpu"), wasteful=True)
    add("cpu-budget misses: waste over 16 threads or in 5 ms pieces, beside the same hogs",
        misses, "0", misses is not None and misses.startswith("0 of"))
    starts = results.get("starts") or {}
    worst = starts.get("loaded_max_ms_per_program")
    add("cgroup CPU of a program started (fork + exec of cp or mv), worst beside a hog on "
        "every core, against cpu-budget's allowance per program (pace 1)",
        None if worst is None else worst / 1000, f"<= {starts.get('allowance_ms', 2):g} ms",
        worst is not None and worst <= starts.get("allowance_ms", 2), "s")
    add("cgroup CPU of a program started: beside a hog / quiet", starts.get("loaded/quiet"),
        "report", "report", "x")
    differ = soak.differing(results.get("soak"))
    add("soak: verdicts that differ beside a CPU hog and another lab from the quiet run", differ,
        "0", differ is not None and differ.startswith("0 of"))
    pages = results.get("html", {}).get("pages")
    shown = (all(not p["problems"] and all(v for k, v in p.items() if k.startswith(
        "verdicts_equal")) for p in pages.values()) if pages else None)
    add("HTML report in chromium: no console error, every verdict equal to the JSON's", shown,
        "yes", bool(shown))
    return (out + _campaign_targets(results.get("campaign", {}))
            + jobs.targets(results.get("jobs", {}))
            + fuzz.targets(results.get("fuzz", {}))
            + make_test.targets(results.get("tests", {})))


def _campaign_targets(c: dict) -> list[dict]:
    out: list[dict] = []

    def add(name, value, unit, goal="report", met="report"):
        out.append({"target": name, "value": value, "goal": goal, "unit": unit,
                    "met": None if value is None else met})

    for label, where in (("local", "here"), ("ray", "on the two-worker Ray test cluster")):
        r = c.get(label, {})
        add(f"campaign (2 clients x 4 grade scenarios x 2 attempts) {where}: wall time",
            r.get("median_wall_s"), "s")
        add(f"campaign {where}: attempts per minute", r.get("attempts_per_min"), "/min")
        add(f"campaign {where}: attempt time (dispatch to judged, in-run, median)",
            r.get("median_attempt_ms"), "ms")
        add(f"campaign {where}: engine's added time per attempt (median attempt − plain "
            "`evlab grade` attempt's)", r.get("added_ms_per_attempt"), "+ms")
        add(f"campaign {where}: attempt time / a plain grade attempt's (medians)",
            r.get("ratio_attempt_to_grade"), "x")
    add("plain `evlab grade` attempt time (set-up to judged, median)",
        c.get("grade", {}).get("median_attempt_ms"), "ms")
    add("campaign: ray / local wall time", c.get("ratio_ray_local_wall"), "x")
    add("Ray test cluster start (head + 2 evlab nodes), outside the timed runs",
        c.get("cluster", {}).get("start_s"), "s")
    same = c.get("verdicts_identical")
    add("campaign: verdicts identical local vs ray (every attempt of every run)", same, "",
        "identical", bool(same))
    return out


def markdown(results: dict) -> str:
    lines = [f"# evlab bench — {results['started']}", "",
             f"`{results['command']}` on {results['machine']['summary']}; "
             f"{results['duration_s']:.0f} s in all. Commit {results['source']['commit']}"
             f" (tracked files modified in the working tree: "
             f"{results['source']['modified_files']}). Every figure is a median of the runs "
             "counted; every ratio is of medians measured in this same run.", ""]
    if results.get("load_average_1min"):
        lines += ["Load average (1 min) at the start → end of each section, other work on the "
                  "machine included: " + ", ".join(
                      f"{name} {a:.1f} → {b:.1f}" for name, (a, b, *_)
                      in results["load_average_1min"].items()) + ".", ""]
    for name, error in results.get("errors", {}).items():
        lines += [f"**{name} failed**: `{error}`", ""]
    lines += ["## Targets", "", "| target | measured | goal | status |", "|---|---|---|---|"]
    for t in results["targets"]:
        status = {True: "met", False: "**MISSED**", None: "not measured",
                  "report": "reported"}[t["met"]]
        lines.append(f"| {t['target']} | {_value(t['value'], t['unit'])} | {t['goal']} "
                     f"| {status} |")
    for name, result in results.get("overhead", {}).items():
        lines += _overhead(name, result)
    lines += _exactness(results.get("exactness", {}))
    lines += _suite(results.get("suite"), results.get("collector_cost"))
    lines += _dashboard(results.get("dashboard"), results.get("suite"))
    lines += _grade(results.get("grade"))
    lines += _hooks(results.get("hooks"))
    lines += campaign.report_lines(results.get("campaign"), _value)
    lines += jobs.report_lines(results.get("jobs"), _value)
    lines += runtimes.report_lines(results.get("runtimes"), _value)
    lines += client_floods.report_lines(results.get("floods"), _value)
    lines += cpu_budget.report_lines(results.get("cpu"), _value)
    lines += process_starts.report_lines(results.get("starts"), _value)
    lines += soak.report_lines(results.get("soak"), _value)
    lines += ["", "## Notes", ""] + [f"- {n}" for n in results.get("notes", [])]
    return "\n".join(lines) + "\n"


def _overhead(name: str, result: dict) -> list[str]:
    c, r = result["conditions"], result["ratios"]
    lines = ["", f"## Observer overhead: {name}", "", f"`{' '.join(result['argv'])}`", "",
             "| condition | wall | client CPU | wall / untraced | CPU / untraced "
             "| tracer's own CPU | runs |", "|---|---|---|---|---|---|---|"]
    for cond in CONDITIONS:
        m = c[cond]
        lines.append(
            f"| {cond} | {_value(m['median_wall_s'], 's')} | {_value(m['median_cpu_s'], 's')} "
            f"| {_value(r.get(f'{cond}/untraced wall'), 'x') if cond != 'untraced' else '1'} "
            f"| {_value(r.get(f'{cond}/untraced cpu'), 'x') if cond != 'untraced' else '1'} "
            f"| {_value(m['median_tracer_cpu_s'], 's')} | {len(m['runs'])} |")
    lines += ["", "evlab-idle: evlab's collector loaded, this client not tracked (what every "
              "other process pays while evlab runs). bpf-floor: two do-nothing programs on "
              "raw_syscalls enter and exit (the floor for any tracer of those tracepoints).",
              "", f"strace/evlab: wall {_value(r['strace/evlab wall'], 'x')}, CPU "
              f"{_value(r['strace/evlab cpu'], 'x')} · bpftrace/evlab: wall "
              f"{_value(r['bpftrace/evlab wall'], 'x')}, CPU "
              f"{_value(r['bpftrace/evlab cpu'], 'x')}"]
    if result.get("analysis"):
        lines += ["", result["analysis"]]
    setup = {cond: median(b["setup_s"] for b in result.get("blocks", [])
                          if b["condition"] == cond) for cond in ("evlab", "bpftrace")}
    if all(v is not None for v in setup.values()):
        lines += ["", f"Set-up, outside every timed run (median per block): evlab's BPF compile "
                  f"and load {_value(setup['evlab'], 's')}, bpftrace until it printed "
                  f"'attached' {_value(setup['bpftrace'], 's')}."]
    return lines


def _exactness(exact: dict) -> list[str]:
    lines = ["", "## Exactness under load (evlab, every timed run)", "",
             "| client | counter | truth | observed | status |", "|---|---|---|---|---|"]
    rl = exact.get("readloop")
    if rl:
        status = "pass" if rl["passed"] else "**FAIL**"
        obs = rl["observed"]
        for key, label, truth in (
                ("reads", f"read(2) calls (minus the loader's {rl['loader']['reads']})",
                 rl["truth"]["reads"]),
                ("bytes", f"bytes read, all fds (minus the loader's {rl['loader']['bytes']:,})",
                 rl["truth"]["bytes"]),
                ("source_bytes", "bytes read from the file's descriptor", rl["truth"]["bytes"]),
                ("lost_events", "lost events", 0)):
            lines.append(f"| readloop | {label} | {truth:,} | {_observed(obs, key)} "
                         f"| {status} ({len(obs) - rl['runs_wrong']}/{len(obs)} runs) |")
    hs = exact.get("hash-storm")
    if hs:
        status = "pass" if hs["passed"] else "**FAIL**"
        for key in ("hash_file", "source_read_bytes", "lost_events"):
            truth = hs["truth"].get(key, 0)
            lines.append(f"| hash-storm | {key} | {truth:,} | {_observed(hs['observed'], key)} "
                         f"| {status} |")
    return lines


def _suite(suite: dict | None, cost: dict | None) -> list[str]:
    if not suite:
        return []
    count = suite["traced"]["runs"][-1].get("scenarios")
    lines = ["", f"## Suite time and memory (`evlab run --all --headless`, {count} scenarios)",
             "",
             "| collector | wall | first scenario done | last scenario done | after it (exit) "
             "| peak tree RSS (median / max) | evlab's own RSS at the peak "
             "| evlab process's own CPU | exits | runs |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for label, title in (("traced", "auto (BCC), packets on"), ("none", "--collector none")):
        s = suite[label]
        exits = ", ".join(str(e) for e in sorted({r["exit"] for r in s["runs"]}))
        lines.append(f"| {title} | {_value(s['median_wall_s'], 's')} "
                     f"| {_value(s['median_first_scenario_done_s'], 's')} "
                     f"| {_value(s['median_last_scenario_done_s'], 's')} "
                     f"| {_value(s['median_after_last_scenario_s'], 's')} "
                     f"| {s['median_peak_tree_rss_mb']:.0f} / {s['max_peak_tree_rss_mb']:.0f} MB "
                     f"| {_value(s['median_evlab_rss_at_peak_mb'], 'MB')} "
                     f"| {_value(s['median_evlab_own_cpu_s'], 's')} | {exits} "
                     f"| {len(s['runs'])} |")
    lines += ["", f"traced / none: {_value(suite['ratio_traced_none_wall'], 'x')}. Last line "
              f"of a traced run: `{suite['traced']['runs'][-1]['summary']}` (exit 3 with "
              "`--collector none` is expected: kernel clauses are inconclusive)."]
    if cost:
        w, wo = cost["with_uprobes"], cost["without"]
        lines += ["", f"BCC collector fixed costs (median of {len(w['runs'])}): compile + load "
                  f"{_value(w['median_open_s'], 's')}; close after uprobes on the eight "
                  f"fixture clients ({w['uprobes']:.0f} uprobes) {_value(w['median_close_s'], 's')}"
                  f", close with none {_value(wo['median_close_s'], 's')}: "
                  f"{_value(cost['per_uprobe_detach_s'], 's')} per uprobe detached."]
        if kept := cost.get("kept"):
            lines += ["", f"Compiled once per machine (probes/bcc/cache.py), open + close in "
                      f"CPU-s, side by side (median of {len(kept['runs'])}): the first session "
                      f"on a machine {_value(kept['median_first_cpu_s'], 's')}, a later one "
                      f"{_value(kept['median_later_cpu_s'], 's')}: "
                      f"{_value(kept['ratio_later_first'], 'x')}."]
    return lines


def _grade(grade: dict | None) -> list[str]:
    if not grade:
        return []
    lines = ["", "## Grading cost (`evlab grade`)", "",
             "| run | scenarios | wall | peak tree RSS | exits | runs |",
             "|---|---|---|---|---|---|"]
    for label, title in (("plain", f"`{grade['command_plain']}`"),
                         ("graded", f"`{grade['command_graded']}`"),
                         ("python_default", f"`{grade['python_default']['command']}`")):
        g = grade[label]
        lines.append(f"| {title} | {g['scenarios']} | {_value(g['median_wall_s'], 's')} "
                     f"| {_value(g['median_peak_tree_rss_mb'], 'MB')} "
                     f"| {', '.join(map(str, g['exits']))} | {len(g['runs'])} |")
    lines += ["", f"graded / plain: {_value(grade['ratio_graded_plain_wall'], 'x')} — the cost "
              "of isolation, the cleanup check, the receiver kill + restart and the GET per "
              f"attempt. Last line of the Python grade: `{grade['python_default']['summary']}`"]
    return lines


def _dashboard(dash: dict | None, suite: dict | None) -> list[str]:
    if not dash:
        return []
    lines = ["", "## Dashboard cost", "", "| measure | value |", "|---|---|"]
    tui = dash.get("tmux")
    if tui:
        lines += [f"| TUI process CPU during the live suite (TUI + in-process lab) | "
                  f"{tui['median_live_cpu_per_wall_s']:.3f} CPU s per wall s "
                  f"({_value(tui['median_live_cpu_s'], 's')} over "
                  f"{_value(tui['median_live_wall_s'], 's')}) |",
                  f"| TUI process CPU showing the finished run (5 Hz redraw) | "
                  f"{tui['median_idle_cpu_per_wall_s']:.3f} CPU s per wall s |"]
        if suite:
            s = suite["traced"]
            cpu, wall = s["median_evlab_own_cpu_until_last_scenario_s"], \
                s["median_last_scenario_done_s"]
            lines.append(f"| headless evlab process over the same span (the lab alone) | "
                         f"{cpu / wall:.3f} CPU s per wall s ({_value(cpu, 's')} over "
                         f"{_value(wall, 's')}) |")
            lines.append(f"| dashboard's share (TUI − headless CPU) | "
                         f"{_value(tui['median_live_cpu_s'] - cpu, 's')} CPU per suite run |")
    flood = dash.get("flood")
    if flood:
        calm = flood["without_stream"]
        lines += [f"| synthetic stream reached | {flood['events_per_s']:,.0f} events/s "
                  f"(app + source thread: {flood['process_cpu_per_wall_s']:.2f} CPU s per wall s;"
                  f" {calm['process_cpu_per_wall_s']:.2f} with the source idling at 1 kHz) |"]
        for label, key in (("key handled", "handled"),
                           ("key-to-screen (first frame composed after)", "screen")):
            lines.append(f"| {label}, median / max of {flood['keys']}: at 50k events/s; "
                         f"without the stream | {_value(flood[f'median_{key}_s'], 's')} / "
                         f"{_value(flood[f'max_{key}_s'], 's')}; "
                         f"{_value(calm[f'median_{key}_s'], 's')} / "
                         f"{_value(calm[f'max_{key}_s'], 's')} |")
        lines.append(f"| the dashboard's redraw (refresh_view), median / max: at 50k events/s; "
                     f"without the stream | {_value(flood['median_redraw_s'], 's')} / "
                     f"{_value(flood['max_redraw_s'], 's')}; "
                     f"{_value(calm['median_redraw_s'], 's')} / "
                     f"{_value(calm['max_redraw_s'], 's')} |")
    return lines


def _hooks(h: dict | None) -> list[str]:
    if not h:
        return []
    w = h["workloads"]
    lines = ["", "## Cgroup socket hooks (connect, UDP sendmsg, egress packets)", "",
             f"`{h['argv']}`: udp = N sendto() on one unconnected socket, udp-connected = N "
             "send() on a connected one, connect = N TCP socket + connect + close (RST); the "
             "client in a fresh cgroup every run, evlab's collector loaded throughout. "
             "\"Added\" is (median − median of cgroup-only) / N; \"paired\" the median over "
             "rounds of (run − the same round's cgroup-only run) / N, which cancels drift "
             "between rounds; \"loop\" is the client's own clock around its N calls (start-up "
             "and exit excluded).", "",
             "| workload | condition | wall | loop | client CPU | wall / cgroup-only "
             "| CPU / cgroup-only | added wall per op | added CPU per op "
             "| added per op, paired: wall / CPU | hooks' BPF run time per op | packets per op "
             "| runs |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for workload, d in w.items():
        for cond in hooks.CONDITIONS:
            m, po = d["conditions"][cond], d["per_op"].get(cond, {})
            base = cond == "cgroup-only"
            paired = (f"{_value(po.get('paired_wall_us'), '+µs')} / "
                      f"{_value(po.get('paired_cpu_us'), '+µs')}")
            lines.append(
                f"| {workload} x{d['n']:,} | {cond} | {_value(m['median_wall_s'], 's')} "
                f"| {_value(m['median_loop_s'], 's')} | {_value(m['median_cpu_s'], 's')} "
                f"| {'1' if base else _value(po.get('wall_ratio'), 'x')} "
                f"| {'1' if base else _value(po.get('cpu_ratio'), 'x')} "
                f"| {'—' if base else _value(po.get('wall_us'), '+µs')} "
                f"| {'—' if base else _value(po.get('cpu_us'), '+µs')} "
                f"| {'—' if base else paired} "
                f"| {'—' if base else _value(po.get('bpf_us'), 'µs')} "
                f"| {'—' if base else _value(po.get('packets_per_op'), '2f')} "
                f"| {len(m['runs'])} |")
    parts = []
    for workload, label in (("connect", "per TCP connect"), ("udp", "per UDP datagram"),
                            ("udp-connected", "per packet")):
        po, base = w[workload]["per_op"]["hooks"], w[workload]["base_per_op_us"]
        parts.append(f"{label} {_value(po['wall_us'], '+µs')} wall, "
                     f"{_value(po['cpu_us'], '+µs')} CPU (paired: "
                     f"{_value(po.get('paired_wall_us'), '+µs')}, "
                     f"{_value(po.get('paired_cpu_us'), '+µs')}; BPF run time "
                     f"{_value(po['bpf_us'], 'µs')}; cgroup-only: "
                     f"{_value(base['wall'], 'µs')} wall, {_value(base['cpu'], 'µs')} CPU)")
    alone = h["per_sendmsg_hook_us"]
    lines += ["", "Hooks (deny off) vs cgroup-only: " + "; ".join(parts) + ". The sendmsg hook "
              f"alone (per datagram − per packet): {_value(alone['wall_us'], '+µs')} wall, "
              f"{_value(alone['cpu_us'], '+µs')} CPU (paired: "
              f"{_value(alone.get('paired_wall_us'), '+µs')}, "
              f"{_value(alone.get('paired_cpu_us'), '+µs')}), {_value(alone['bpf_us'], 'µs')} "
              "of BPF run time. hooks-deny adds one allow-list lookup per packet. Listen-queue "
              "overflows during the connect runs (host-wide; each a SYN dropped and the client "
              f"stalled 1 s): {w['connect'].get('listen_overflows', '—')}."]
    lines += ["", "| workload | counter (per hooked run) | truth | observed | status |",
              "|---|---|---|---|---|"]
    for workload, d in w.items():
        rows = [r for c in hooks.CONDITIONS[1:] for r in d["conditions"][c]["runs"]]
        ex = d["exactness"]
        status = (f"{'pass' if ex['passed'] else '**FAIL**'} "
                  f"({ex['runs_checked'] - ex['runs_wrong']}/{ex['runs_checked']} runs)")
        for key, truth in d["truth"].items():
            lines.append(f"| {workload} | {key.replace('_', ' ')} | "
                         f"{'—' if truth is None else f'{truth:,}'} | "
                         f"{_observed([r['observed'] for r in rows], key)} | "
                         f"{'reported' if truth is None else status} |")
        for key in ("refused", "dropped", "other_destinations", "egress_lost", "lost_events"):
            lines.append(f"| {workload} | {key.replace('_', ' ')} | 0 "
                         f"| {_observed([r['observed'] for r in rows], key)} | {status} |")
        lines.append(f"| {workload} | hook programs' runs (kernel BPF stats) | socket-address "
                     f"= calls, egress = packets | {_observed(rows, 'sock_addr_run_cnt')}; "
                     f"{_observed(rows, 'skb_run_cnt')} | {status} |")
        for problem in ex["problems"]:
            lines.append(f"| {workload} | problem | | {problem} | **FAIL** |")
    return lines


def _observed(rows: list[dict], key: str) -> str:
    values = sorted({r[key] for r in rows}, key=lambda v: (v is None, v))
    return ", ".join("—" if v is None else f"{v:,}" for v in values)


# unit -> how a figure in it is written (seconds choose their own scale, below)
FORMATS = {"x": "{:.2f}x", "MB": "{:.0f} MB", "µs3": "{:.3f} µs", "ms": "{:.0f} ms",
           "+ms": "{:+.0f} ms", "/min": "{:.0f} a minute", "2f": "{:.2f}", "µs": "{:.2f} µs",
           "+µs": "{:+.2f} µs"}


def _value(value, unit: str = "") -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if unit == "s":
        if value < 0.01:
            return f"{value * 1000:.1f} ms"
        return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"
    return FORMATS[unit].format(value) if unit in FORMATS else str(value)
