"""Detaching every program of the collector at once, side by side, when it closes; and, while it
is kept between sessions, those that run for the whole machine (probes/bcc/collector.py)."""

import os
import threading

from probes.bcc import btf
from probes.bcc.btf import detach
from probes.bcc.prog import RAW_PREFIX


def detach_all(bpf, links: list[tuple[int, int]], uprobe_links: list[int]) -> None:
    """Detach every program at once: a detach that waits in the kernel for an RCU grace period
    (~0.07 s: a classic uprobe's, a perf-event tracepoint's) overlaps the others' side by side.
    Raw tracepoints and uprobe_multi links, which the collector uses, detach in ~0.2 ms.
    `links`: the tp_btf programs (bcc_btf.py), `uprobe_links` the uprobe_multi links
    (bcc_uprobes.py), which BCC does not know of."""
    jobs = ([(bpf.detach_uprobe_event, name) for name in list(bpf.uprobe_fds)]
            + [(bpf.detach_tracepoint, tp) for tp in list(bpf.tracepoint_fds)]
            + [(bpf.detach_raw_tracepoint, tp) for tp in list(bpf.raw_tracepoint_fds)]
            + [(detach, [link]) for link in links]
            + [(os.close, link) for link in uprobe_links])
    threads = [threading.Thread(target=_quietly, args=job, name="evlab-detach") for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def _quietly(detach, name) -> None:
    try:
        detach(name)
    except Exception:
        pass  # cleanup() after it detaches whatever is left, and says so


def unhook(bpf, links: list[tuple[int, int]]) -> list[bytes]:
    """Detach the programs that run for the whole machine (every syscall's exit, every context
    switch, ...: raw and tp_btf tracepoints) but keep them loaded, for a collector kept
    between sessions: each one attached adds ~57 ns to every syscall of the machine, tracked
    or not (2M syscalls of `dd bs=1`: 0.26 s, 0.37 s beside one idle collector, 0.67 s
    beside four). `links` is updated in place (-1: detached); the raw tracepoints detached
    are returned for rehook."""
    points = list(bpf.raw_tracepoint_fds)
    for point in points:
        bpf.detach_raw_tracepoint(point)
    for i, (prog, link_fd) in enumerate(links):
        if link_fd >= 0:
            os.close(link_fd)
            links[i] = (prog, -1)
    return points


def rehook(bpf, links: list[tuple[int, int]], points: list[bytes]) -> None:
    """Attach again what unhook detached (the programs are still loaded: nothing verified
    again)."""
    for point in points:
        bpf.attach_raw_tracepoint(tp=point, fn_name=RAW_PREFIX + point)
    for i, (prog, link_fd) in enumerate(links):
        if link_fd < 0:
            links[i] = (prog, btf.link(prog))
