"""Loading the collector's BPF program with BCC, and the kernel's account of what it costs.

Loading happens once per session (BccCollector's constructor); the compile itself once per
machine (cache.py: a later session compiles the maps alone, ~0.33 CPU-s instead of ~1.75, and
loads the kept instructions). A machine that cannot load it gets a CollectorUnavailable carrying
the capability record that says why. The `evlab` command starts the first compile ahead
(compile_ahead), beside its own imports.

Every compile runs in a thread of its own whose working directory is its own (`private_cwd`):
libbcc chdirs into the kernel headers while it compiles, and the user's relative paths, used by
other threads meanwhile, must still resolve against the directory evlab was started from.
"""

import atexit
import ctypes
import gzip
import os
import re
import threading
from collections.abc import Mapping
from pathlib import Path

from probes.bcc import btf as bcc_btf
from probes.bcc import cache
from probes.bcc.abi import cflags
from probes.bcc.btf import member_offsets
from probes.capability import Capability

BPF_SOURCE = Path(__file__).with_name("collector.bpf.c")
# Its operations (signals, truncations, process lifetimes), a file of their own put in at its
# `#include` line here: BCC rewrites map calls (`table.lookup(...)`) in its main text only.
OPS_SOURCE = Path(__file__).with_name("operations.bpf.c")


def bpf_text() -> str:
    include = f'#include "{OPS_SOURCE.name}"\n'
    text = BPF_SOURCE.read_text()
    if include not in text:
        raise OSError(f"{BPF_SOURCE.name} does not include {OPS_SOURCE.name}")
    return text.replace(include, OPS_SOURCE.read_text(), 1)
EXIT_FORMAT = Path("/sys/kernel/tracing/events/sched/sched_process_exit/format")
IO_URING_COMPLETE = Path("/sys/kernel/tracing/events/io_uring/io_uring_complete")
# Faults that map file pages (reads through a mapping): Linux 6.10+ (collector.bpf.c: mapped_in)
FILEMAP_EVENTS = Path("/sys/kernel/tracing/events/filemap")


def have_filemap() -> bool:
    return all((FILEMAP_EVENTS / name).exists()
               for name in ("mm_filemap_map_pages", "mm_filemap_fault"))
# What a descriptor or an io_uring request is, found from the file behind it (collector.bpf.c:
# file_of_fd, kind_of_file), and whether a task is an io_uring worker of a tracked process.
FILE_FIELDS = (("task_struct", "files"), ("files_struct", "fdt"), ("fdtable", "fd"),
               ("fdtable", "max_fds"), ("file", "f_inode"), ("inode", "i_mode"),
               ("inode", "i_ino"), ("inode", "i_sb"), ("super_block", "s_dev"),
               ("task_struct", "flags"), ("task_struct", "tgid"), ("io_kiocb", "file"),
               ("io_kiocb", "opcode"), ("super_block", "s_magic"), ("address_space", "host"),
               ("inode", "__i_nlink"), ("file", "f_mode"))
FILE_MACROS = ("TASK_FILES_OFF", "FILES_FDT_OFF", "FDT_FD_OFF", "FDT_MAX_FDS_OFF",
               "FILE_INODE_OFF", "INODE_MODE_OFF", "INODE_INO_OFF", "INODE_SB_OFF",
               "SB_DEV_OFF", "TASK_FLAGS_OFF", "TASK_TGID_OFF", "IOKIOCB_FILE_OFF",
               "IOKIOCB_OPCODE_OFF", "SB_MAGIC_OFF", "MAPPING_HOST_OFF", "INODE_NLINK_OFF",
               "FILE_MODE_OFF")


# Operations (operations.bpf.c): a truncated file's writers and name, a process's exit code
# and comm.
OPS_FIELDS = (("inode", "i_writecount"), ("task_struct", "exit_code"), ("task_struct", "comm"),
              ("file", "f_path", "dentry"), ("dentry", "d_name", "name"),
              ("task_struct", "group_leader"), ("task_struct", "start_time"))
OPS_MACROS = ("INODE_WRITECOUNT_OFF", "TASK_EXIT_CODE_OFF", "TASK_COMM_OFF", "FILE_DENTRY_OFF",
              "DENTRY_NAME_OFF", "TASK_LEADER_OFF", "TASK_START_OFF")


# io_uring SPLICE and TEE requests: their input descriptor (the output is the request's file).
# A kernel whose BTF lacks them counts those requests' bytes as moved, not from the source.
SPLICE_FIELDS = (("io_kiocb", "cmd"), ("io_splice", "splice_fd_in"), ("io_splice", "flags"))


# io_uring requests that name files: where their paths (struct filename *), descriptors and
# flags are in the request's command data (collector.bpf.c: io_uring_submit_req). Structs of
# io_uring's own (io_uring/fs.c, openclose.c), so their offsets come from the BTF; a kernel
# whose BTF lacks one counts such requests as lost events (the view is incomplete).
NAMING_FIELDS = {
    "IOKIOCB_CMD_OFF": ("io_kiocb", "cmd"), "FILENAME_NAME_OFF": ("filename", "name"),
    "IOOPEN_DFD_OFF": ("io_open", "dfd"), "IOOPEN_FILENAME_OFF": ("io_open", "filename"),
    "IOOPEN_HOW_FLAGS_OFF": ("io_open", "how", "flags"),
    "IOUNLINK_DFD_OFF": ("io_unlink", "dfd"), "IOUNLINK_FLAGS_OFF": ("io_unlink", "flags"),
    "IOUNLINK_FILENAME_OFF": ("io_unlink", "filename"),
    "IOMKDIR_DFD_OFF": ("io_mkdir", "dfd"), "IOMKDIR_FILENAME_OFF": ("io_mkdir", "filename"),
    "IORENAME_OLD_DFD_OFF": ("io_rename", "old_dfd"),
    "IORENAME_NEW_DFD_OFF": ("io_rename", "new_dfd"),
    "IORENAME_OLDPATH_OFF": ("io_rename", "oldpath"),
    "IORENAME_NEWPATH_OFF": ("io_rename", "newpath"),
    "IOLINK_OLD_DFD_OFF": ("io_link", "old_dfd"), "IOLINK_NEW_DFD_OFF": ("io_link", "new_dfd"),
    "IOLINK_OLDPATH_OFF": ("io_link", "oldpath"), "IOLINK_NEWPATH_OFF": ("io_link", "newpath"),
    "IOLINK_FLAGS_OFF": ("io_link", "flags"),
}


# io_uring's truncating requests (operations.bpf.c: uring_truncations): FTRUNCATE's length,
# FALLOCATE's mode and range, and whether an OPENAT's file went to a fixed-file slot (no
# descriptor to find it by). A kernel whose BTF lacks one counts them as lost events.
URING_TRUNC_FIELDS = {
    "IOFTRUNC_LEN_OFF": ("io_ftrunc", "len"), "IOSYNC_LEN_OFF": ("io_sync", "len"),
    "IOSYNC_OFF_OFF": ("io_sync", "off"), "IOSYNC_MODE_OFF": ("io_sync", "mode"),
    "IOOPEN_FILE_SLOT_OFF": ("io_open", "file_slot"),
}


# A process's own /proc entries (collector.bpf.c: own_proc_file): a procfs inode's struct pid
# (proc_inode, around the inode) and the task it is the pid of, so that a write to the writer's
# own /proc/<tgid>/ or /proc/<tgid>/task/<tid>/ files (the JVM's coredump_filter) is not taken
# for a write elsewhere. A kernel whose BTF lacks one counts them elsewhere, as before.
PROC_FIELDS = {
    "PROC_INODE_PID_OFF": ("proc_inode", "pid"), "PROC_INODE_VFS_OFF": ("proc_inode", "vfs_inode"),
    "PID_TASKS_OFF": ("pid", "tasks"), "TASK_PID_LINKS_OFF": ("task_struct", "pid_links"),
}
# io_uring's SETXATTR names its file by a path (struct io_xattr's filename), read at submit as
# the naming requests' are; a kernel whose BTF lacks it counts such a request as a lost event.
XATTR_FIELDS = {"IOXATTR_FILENAME_OFF": ("io_xattr", "filename")}


def optional_flags(fields: Mapping[str, tuple[str, ...]], have: str) -> list[str]:
    """-D flags of fields' offsets and `have`=1, or `have`=0 when the BTF lacks any of them."""
    offsets = member_offsets(*fields.values())
    if None in offsets:
        return [f"-D{have}=0"]
    return [f"-D{have}=1", *(f"-D{name}={offset}"
                              for name, offset in zip(fields, offsets, strict=True))]


class CollectorUnavailable(Exception):
    """BPF could not be loaded; carries the capability record that says why and how to fix it."""

    def __init__(self, capability: Capability):
        super().__init__(capability.detail)
        self.capability = capability


CLONE_FS = 0x200   # <linux/sched.h>: the working directory, root and umask


def private_cwd() -> None:
    """Give the calling thread a working directory (and root and umask) of its own, so a chdir
    in it (libbcc's, into the kernel headers) moves no other thread. unshare(CLONE_FS) needs
    no privilege and is per thread (os.unshare is Python 3.12+)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.unshare(CLONE_FS) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"unshare(CLONE_FS): {os.strerror(errno)}")


class Compiling(threading.Thread):
    """`build()` run in a thread of its own working directory: its result, or what it raised.
    For every BCC compile (the collector's, doctor's probes)."""

    def __init__(self, build=None):
        super().__init__(name="evlab-bpf-compile", daemon=True)
        self.build = build or _compile
        self.bpf = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            private_cwd()
            self.bpf = self.build()
        except BaseException as e:  # handed to whoever takes it (load_bpf)
            self.error = e

    def result(self):
        """Once it has ended: its result, or raise what it raised."""
        if self.error is not None:
            raise self.error
        return self.bpf


_ahead: Compiling | None = None
_ahead_lock = threading.Lock()
_abandoned: list[Compiling] = []   # compiles whose caller was interrupted: finished at exit


def compiled(build):
    """`build()` (a BCC compile) run where its chdir moves no other thread; its result."""
    compiling = Compiling(build)
    compiling.start()
    try:
        compiling.join()
    except BaseException:   # interrupted: LLVM must still finish before the interpreter exits
        _abandoned.append(compiling)
        raise
    return compiling.result()


def compile_ahead() -> None:
    """Start compiling the collector in a thread now: the compile runs in libbcc without the
    GIL (~0.3 s; ~1.8 s the first time on a machine), so it overlaps the imports and the
    session's set-up, and the next load_bpf takes its result. A result nobody takes is
    released at exit."""
    global _ahead
    with _ahead_lock:
        if _ahead is None:
            _ahead = Compiling()
            _ahead.start()


def _take_ahead() -> "Compiling | None":
    global _ahead
    with _ahead_lock:
        ahead, _ahead = _ahead, None
    return ahead


def _give_back(ahead: Compiling) -> None:
    global _ahead
    with _ahead_lock:
        if _ahead is None:
            _ahead = ahead


def compiling_unused() -> bool:
    """Whether a compile started ahead is still running and nothing took it (the command never
    opened a lab: a usage error, or an interrupt while the lab waited for it)."""
    ahead = _ahead
    return ahead is not None and ahead.is_alive()


@atexit.register
def _release_ahead() -> None:
    # LLVM must not be compiling while the interpreter exits; an unused program is detached
    for compiling in [_take_ahead(), *_abandoned]:
        if compiling is not None:
            compiling.join()
            if compiling.bpf is not None:
                compiling.bpf.cleanup()


def load_bpf():
    """The compiled and loaded collector (a bcc.BPF), or CollectorUnavailable: the one
    compiled ahead if there is one, else compiled now."""
    ahead = _take_ahead()
    if ahead is None:
        return compiled(_compile)
    try:
        ahead.join()
    except BaseException:   # interrupted while waiting: the compile is nobody's again
        _give_back(ahead)
        raise
    return ahead.result()


def _compile():
    try:
        import bcc  # noqa: F401  (the import is the check)
    except ImportError as e:
        raise CollectorUnavailable(Capability(
            "bcc-import", False, f"cannot import bcc: {e}",
            "apt-get install python3-bpfcc bpfcc-tools libbpfcc, then make setup")) from None
    if os.geteuid() != 0:
        raise CollectorUnavailable(Capability(
            "root", False, "loading BPF programs needs root (CAP_BPF and CAP_PERFMON)",
            "run evlab as root (sudo .venv/bin/evlab ...)"))
    if not os.path.ismount("/sys/kernel/tracing"):
        raise CollectorUnavailable(Capability(
            "tracefs", False, "tracefs is not mounted; BCC cannot read tracepoint formats",
            "mount -t tracefs nodev /sys/kernel/tracing"))
    try:
        return cache.compiled(bpf_text(), collector_cflags())
    except Exception as e:
        detail = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
        fix = ("make setup (installs linux-headers-amd64 and links /lib/modules/$(uname -r)/build)"
               if "kernel headers" in str(e) else "see `evlab doctor`")
        raise CollectorUnavailable(Capability("bpf-load", False, detail, fix)) from None


def collector_cflags() -> list[str]:
    """Every flag the collector is compiled with: this kernel's struct offsets and features
    (OSError when its BTF or tracepoints lack one the collector needs)."""
    pid, runtime, filename, cmd, fd_in, flags, *files = member_offsets(
        ("task_struct", "pid"), ("task_struct", "se", "sum_exec_runtime"),
        ("linux_binprm", "filename"), *SPLICE_FIELDS, *FILE_FIELDS, *OPS_FIELDS)
    splice_in = splice_flags = -1
    if cmd is not None and fd_in is not None and flags is not None:
        splice_in, splice_flags = cmd + fd_in, cmd + flags
    if pid is None or filename is None or None in files:
        missing = [".".join(f) for f, o in zip(FILE_FIELDS + OPS_FIELDS, files, strict=True)
                   if o is None]
        raise OSError("the kernel's BTF does not describe task_struct.pid, "
                      "linux_binprm.filename" + "".join(f", {m}" for m in missing))
    if "group_dead" not in EXIT_FORMAT.read_text():   # the raw tracepoint's second argument
        raise OSError("this kernel's sched_process_exit tracepoint has no group_dead "
                      "argument (a newer kernel has it)")
    return cflags() + [
        f"-DTASK_PID_OFF={pid}",
        f"-DTASK_RUNTIME_OFF={runtime if runtime is not None else -1}",
        f"-DBPRM_FILENAME_OFF={filename}",
        *(f"-D{name}={offset}"
          for name, offset in zip(FILE_MACROS + OPS_MACROS, files, strict=True)),
        f"-DHAVE_IO_URING={int(IO_URING_COMPLETE.exists())}",
        *optional_flags(NAMING_FIELDS, "HAVE_IO_URING_NAMING"),
        *optional_flags(URING_TRUNC_FIELDS, "HAVE_IO_URING_TRUNC"),
        *optional_flags(PROC_FIELDS, "HAVE_PROC_OWN"),
        *optional_flags(XATTR_FIELDS, "HAVE_IO_URING_XATTR"),
        f"-DHAVE_FILEMAP={int(have_filemap())}",
        f"-DSPLICE_FD_IN_OFF={splice_in}",
        f"-DSPLICE_FLAGS_OFF={splice_flags}",
        f"-DTICK_NS={tick_ns()}",
        # no debug info, so no BTF of the program's own (~0.1 s of the compile): nothing
        # reads it, BCC describes the maps to Python itself
        "-g0"]


def tick_ns() -> int:
    """The scheduler tick of the running kernel (CONFIG_HZ): how late its runtime of a running
    task may be read. 10 ms (HZ=100, the coarsest) when the kernel's config cannot be read."""
    for path in (Path("/proc/config.gz"), Path(f"/boot/config-{os.uname().release}")):
        try:
            text = (gzip.decompress(path.read_bytes()) if path.suffix == ".gz"
                    else path.read_bytes()).decode(errors="replace")
        except OSError:
            continue
        hz = re.search(r"^CONFIG_HZ=(\d+)$", text, re.M)
        if hz and int(hz[1]) > 0:
            return 1_000_000_000 // int(hz[1])
    return 10_000_000


def attach_btf(bpf) -> list[tuple[int, int]]:
    """The collector's tp_btf programs (probes/bcc/btf.py) loaded and attached: [(program fd,
    link fd)], or CollectorUnavailable."""
    # io_uring's truncating requests (operations.bpf.c), a program beside the collector's own
    # io_uring_complete, which BCC attaches (it takes one program a raw tracepoint)
    uring = (("uring_truncations", "io_uring_complete"),) if IO_URING_COMPLETE.exists() else ()
    try:
        return bcc_btf.attach(bpf, bcc_btf.PROGRAMS + uring)
    except OSError as e:
        raise CollectorUnavailable(Capability(
            "tp_btf", False, str(e),
            "needs Linux >= 5.15 with BTF (/sys/kernel/btf/vmlinux): BTF-typed tracepoints "
            "and bpf_task_pt_regs")) from None


def run_stats(bpf, progs=()) -> tuple[int, int]:
    """(run time ns, run count) of every loaded program, BCC's and `progs` (descriptors of
    those loaded beside it), from the kernel's BPF statistics (counted only while they are
    enabled: syscalls.enable_bpf_stats)."""
    run_ns = run_cnt = 0
    for fd in _prog_fds(bpf) + list(progs):
        stats = _fdinfo(fd)
        run_ns += stats.get("run_time_ns", 0)
        run_cnt += stats.get("run_cnt", 0)
    return run_ns, run_cnt


def _prog_fds(bpf) -> list[int]:
    fds = [fn.fd for fn in getattr(bpf, "funcs", {}).values() if getattr(fn, "fd", None)]
    return [fd for fd in fds if fd and fd > 0]


def _fdinfo(fd: int) -> dict[str, int]:
    out = {}
    try:
        for line in Path(f"/proc/self/fdinfo/{fd}").read_text().splitlines():
            key, _, value = line.partition(":")
            if value.strip().isdigit():
                out[key.strip()] = int(value.strip())
    except OSError:
        pass
    return out
