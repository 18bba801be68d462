"""Operations the kernel saw: the signals a client's tree sent, the truncations it made, and the
starts and ends of its own processes and of the servers' (sessions/stream/events.py is where
every event type is found). Who a target or a sender is (the client's own tree, a server by
name and role, or another process) was decided where the event was seen: the kernel knows which
processes were the tree's and which were watched at that moment, whatever their pids later
became."""

from dataclasses import dataclass

from sessions.stream.event import Event

OWN, SERVER, OTHER = "own", "server", "other"   # whose a process is
# the lab's harness records about them: the servers' processes an invocation watched, and
# operations past what it keeps of one (the operations clauses then judge nothing on it)
WATCHED, CAPPED = "servers_watched", "operations_capped"


@dataclass(frozen=True)
class SignalObserved(Event):
    """A signal of the client's tree: a call of the kill family as asked (`target` None), or
    a signal it sent, one per process (or thread) the kernel reached with it."""

    scenario: str
    invocation: int
    pid: int                        # the sender (the kernel's pid)
    syscall: str                    # kill, tkill, tgkill, rt_sigqueueinfo, rt_tgsigqueueinfo,
                                    # pidfd_send_signal
    asked: int                      # the pid as given: a pid, 0 (its own process group),
                                    # -pgid, -1 (every process it may signal); pidfd_send_signal:
                                    # the pidfd. In the client's pid namespace
    signal: int                     # its number (0: a probe, nothing sent)
    name: str                       # SIGHUP, SIGRTMIN+2, ...; "0" for a probe
    result: int                     # a call: 0 or -errno; sent: 0 delivered, 1 ignored,
                                    # 2 already pending, 3 queue overflow, 4 without its info
    target: int | None = None       # sent: the process reached (the kernel's pid)
    target_comm: str = ""
    whose: str = ""                 # sent: own, server or other
    server: str = ""                # whose == server: its name in the task
    role: str = ""                  # ... and its role
    group: bool = False             # to the whole thread group (else one thread)
    asked_tid: int = 0              # tgkill, rt_tgsigqueueinfo: the tid as given


@dataclass(frozen=True)
class TruncateObserved(Event):
    """A truncation by the client's tree (truncate, ftruncate, an open with O_TRUNC of an
    existing regular file, fallocate punching a hole or collapsing or zeroing a range), and
    whether another process had the file open for writing as the call returned."""

    scenario: str
    invocation: int
    pid: int
    how: str                        # truncate, ftruncate, open, fallocate
    name: str                       # the file's name (by path: the path as given)
    length: int                     # the new length (fallocate: the range's offset)
    result: int                     # 0 (open: the descriptor) or -errno: refused
    inode: int | None               # None: by path, its file not reachable at the return
    writers: int | None             # struct files open for writing on it (i_writecount)
    own: int | None                 # of those, the truncating process's own
    others_writing: bool | None     # another process held it open for writing (None: not
                                    # known; `why` says why)
    why: str = ""
    fd: int = -1
    length2: int = 0                # fallocate: the range's length
    mode: int = 0                   # fallocate: its mode; open: its flags


@dataclass(frozen=True)
class ProcessLife(Event):
    """A process of the client's tree ended, or a server's began or ended; when a signal ended
    it, who sent that signal."""

    scenario: str
    invocation: int
    kind: str                       # started, exited
    pid: int
    comm: str
    whose: str                      # own (the client's tree) or server
    server: str = ""
    role: str = ""
    parent: int = 0                 # started: the server process that forked it
    status: int | None = None       # exited: the wait status (exit code << 8, or the signal)
    signal: int = 0                 # exited: the signal that ended it (0: it exited itself)
    signal_name: str = ""
    sender: int | None = None       # ... its sender (None: by itself, or not seen)
    sender_whose: str = ""          # own (the client's tree), other, or kernel (the kernel's
                                    # own signal: a fault, the OOM killer, a namespace's end)

    @property
    def by_client(self) -> bool:
        """A signal the client's tree sent ended it."""
        return self.sender_whose == OWN
