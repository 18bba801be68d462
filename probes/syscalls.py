"""System calls of the running architecture: their numbers and names from its own headers
(linux-libc-dev), and bpf(2), which evlab issues itself in two places (doctor's check, the
collector's run-time statistics) without going through BCC.

The numbers differ between architectures (bpf is 321 on x86-64, 280 on arm64), so none is
written here: a machine without the header gets None, and the callers say so.
"""

import ctypes
import errno
import platform
import re
from functools import cache
from pathlib import Path

INCLUDE = Path("/usr/include")
_DEFINE = re.compile(r"^#define __NR_(\w+)\s+(\d+)\s*$", re.MULTILINE)
_GENERIC = re.compile(r"^#include <asm-generic/unistd\.h>", re.MULTILINE)

# Commands and enums of bpf(2) that evlab uses (uapi/linux/bpf.h: kernel ABI, never renumbered).
BPF_MAP_CREATE = 0
BPF_ENABLE_STATS = 32
BPF_MAP_TYPE_ARRAY = 2
BPF_STATS_RUN_TIME = 0


def header() -> Path | None:
    """The header that numbers this architecture's syscalls, if installed."""
    arch = INCLUDE / f"{platform.machine()}-linux-gnu" / "asm"
    # unistd_64.h where the architecture has several ABIs (x86-64's unistd.h picks one of
    # three with the preprocessor); unistd.h, often the generic table, elsewhere.
    return next((p for p in (arch / "unistd_64.h", arch / "unistd.h") if p.is_file()), None)


@cache
def numbers() -> dict[str, int]:
    """Syscall name -> number on this architecture; empty when the header is missing."""
    path = header()
    if path is None:
        return {}
    text = path.read_text()
    if _GENERIC.search(text):   # e.g. arm64, riscv64: the generic table, included
        text += (INCLUDE / "asm-generic" / "unistd.h").read_text()
    return {name: int(nr) for name, nr in _DEFINE.findall(text)}


def names() -> dict[int, str]:
    return {nr: name for name, nr in numbers().items()}


def bpf(cmd: int, attr: ctypes.Array) -> int:
    """bpf(cmd, &attr, sizeof attr): its result, or -1 with errno set (ENOSYS when this
    architecture's number is unknown)."""
    nr = numbers().get("bpf")
    if nr is None:
        ctypes.set_errno(errno.ENOSYS)
        return -1
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.syscall(ctypes.c_long(nr), ctypes.c_int(cmd), ctypes.byref(attr),
                        ctypes.c_uint(ctypes.sizeof(attr)))


def enable_bpf_stats() -> int | None:
    """BPF_ENABLE_STATS(BPF_STATS_RUN_TIME): the kernel accounts BPF programs' run time while
    the returned descriptor stays open; None if it cannot."""
    attr = (ctypes.c_uint32 * 2)(BPF_STATS_RUN_TIME)   # union bpf_attr { __u32 type; }
    fd = bpf(BPF_ENABLE_STATS, attr)
    return fd if fd >= 0 else None
