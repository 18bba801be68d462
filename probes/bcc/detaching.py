"""Detaching every program of the collector at once, side by side (probes/bcc/collector.py)."""

import os
import threading

from probes.bcc.btf import detach


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
