"""Every number collector.bpf.c and its Python side must agree on, defined here only and handed
to the compiler as -D flags (cflags()): counter ids, event kinds, file operations, egress call
kinds, sizes. The .bpf.c defines none of them itself, so the two cannot drift apart; a flag it
needs and does not get fails the compile.
"""

from enum import IntEnum

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


class EgressKind(IntEnum):
    """How a cgroup socket hook saw a destination."""
    CONNECT = 1
    SENDMSG = 2


assert len(COUNTERS) <= FUNC_BASE and FUNC_BASE + MAX_FUNCS <= SYSCALL_BASE
assert SYSCALL_SLOTS & (SYSCALL_SLOTS - 1) == 0   # a power of two: the mask keeps ids apart


def cflags() -> list[str]:
    flags = [f"-DCTR_{name.upper()}={i}" for i, name in enumerate(COUNTERS)]
    for prefix, enum in (("EV", EventKind), ("FOP", FileOp), ("EG", EgressKind)):
        flags += [f"-D{prefix}_{member.name}={member.value}" for member in enum]
    return flags + [f"-DCTR_SYSCALL_BASE={SYSCALL_BASE}", f"-DCTR_FUNC_BASE={FUNC_BASE}",
                    f"-DSYSCALL_SLOTS={SYSCALL_SLOTS}", f"-DMAX_FUNCS={MAX_FUNCS}",
                    f"-DCOUNTER_SPACE={COUNTER_SPACE}", f"-DINV_SLOTS={INV_SLOTS}",
                    f"-DBUSY_MIN_NS={BUSY_MIN_NS}ULL", f"-DPATH_MAX_LEN={PATH_MAX_LEN}"]
