"""Function-entry uprobes on a client binary: one uprobe_multi link per binary (Linux 6.6+),
whose program learns which function it is from the link's cookie (its counter slot).

Detaching is why: a classic uprobe (one perf event per function) waits for a grace period
when it goes, one after another in the kernel, where a link waits once for all its functions
(the fixture's 8 binaries x 3 functions: 2.0 s to detach as 24 uprobes, 0.08 s as 8 links,
measured here). A kernel without uprobe_multi gets the classic ones (probes/bcc/collector.py).

    prog = load(bpf)                                  # OSError if the kernel has no uprobe_multi
    link = attach(prog, binary, [(offset, slot), ...])   # OSError; os.close(link) detaches
"""

import ctypes
import os
from pathlib import Path

from probes.bcc.prog import LINK_CREATE, PROG_TYPE_KPROBE, TRACE_UPROBE_MULTI, call, load_as

FUNCTION = "on_func"   # collector.bpf.c: counts an entry into the slot its cookie names


def load(bpf) -> int:
    return load_as(bpf, FUNCTION, PROG_TYPE_KPROBE, TRACE_UPROBE_MULTI)


def symbol_offset(binary: Path, symbol: str) -> int | None:
    """The file offset a uprobe on the symbol attaches at (BCC's own resolution), or None."""
    from bcc import BPF
    try:
        return BPF._check_path_symbol(str(binary), symbol, None, -1)[1]
    except Exception:
        return None   # absent from this binary: its count stays unobserved


def attach(prog: int, binary: Path, probes: list[tuple[int, int]]) -> int:
    """One link putting prog on each (file offset, cookie) of the binary: its descriptor."""
    path = ctypes.create_string_buffer(os.fsencode(binary))
    offsets = (ctypes.c_uint64 * len(probes))(*(offset for offset, _ in probes))
    cookies = (ctypes.c_uint64 * len(probes))(*(cookie for _, cookie in probes))
    # union bpf_attr, BPF_LINK_CREATE: prog_fd, target_fd, attach_type, flags, then
    # uprobe_multi: path (16), offsets (24), ref_ctr_offsets (32), cookies (40), cnt (48)
    link = call(LINK_CREATE, [(0, "<I", prog), (8, "<I", TRACE_UPROBE_MULTI),
                              (16, "<Q", ctypes.addressof(path)),
                              (24, "<Q", ctypes.addressof(offsets)),
                              (40, "<Q", ctypes.addressof(cookies)),
                              (48, "<I", len(probes))], 64)
    if link < 0:
        raise OSError(-link, f"uprobe_multi on {binary}: {os.strerror(-link)}")
    return link
