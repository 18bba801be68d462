"""Every number collector.bpf.c and its Python side must agree on, defined here only and handed
to the compiler as -D flags (cflags()): counter ids, event kinds, file operations, egress call
kinds, sizes. The .bpf.c defines none of them itself, so the two cannot drift apart; a flag it
needs and does not get fails the compile.
"""

from enum import IntEnum, IntFlag

from probes.collectors.records import BUSY_MIN_NS, COUNTERS

PATH_MAX_LEN = 256     # the config map's source and client paths, NUL included
MAX_FUNCS = 8          # uprobe slots: on_func_0 .. on_func_7 in the .bpf.c
# Counter ids in an invocation's slot of the per-CPU `counters` array: COUNTERS from 0, then one
# per function slot, then one per syscall number (the .bpf.c masks the number with
# SYSCALL_SLOTS - 1).
FUNC_BASE = 100
SYSCALL_BASE = 128
SYSCALL_SLOTS = 1024
COUNTER_SPACE = SYSCALL_BASE + SYSCALL_SLOTS
# Watch ids (processes the lab watches: probes/bcc/operations.py), a power of two
WATCH_SLOTS = 256
# Invocations with counters at once (launched or cgroup-watched, not yet finished): each has one
# slot of COUNTER_SPACE u64 per CPU (9 KiB).
INV_SLOTS = 32


class EventKind(IntEnum):
    """`kind` of a record in the `events` ring buffer."""
    CONNECT = 1
    EXEC = 2
    FORK = 3
    EXIT = 4
    EGRESS = 5


class FileOp(IntEnum):
    """`op` of a record in the `file_events` ring buffer."""
    OPEN = 1
    UNLINK = 2
    RMDIR = 3
    RENAME = 4
    MKDIR = 5
    TRUNCATE = 6
    CHDIR = 7
    FCHDIR = 8
    LINK = 9          # path: the new name; path2: the existing one
    SYMLINK = 10      # path: the link's name; path2: its text (what it points to)
    # Metadata changes by path (refused or not, like every change but chdir): path, dfd, flags
    CHMOD = 11        # chmod, fchmodat, fchmodat2
    CHOWN = 12        # chown, lchown, fchownat
    UTIMES = 13       # utime, utimes, utimensat, futimesat
    SETXATTR = 14     # setxattr, lsetxattr, setxattrat, io_uring SETXATTR
    REMOVEXATTR = 15  # removexattr, lremovexattr, removexattrat
    # ... and by descriptor (dfd; the *at forms given no path), sent only when the file behind
    # it is the source's: the kernel's view of the file, whatever name or descriptor reached it
    FCHMOD = 16
    FCHOWN = 17
    FUTIMES = 18
    FSETXATTR = 19    # fsetxattr, io_uring FSETXATTR
    FREMOVEXATTR = 20
    FTRUNCATE = 21    # ftruncate, io_uring FTRUNCATE
    FALLOCATE = 22    # fallocate, io_uring FALLOCATE
    # A copy of a folder's descriptor (dup, dup2, dup3, fcntl F_DUPFD*): dfd the old, its result
    # the new, so that paths relative to the copy resolve (rm -rf unlinks through one)
    DUP = 23


class OpsKind(IntEnum):
    """`kind` of a record in the `ops` ring buffer (operations.bpf.c)."""
    SIGNAL = 1        # a signal the tree sent, one per process or thread it reached
    KILL_CALL = 2     # a call of the kill family, as asked, and its result
    TRUNCATE = 3      # a truncation (truncate, ftruncate, open O_TRUNC, fallocate)
    STARTED = 4       # a watched process forked another
    EXIT = 5          # a process of the tree's own, or a watched one, ended


class Trunc(IntEnum):
    """How a file was truncated (`code` of an OpsKind.TRUNCATE record)."""
    PATH = 1          # truncate(2): by path
    FD = 2            # ftruncate(2)
    OPEN = 3          # an open with O_TRUNC of an existing regular file
    FALLOCATE = 4     # fallocate(2) punching a hole, collapsing or zeroing a range
    URING_FD = 5      # io_uring's FTRUNCATE request
    URING_OPEN = 6    # io_uring's OPENAT or OPENAT2 request with O_TRUNC, as OPEN
    URING_FALLOCATE = 7   # io_uring's FALLOCATE request, as FALLOCATE


class OpsFlag(IntFlag):
    """`flags` bits of an `ops` record."""
    GROUP = 1         # signal: to the whole thread group
    OWN = 2           # signal: its target is of the sender's own tree; exit: the tree's own
    WATCHED = 4       # signal: its target is watched (watch: which); exit: a watched process
    SENDER = 8        # exit: a signal ended it and its sender is known
    NO_INODE = 16     # truncation: by path, its file not reachable at the call's return
    UNCOUNTED = 32    # truncation: the process's own writable opens not all counted


class EgressKind(IntEnum):
    """How a cgroup socket hook saw a destination."""
    CONNECT = 1
    SENDMSG = 2


assert len(COUNTERS) <= FUNC_BASE and FUNC_BASE + MAX_FUNCS <= SYSCALL_BASE
assert SYSCALL_SLOTS & (SYSCALL_SLOTS - 1) == 0   # a power of two: the mask keeps ids apart


def cflags() -> list[str]:
    flags = [f"-DCTR_{name.upper()}={i}" for i, name in enumerate(COUNTERS)]
    for prefix, enum in (("EV", EventKind), ("FOP", FileOp), ("EG", EgressKind),
                         ("OPS", OpsKind), ("TRUNC", Trunc)):
        flags += [f"-D{prefix}_{member.name}={member.value}" for member in enum]
    flags += [f"-D{'TRUNCF' if flag >= OpsFlag.NO_INODE else 'SIGF'}_{flag.name}={flag.value}"
              for flag in OpsFlag]
    return flags + [f"-DCTR_SYSCALL_BASE={SYSCALL_BASE}", f"-DCTR_FUNC_BASE={FUNC_BASE}",
                    f"-DSYSCALL_SLOTS={SYSCALL_SLOTS}", f"-DMAX_FUNCS={MAX_FUNCS}",
                    f"-DCOUNTER_SPACE={COUNTER_SPACE}", f"-DINV_SLOTS={INV_SLOTS}",
                    f"-DWATCH_SLOTS={WATCH_SLOTS}",
                    f"-DBUSY_MIN_NS={BUSY_MIN_NS}ULL", f"-DPATH_MAX_LEN={PATH_MAX_LEN}"]
