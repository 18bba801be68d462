"""BTF-typed tracepoint programs (tp_btf) for the collector: BCC compiles them with the rest of
collector.bpf.c but has no loader for this program type, so they are loaded here.

A tp_btf program gets the tracepoint's arguments typed by the kernel's BTF: sys_exit's saved
registers (read with plain loads, not probe reads), sched_switch's two tasks. It runs like a
raw tracepoint program: no perf-style record of the arguments is built for it.

    links = attach(bpf, PROGRAMS)     # [(program fd, link fd)], or OSError with the verifier's log
    detach(links)
"""

import ctypes
import os

from probes.bcc.prog import PROG_TYPE_TRACING, RAW_TRACEPOINT_OPEN, TRACE_RAW_TP, call, load_as

PROGRAMS = (("btf_sys_exit", "sys_exit"), ("btf_sched_switch", "sched_switch"))



def btf_id(tracepoint: str) -> int:
    """The kernel BTF id of the tracepoint's btf_trace_<name> type (libbpf, which BCC uses)."""
    libbpf = ctypes.CDLL("libbpf.so.1", use_errno=True)
    find = libbpf.libbpf_find_vmlinux_btf_id
    find.argtypes, find.restype = [ctypes.c_char_p, ctypes.c_int], ctypes.c_int
    found = find(tracepoint.encode(), TRACE_RAW_TP)
    if found < 0:
        raise OSError(-found, f"no BTF for tracepoint {tracepoint}: {os.strerror(-found)}")
    return found


BTF_KIND_STRUCT, BTF_KIND_UNION = 4, 5
BTF_MODIFIERS = (8, 9, 10, 11, 18)   # typedef, volatile, const, restrict, type tag


def member_offsets(*fields: tuple[str, ...]) -> list[int | None]:
    """The byte offset of each (struct_name, *path) in the running kernel, struct_name.path[0].
    path[1]..., or None, from its BTF (read once, ~10 ms). BCC compiles against Debian's header
    trees, whose layouts may differ from this kernel's."""
    libbpf = ctypes.CDLL("libbpf.so.1", use_errno=True)
    libbpf.btf__load_vmlinux_btf.restype = ctypes.c_void_p
    libbpf.btf__find_by_name_kind.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_uint]
    libbpf.btf__type_by_id.argtypes = [ctypes.c_void_p, ctypes.c_uint]
    libbpf.btf__type_by_id.restype = ctypes.POINTER(ctypes.c_uint32)
    libbpf.btf__name_by_offset.argtypes = [ctypes.c_void_p, ctypes.c_uint]
    libbpf.btf__name_by_offset.restype = ctypes.c_char_p
    libbpf.btf__free.argtypes = [ctypes.c_void_p]
    btf = libbpf.btf__load_vmlinux_btf()
    if not btf:
        return [None] * len(fields)
    try:
        return [_offset(libbpf, btf, struct_name, path) for struct_name, *path in fields]
    finally:
        libbpf.btf__free(btf)


def _offset(libbpf, btf, struct_name: str, path: list[str]) -> int | None:
    type_id = libbpf.btf__find_by_name_kind(btf, struct_name.encode(), BTF_KIND_STRUCT)
    offset_bits = 0
    for name in path:
        found = _member(libbpf, btf, type_id, name.encode())
        if found is None:
            return None
        type_id, bits = found
        offset_bits += bits
    return offset_bits // 8


def _member(libbpf, btf, type_id: int, name: bytes) -> tuple[int, int] | None:
    """(type id, bit offset) of a struct's member by name, looking inside its anonymous
    structs and unions (io_kiocb's file is in one)."""
    if type_id <= 0:
        return None
    t = libbpf.btf__type_by_id(btf, type_id)   # name_off, info, size, then members
    while (t[1] >> 24) & 0x1f in BTF_MODIFIERS:   # a const struct path, say: the struct
        t = libbpf.btf__type_by_id(btf, t[2])
    info = t[1]
    if (info >> 24) & 0x1f not in (BTF_KIND_STRUCT, BTF_KIND_UNION):
        return None
    for i in range(info & 0xffff):
        noff, mtype, moff = t[3 + 3 * i], t[4 + 3 * i], t[5 + 3 * i]
        bits = moff & 0xffffff if info >> 31 else moff
        if libbpf.btf__name_by_offset(btf, noff) == name:
            return mtype, bits
        if noff == 0:   # an anonymous struct or union: its members are the parent's
            inner = _member(libbpf, btf, mtype, name)
            if inner is not None:
                return inner[0], bits + inner[1]
    return None


def load(bpf, function: str, tracepoint: str) -> int:
    """A BCC-compiled function loaded as a tp_btf program of the tracepoint: its descriptor."""
    try:
        return load_as(bpf, function, PROG_TYPE_TRACING, TRACE_RAW_TP, btf_id(tracepoint))
    except OSError as e:
        raise OSError(e.errno, f"{e.strerror} (as tp_btf/{tracepoint})") from None


def attach(bpf, programs=PROGRAMS) -> list[tuple[int, int]]:
    """Load and attach every (function, tracepoint): [(program fd, link fd)]; all or none."""
    links: list[tuple[int, int]] = []
    try:
        for function, tracepoint in programs:
            prog = load(bpf, function, tracepoint)
            try:
                links.append((prog, link(prog, f"attaching {function} to {tracepoint}")))
            except OSError:
                os.close(prog)
                raise
    except BaseException:
        detach(links)
        raise
    return links


def link(prog: int, what: str = "attaching a tp_btf program") -> int:
    """The program attached to its tracepoint (the one it was loaded for): the link's fd."""
    fd = call(RAW_TRACEPOINT_OPEN, [(0, "<Q", 0), (8, "<I", prog)], 16)
    if fd < 0:
        raise OSError(-fd, f"{what}: {os.strerror(-fd)}")
    return fd


def detach(links: list[tuple[int, int]]) -> None:
    """Close each link (-1: not attached now) and its program."""
    for prog, link_fd in links:
        if link_fd >= 0:
            os.close(link_fd)
        os.close(prog)
