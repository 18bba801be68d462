"""What the kernel observers report, independent of how it was collected (BCC or strace).

Counter names are the collector's vocabulary; a counter a collector cannot observe is absent
from its snapshot (and listed in `unobserved`), never reported as 0.
"""

import os
from dataclasses import dataclass, field

# Counters every collector tries to fill, in the order the BPF program numbers them.
COUNTERS = (
    "syscalls",            # every syscall entered by the tracked process tree
    "connects",            # connect() calls
    "read_calls",          # read-family calls that returned bytes
    "read_bytes",          # bytes read over all descriptors (incl. the loader's library reads)
    "source_read_bytes",   # bytes read from the source file's descriptors only
    "source_opens",        # successful opens of the source (by its path or its inode)
    "sock_sent_bytes",     # bytes sent over sockets (send*, write* on a socket fd, sendfile/splice)
    "sock_recv_bytes",     # bytes received over sockets
    "write_bytes",         # bytes written over all descriptors
    "switches_out",        # sched_switch away from a tracked task
    "oncpu_ns",            # on-CPU time, from sched_switch in/out
    "forks",               # processes/threads created by the tracked tree
    "execs",               # execs by tracked processes (the launch itself included)
    "lost_events",         # events dropped because the ring buffer was full
    "file_ops",            # successful opens, unlinks, renames, mkdirs, truncates (FileEvent)
    "busy_ns",             # on-CPU time in stretches of >= BUSY_MIN_NS with no progress syscall
    "busy_stretches",      # how many such stretches
    "busy_max_ns",         # the longest on-CPU stretch without a progress syscall, once the
                           # tree had opened the source (a maximum)
    "source_mmaps",        # mmap() of a source descriptor: reads through it are not syscalls
    "leftover_tasks",      # tasks of the tree alive when the launched process ended
    "egress_lost",         # destinations the cgroup hooks' tables could not hold
    "busy_start_max_ns",   # the same before the source was opened: start-up (a maximum)
    "softirq_ns",          # softirqs the kernel ran on the tree's time (not in busy stretches)
    "switch_ins_missed",   # switches in of a tree's task that sched_switch did not report
                           # (its time then recovered from the scheduler's runtime)
    "iouring_bytes",       # bytes io_uring requests of the tree moved (also in read/write/...)
    "unattributed_bytes",  # bytes io_uring spliced from a registered (fixed) file: which file it
                           # was, the source or not, is not in the kernel's view of the request
    "source_mapped_bytes", # bytes of the source the tree's page faults mapped (reads through
                           # a mapping: one pass maps each page once)
    "own_read_bytes",      # bytes read back from places of its own (regular files on a tmpfs:
                           # its working directory, /tmp, memfds; pipes), by syscall or mapping
    "busy_start_ns",       # busy_ns before the source was opened (start-up), every task summed
    "launch_oncpu_ns",     # on-CPU time of evlab's launch chain in the client's cgroup (sh,
                           # prlimit, setpriv, bwrap and its child before the client's exec):
                           # the cgroup's CPU less the tree's and this is what no view explains
    "target_write_bytes",  # bytes written to files of the target's own filesystem (a task's
                           # outputs folder on a filesystem of its own), by any write path
    "target_read_bytes",   # bytes read from files of the target's filesystem
    "target_no_space",     # writes to the target's filesystem refused for want of space
    "elsewhere_write_bytes",  # with a target: bytes written to named regular files on none of
                           # the target's, source's or working directory's filesystems
    "target_write_maps",   # shared mappings of target files open for writing: stores through
                           # them are writes no syscall reports (not in target_write_bytes)
)

# Counters that are maxima, not sums: per-CPU values merge with max().
MAXIMA = ("busy_max_ns", "busy_start_max_ns")
# A syscall-free on-CPU stretch shorter than this is ordinary computation between syscalls.
BUSY_MIN_NS = 2_000_000


@dataclass(frozen=True)
class CounterSnapshot:
    """Live or final in-kernel totals for one invocation."""

    t_ns: int
    invocation: int
    counters: dict[str, int]               # name -> value, only for observed counters
    functions: dict[str, int] = field(default_factory=dict)   # symbol -> entry count
    syscalls_by_name: dict[str, int] = field(default_factory=dict)
    unobserved: tuple[str, ...] = ()       # counters this collector cannot see
    target_files: dict[int, int] = field(default_factory=dict)   # final: inode -> bytes
                                           # written to that target file


@dataclass(frozen=True)
class ConnectEvent:
    t_ns: int
    invocation: int
    pid: int
    tid: int
    comm: str
    family: str          # "AF_INET", "AF_INET6", "AF_UNIX", or the number
    address: str | None  # None for non-IP families
    port: int | None
    result: int          # 0, or -errno (e.g. -111 refused, -115 in progress)


@dataclass(frozen=True)
class ProcessEvent:
    t_ns: int
    invocation: int
    kind: str            # "exec", "fork", "exit"
    pid: int             # the process (tgid) concerned; for fork, the parent
    tid: int
    comm: str
    child_pid: int | None = None   # fork only
    filename: str | None = None    # exec only
    root: bool = False             # exit only: the process evlab launched


@dataclass(frozen=True)
class EgressEvent:
    """A destination the client's cgroup sent to, first sighting (per pid, call kind and
    destination), from the cgroup socket hooks: whatever syscall or io_uring path made it."""

    t_ns: int
    invocation: int
    pid: int
    kind: str            # "connect" or "sendmsg" (a datagram with its own destination)
    family: str          # "AF_INET" or "AF_INET6"
    protocol: str        # "tcp", "udp", "icmp", or the socket type/protocol numbers
    address: str
    port: int
    refused: bool        # --deny-egress refused it (EPERM)


@dataclass(frozen=True)
class EgressTotals:
    """The in-kernel aggregates of one invocation's egress, read when it ends."""

    calls: tuple[dict, ...]   # pid, kind, protocol, address, port, calls, refused, first/last_ns
    flows: tuple[dict, ...]   # protocol, address, port, packets, bytes, dropped, first/last_ns


MOVES = ("chdir", "fchdir", "dup")   # file events that change where paths lead, not a file


@dataclass(frozen=True)
class FileEvent:
    t_ns: int
    invocation: int
    pid: int
    tid: int
    comm: str
    op: str              # open, unlink, rmdir, rename, mkdir, truncate, chdir, fchdir, link,
                         # symlink, chmod, chown, utimes, setxattr, removexattr; by descriptor
                         # (on the source's files only): fchmod ... fallocate; dup: a
                         # folder's descriptor copied (bcc/abi.py)
    path: str            # as the process passed it (relative paths are relative to dfd)
    flags: int = 0       # open flags (O_WRONLY, O_CREAT, ...)
    dfd: int = -100      # AT_FDCWD, or the directory fd of an *at() call
    old_path: str | None = None    # rename, link: the old name; symlink: the link's text
    old_dfd: int = -100            # rename, link: the directory fd old_path is relative to
    fd: int | None = None          # open, dup: the descriptor it returned
    refused: int = 0               # not open: the errno the kernel refused the change with

    @property
    def writes(self) -> bool:
        """Does the operation change the file system (an open for writing counts, refused or
        not; any other change only when it was not refused)?"""
        if self.op in MOVES:
            return False
        if self.op != "open":
            return not self.refused
        return bool(self.flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND))


@dataclass(frozen=True)
class SignalEvent:
    """A signal of the tree's: sent (`target` set: one per process or thread it reached, from
    the kernel's signal_generate), or a call of the kill family as asked (`target` None)."""

    t_ns: int
    invocation: int
    pid: int             # the sender
    tid: int
    comm: str
    syscall: str         # kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo,
                         # pidfd_send_signal
    asked: int           # the pid as given: a pid, 0 (its own group), -pgid, -1 (every
                         # process it may signal); pidfd_send_signal: the pidfd
    asked_tid: int       # tgkill, rt_tgsigqueueinfo: the tid as given (else 0)
    signal: int          # the signal's number (0: a probe, nothing sent)
    result: int          # a call: 0 or -errno; sent: 0 delivered, 1 ignored, 2 already
                         # pending, 3 queue overflow, 4 delivered without its info
    target: int | None = None       # sent: the process reached (its tgid, the kernel's pid)
    target_tid: int | None = None
    target_comm: str = ""
    group: bool = False             # to the whole thread group
    own: bool = False               # the target is of the sender's own tree
    watch: int = 0                  # the target is watched: the watch's id (0: not watched)
    server: str = ""                # ... and the name the lab gave that watch


@dataclass(frozen=True)
class TruncateEvent:
    """A truncation by the tree: truncate, ftruncate, an open with O_TRUNC of an existing
    regular file, fallocate taking data away; and whether another process had the file open
    for writing as the call returned."""

    t_ns: int
    invocation: int
    pid: int
    tid: int
    comm: str
    how: str             # truncate, ftruncate, open, fallocate
    name: str            # the file's name (its last component); truncate: the path as given
    fd: int              # ftruncate, fallocate, open: the descriptor (-1: by path)
    length: int          # the new length (fallocate: the offset)
    length2: int         # fallocate: the range's length
    mode: int            # fallocate: its mode; open: its flags
    result: int          # 0 (open: the descriptor) or -errno
    inode: int | None    # the file, by inode and filesystem (None: by path, not reachable)
    dev: int | None
    writers: int | None  # i_writecount at the return: struct files open for writing on it
    own: int | None      # of those, the truncating process's own
    counted: bool        # its own were all counted (a descriptor table past the bound: no)

    @property
    def others_writing(self) -> bool | None:
        """Another process held it open for writing as the call returned (None: not known)."""
        if self.writers is None or self.own is None or not self.counted:
            return None
        return self.writers - self.own > 0


@dataclass(frozen=True)
class LifeEvent:
    """A process began (a watched process forked it) or ended (the tree's own, or watched),
    and, when a signal ended it, who sent that signal."""

    t_ns: int
    invocation: int
    kind: str            # started, exited
    pid: int
    comm: str
    own: bool            # the tree's own process (else a watched one)
    watch: int = 0
    server: str = ""
    parent: int = 0      # started: the process that forked it
    status: int | None = None       # exited: the wait status (exit code << 8, or the signal)
    signal: int = 0                 # exited: the signal that ended it (0: it exited itself)
    sender: int | None = None       # ... and its sender's tgid (None: not seen)
    sender_invocation: int = 0      # ... the sender's invocation (0: not of a tracked tree)
    code: int = 0                   # ... the signal's si_code (0x80: the kernel's own)


# what a collector's poll_events hands back, in the order the kernel reported them
KernelEvent = (ConnectEvent | ProcessEvent | FileEvent | EgressEvent | SignalEvent
               | TruncateEvent | LifeEvent)


class NoEgressView:
    """For collectors without the cgroup socket hooks: no egress is seen, and that is said."""

    def watch_cgroup(self, invocation, cgroup_dir, cgroup_id, allowed, deny, refused=()) -> bool:
        return False   # destination-only stays inconclusive without the socket layer's view

    def unwatch_cgroup(self, invocation) -> None:
        pass

    def egress(self, invocation) -> None:
        return None


class NoProcessWatch:
    """For collectors that cannot watch given processes (a server's): their starts, ends and
    the signals sent to them are not seen, and that is said (Capability "process-watch")."""

    def watch_processes(self, invocation, pids) -> bool:
        return False

    def unwatch_processes(self, invocation) -> None:
        pass
