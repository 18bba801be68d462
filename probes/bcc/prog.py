"""BCC-compiled functions loaded as program types BCC has no loader for (tp_btf,
uprobe_multi), through the bpf() syscall itself.

    fd = load_as(bpf, "btf_sys_exit", PROG_TYPE_TRACING, TRACE_RAW_TP, btf_id=...)
    link = call(LINK_CREATE, [(offset, struct format, value), ...], size)   # fd or -errno
"""

import ctypes
import os
import struct

from probes import syscalls

PROG_LOAD, RAW_TRACEPOINT_OPEN, LINK_CREATE = 5, 17, 28
PROG_TYPE_KPROBE, PROG_TYPE_TRACING = 2, 26
TRACE_RAW_TP, TRACE_UPROBE_MULTI = 23, 48
LOG_SIZE = 1 << 20
RAW_PREFIX = b"raw_tracepoint__"   # BCC's name for a RAW_TRACEPOINT_PROBE's function: this + point


def call(cmd: int, fields: list[tuple[int, str, object]], size: int) -> int:
    """bpf(cmd, attr) with attr built from (offset, struct format, value) fields: the result,
    or -errno."""
    raw = bytearray(size)
    for offset, fmt, value in fields:
        struct.pack_into(fmt, raw, offset, value)
    attr = (ctypes.c_uint8 * size).from_buffer(raw)
    fd = syscalls.bpf(cmd, attr)
    return fd if fd >= 0 else -ctypes.get_errno()


def load_as(bpf, function: str, prog_type: int, attach_type: int, btf_id: int = 0) -> int:
    """A BCC-compiled function (its map descriptors already in the bytecode) loaded as
    prog_type with this expected attach type: the program's descriptor, or OSError with the
    verifier's last lines."""
    insns = bpf.dump_func(function)
    code = ctypes.create_string_buffer(insns, len(insns))
    license = ctypes.create_string_buffer(b"GPL")
    log = ctypes.create_string_buffer(LOG_SIZE)
    # union bpf_attr, BPF_PROG_LOAD: type, insn_cnt, insns, license, log level/size/buf,
    # name (48), expected_attach_type (68), attach_btf_id (108)
    base = [(0, "<I", prog_type), (4, "<I", len(insns) // 8),
            (8, "<Q", ctypes.addressof(code)), (16, "<Q", ctypes.addressof(license)),
            (48, "16s", function.encode()[:15]), (68, "<I", attach_type), (108, "<I", btf_id)]
    fd = call(PROG_LOAD, base, 128)
    if fd < 0:   # again, with the verifier's log for the reason
        logged = base + [(24, "<I", 1), (28, "<I", LOG_SIZE), (32, "<Q", ctypes.addressof(log))]
        fd = call(PROG_LOAD, logged, 128)
    if fd < 0:
        detail = log.value.decode(errors="replace").strip().splitlines()[-12:]
        raise OSError(-fd, f"loading {function}: {os.strerror(-fd)}"
                      + (f" ({' / '.join(detail)})" if detail else ""))
    return fd
