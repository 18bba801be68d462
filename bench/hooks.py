"""The cost of evlab's cgroup socket hooks, per connect, per datagram and per packet.

evlab attaches five programs to each client's own cgroup (probes/bcc/collector.bpf.c, end):
connect4/6 and UDP sendmsg4/6 socket-address hooks, and a cgroup_skb egress hook that sees every
packet.
bench/sockloop.c drives them on loopback, one workload per hook path:

  udp            N sendto() of 16 bytes on one unconnected socket: per datagram, the sendmsg4
                 hook and the egress hook on its one packet.
  udp-connected  one connect(), then N send() of 16 bytes: the egress hook alone, per packet
                 (a connected socket's sends do not pass the sendmsg hook).
  connect        N x socket() + SO_LINGER 0 + connect() + close() of TCP: the connect4 hook and
                 the egress hook on each connection's packets (SYN, ACK, RST).

The datagrams go to a bound UDP socket of the bench that is never read (a 4 KiB receive
buffer: the kernel drops them there), not to a closed port: a closed loopback port would
answer every datagram with an ICMP port-unreachable (loopback is exempt from the ICMP rate
limit), doubling the kernel's work per datagram. The connects go to a listening socket of the
bench (backlog 4096) that `sockloop accept`, outside the client's cgroup, accepts and closes.
Listen-queue overflows (a dropped SYN stalls the client a second) are counted for every run.

Every run puts the client in a fresh ClientCgroup (`cg.join_argv()`), under three conditions:
cgroup-only (no hooks attached), hooks (watch_cgroup(..., deny=False) before the launch,
unwatch_cgroup after) and hooks-deny (deny=True, the destination allowed: never refused, one
more allow-list lookup per packet). One BccCollector, compiled before any timing, stays loaded
through every condition (its raw_syscalls programs cost every condition the same, the client
being untracked), so the difference between conditions is the hooks alone. Rounds as in
overhead.py, but finer: in each round every workload runs once under each condition, back to
back, in an order rotated from round to round (slow drift and other work on the machine fall on
all three conditions alike).

After every hooked run the egress totals are read (collector.egress) and checked against the
truth, as are the kernel's run counts of the hook programs (BPF stats, from /proc/self/fdinfo).
"""

import contextlib
import os
import socket
import subprocess
import tempfile
from pathlib import Path

from bench.build import build
from bench.measure import QUIET, RunFailed, check_exit, median, ratio, say, timed

CONDITIONS = ("cgroup-only", "hooks", "hooks-deny")
WORKLOADS = {"udp": 600_000, "udp-connected": 600_000, "connect": 50_000}
PAYLOAD = 16                       # bytes per datagram (sockloop.c)
TIMEOUT_S = 120
# BPF program types (uapi/linux/bpf.h), as /proc/<pid>/fdinfo shows them.
PROG_TYPES = {8: "skb", 18: "sock_addr"}     # BPF_PROG_TYPE_CGROUP_SKB, _CGROUP_SOCK_ADDR


@contextlib.contextmanager
def servers(binary: Path):
    """A UDP sink (bound, never read) and a TCP listener that `sockloop accept`, a process of
    its own outside the client's cgroup, accepts from and closes (a Python thread falls behind
    on two busy cores: the listen queue overflows and a dropped SYN stalls the client 1 s)."""
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    acceptor = None
    try:
        sink.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sink.bind(("127.0.0.1", 0))
        listener.bind(("127.0.0.1", 0))
        listener.listen(4096)
        acceptor = subprocess.Popen([str(binary), "accept", str(listener.fileno())],
                                    pass_fds=(listener.fileno(),), start_new_session=True,
                                    **QUIET)
        yield {"udp": sink.getsockname()[1], "tcp": listener.getsockname()[1],
               "acceptor": acceptor}
    finally:
        if acceptor is not None:
            acceptor.kill()
            acceptor.wait()
        listener.close()
        sink.close()


def listen_overflows() -> int | None:
    """The kernel's count of connections a full listen queue refused (TcpExt ListenOverflows)."""
    try:
        lines = [line.split() for line in Path("/proc/net/netstat").read_text().splitlines()
                 if line.startswith("TcpExt:")]
        return int(dict(zip(lines[0], lines[1], strict=True))["ListenOverflows"])
    except (OSError, IndexError, KeyError, ValueError):
        return None


def hook_stats() -> dict[str, dict[str, int]]:
    """Run count and run time of this process's cgroup BPF programs, summed by type."""
    out = {kind: {"run_cnt": 0, "run_time_ns": 0} for kind in PROG_TYPES.values()}
    seen = set()
    for fd in os.listdir("/proc/self/fdinfo"):
        try:
            info = dict(line.split(":", 1) for line in
                        Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines() if ":" in line)
        except (OSError, ValueError):
            continue
        kind = PROG_TYPES.get(int(info.get("prog_type", "-1").strip() or -1))
        prog_id = info.get("prog_id", "").strip()
        if kind is None or prog_id in seen:
            continue
        seen.add(prog_id)
        for key in ("run_cnt", "run_time_ns"):
            out[kind][key] += int(info.get(key, "0").strip() or 0)
    return out


def truth(workload: str, n: int) -> dict:
    """What the hooks must count for one run of a workload (packets: exact for UDP only)."""
    if workload == "udp":
        return {"sendmsg_calls": n, "connect_calls": 0, "packets": n, "bytes": n * PAYLOAD}
    if workload == "udp-connected":
        return {"sendmsg_calls": 0, "connect_calls": 1, "packets": n, "bytes": n * PAYLOAD}
    return {"sendmsg_calls": 0, "connect_calls": n, "packets": None, "bytes": 0}


def observed(collector, inv: int, port: int, counters: dict) -> dict:
    """The egress totals of one run, folded to what truth() predicts, and the loss counters
    (egress_lost: destinations the hooks' tables could not hold; lost_events: the rest)."""
    totals = collector.egress(inv)
    ours = [c for c in totals.calls if c["address"] == "127.0.0.1" and c["port"] == port]
    flows = [f for f in totals.flows if f["address"] == "127.0.0.1" and f["port"] == port]
    return {"sendmsg_calls": sum(c["calls"] for c in ours if c["kind"] == "sendmsg"),
            "connect_calls": sum(c["calls"] for c in ours if c["kind"] == "connect"),
            "packets": sum(f["packets"] for f in flows),
            "bytes": sum(f["bytes"] for f in flows),
            "refused": sum(c["refused"] for c in totals.calls),
            "dropped": sum(f["dropped"] for f in totals.flows),
            "other_destinations": len(totals.calls) - len(ours) + len(totals.flows) - len(flows),
            "egress_lost": counters.get("egress_lost", 0),
            "lost_events": counters.get("lost_events", 0)}


def one_run(collector, layout, binary: Path, workload: str, n: int, port: int,
            condition: str, inv: int) -> dict:
    """One timed client in a fresh cgroup, hooked or not; the cgroup is always removed."""
    from probes.boundary.cgroup import ClientCgroup
    argv = [str(binary), "connect" if workload == "connect" else
            "send" if workload == "udp-connected" else "udp", str(n), str(port)]
    cg = ClientCgroup.create(layout, f"bench-hooks-{inv}")
    hooked = condition != "cgroup-only"
    try:
        if hooked:
            collector.watch_cgroup(inv, cg.dirs["v2"], cg.id, allowed=[("127.0.0.1", port)],
                                   deny=condition == "hooks-deny")
        with tempfile.TemporaryFile() as out:
            overflows = listen_overflows()
            before = hook_stats()
            run = check_exit(timed(cg.join_argv() + argv, TIMEOUT_S, stdout=out),
                             f"sockloop {workload}")
            after = hook_stats()
            if overflows is not None and (now := listen_overflows()) is not None:
                run.extra["listen_overflows"] = now - overflows   # the whole host's
            out.seek(0)
            run.extra.update(condition=condition, loop_s=int(out.read()) / 1e9)
        for kind in PROG_TYPES.values():
            for key in ("run_cnt", "run_time_ns"):
                run.extra[f"{kind}_{key}"] = after[kind][key] - before[kind][key]
        if hooked:   # read before finish() frees the invocation's keys
            counters = collector.snapshot(inv).counters
            run.extra["observed"] = observed(collector, inv, port, counters)
    finally:
        try:
            if hooked:
                collector.unwatch_cgroup(inv)
                collector.finish(inv)         # frees the invocation's egress and flow keys
                collector.poll_events()       # drain the first-sighting events
        finally:
            cg.remove()
    return run.as_dict()


def measure(rounds: int) -> dict:
    """`rounds` runs of every workload under every condition; in each round a workload's
    conditions run back to back, in an order rotated from round to round."""
    from probes.bcc.collector import BccCollector
    from probes.boundary.cgroup import find_layout
    layout = find_layout()
    if (missing := layout.capability()) is not None:
        raise RunFailed(f"{missing.detail} ({missing.fix})")
    binary = build("sockloop")
    runs = {w: {c: [] for c in CONDITIONS} for w in WORKLOADS}
    inv = 0
    collector = BccCollector(bpf_stats=True)   # compiled once, outside every timed run; BPF
    # statistics on: the exactness check reads the hooks' run counts
    try:
        with servers(binary) as ports:
            for r in range(rounds):
                order = CONDITIONS[r % len(CONDITIONS):] + CONDITIONS[:r % len(CONDITIONS)]
                say(f"hooks: round {r + 1}/{rounds}: "
                    + ", ".join(f"{w} x{n:,}" for w, n in WORKLOADS.items())
                    + f", each {' / '.join(order)}")
                for workload, n in WORKLOADS.items():
                    port = ports["tcp" if workload == "connect" else "udp"]
                    for condition in order:
                        inv += 1
                        runs[workload][condition].append(one_run(
                            collector, layout, binary, workload, n, port, condition, inv))
                        if ports["acceptor"].poll() is not None:
                            raise RunFailed(f"sockloop accept exited "
                                            f"{ports['acceptor'].returncode}")
    finally:
        collector.close()
    return summarize(runs, binary)


def _check(workload: str, n: int, run: dict) -> list[str]:
    """What is wrong with one hooked run's counts (empty: exact)."""
    want = truth(workload, n)
    obs = run["observed"]
    wrong = [f"{key} {obs[key]:,} (truth {value:,})" for key, value in want.items()
             if value is not None and obs[key] != value]
    wrong += [f"{key} {obs[key]}" for key in ("refused", "dropped", "other_destinations",
                                               "egress_lost", "lost_events") if obs[key]]
    calls = want["sendmsg_calls"] + want["connect_calls"]
    if run["sock_addr_run_cnt"] != calls:
        wrong.append(f"socket-address hook runs {run['sock_addr_run_cnt']:,} (truth {calls:,})")
    if run["skb_run_cnt"] != obs["packets"]:
        wrong.append(f"egress hook runs {run['skb_run_cnt']:,} but {obs['packets']:,} packets "
                     "counted")
    return wrong


def summarize(runs: dict, binary: Path) -> dict:
    out = {"argv": f"{binary.name} udp|send|connect N PORT", "workloads": {}}
    for workload, n in WORKLOADS.items():
        conditions = {}
        for condition, samples in runs[workload].items():
            conditions[condition] = {
                "runs": samples,
                "median_wall_s": median(s["wall_s"] for s in samples),
                "median_loop_s": median(s["loop_s"] for s in samples),
                "median_cpu_s": median(s["cpu_s"] for s in samples),
                "median_bpf_run_s": median(
                    (s["sock_addr_run_time_ns"] + s["skb_run_time_ns"]) / 1e9 for s in samples),
                "median_sock_addr_run_s": median(s["sock_addr_run_time_ns"] / 1e9
                                                 for s in samples),
                "median_skb_run_s": median(s["skb_run_time_ns"] / 1e9 for s in samples),
                "median_packets": median(s["observed"]["packets"] for s in samples
                                         if "observed" in s),
            }
        base = conditions["cgroup-only"]
        per_op = {}
        for condition in CONDITIONS[1:]:
            c = conditions[condition]
            per_op[condition] = {
                "wall_us": _per_op(c["median_wall_s"], base["median_wall_s"], n),
                "loop_us": _per_op(c["median_loop_s"], base["median_loop_s"], n),
                "cpu_us": _per_op(c["median_cpu_s"], base["median_cpu_s"], n),
                "bpf_us": c["median_bpf_run_s"] / n * 1e6,
                # Paired: the median over rounds of (this run - the same round's cgroup-only
                # run) / N; the runs of a round are back to back, so drift between rounds (other
                # work on the machine) cancels out.
                **{f"paired_{what}_us": median(
                    (a[f"{what}_s"] - b[f"{what}_s"]) / n * 1e6
                    for a, b in zip(c["runs"], base["runs"], strict=True))
                   for what in ("wall", "loop", "cpu")},
                "wall_ratio": ratio(c["median_wall_s"], base["median_wall_s"]),
                "loop_ratio": ratio(c["median_loop_s"], base["median_loop_s"]),
                "cpu_ratio": ratio(c["median_cpu_s"], base["median_cpu_s"]),
                "packets_per_op": (c["median_packets"] / n if c["median_packets"] is not None
                                   else None)}
        hooked = [s for c in CONDITIONS[1:] for s in runs[workload][c]]
        problems = [f"{s['condition']}: " + "; ".join(w) for s in hooked
                    if (w := _check(workload, n, s))]
        out["workloads"][workload] = {
            "n": n, "truth": truth(workload, n), "conditions": conditions,
            "listen_overflows": sum(s.get("listen_overflows") or 0
                                    for c in CONDITIONS for s in runs[workload][c]),
            "base_per_op_us": {what: base[f"median_{what}_s"] / n * 1e6
                               for what in ("wall", "loop", "cpu")},
            "per_op": per_op,
            "exactness": {"runs_checked": len(hooked), "runs_wrong": len(problems),
                          "problems": problems[:10],
                          "passed": bool(hooked) and not problems}}
    w = out["workloads"]
    # The sendmsg hook alone: a datagram's added cost less its one packet's (udp-connected).
    datagram, packet = w["udp"]["per_op"]["hooks"], w["udp-connected"]["per_op"]["hooks"]
    out["per_sendmsg_hook_us"] = {
        what: datagram[what] - packet[what] if None not in (datagram[what], packet[what])
        else None for what in ("wall_us", "loop_us", "cpu_us", "paired_wall_us",
                               "paired_cpu_us", "bpf_us")}
    return out


def _per_op(hooked: float | None, base: float | None, n: int) -> float | None:
    if hooked is None or base is None:
        return None
    return (hooked - base) / n * 1e6
