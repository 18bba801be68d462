"""The one typed event stream: everything evlab observes, claims it records and judges it makes.

Every event is a frozen dataclass stamped with CLOCK_MONOTONIC nanoseconds (`t_ns`, the clock
bpf_ktime_get_ns() reads); `SessionStarted` carries the one wall-clock anchor. The stream gives
each event a sequence number (`seq`) when it is published; verdicts cite evidence by seq.

Events serialise to one JSON object per line with a `type` field (sessions/stream/codec.py).
"""

from dataclasses import dataclass, field

from sessions.stream import compat
from sessions.stream.event import Event

# The judge's own events, defined apart and found here with every other event type
from sessions.stream.judgements import (  # noqa: F401
    AttemptJudged,
    GateResult,
    RiskFinding,
    RiskScan,
    ScenarioJudged,
    Verdict,
)


@dataclass(frozen=True)
class SessionStarted(Event):
    wall_ns: int                    # time.time_ns() taken together with t_ns: the anchor
    evlab_version: str
    kernel: str
    collector: str                  # "bcc", "strace" or "none"
    packets: str                    # "on", "off" or "unavailable"
    contract_version: str
    scenarios: tuple[str, ...]
    cpu_pace: float = 1.0           # this machine's CPU time for the contract's reference work,
                                    # relative to the reference machine's (>= 1: the CPU
                                    # allowances scale by it; probes/pace.py)
    # The task judged (its folder: fixture/<id>/ or a user's), and its contract's clauses in
    # order. Empty in archives recorded before tasks were folders: those judged the default task.
    task_id: str = ""
    task_version: str = ""
    task_sha256: str = ""
    clauses: tuple[str, ...] = ()
    gates: tuple[str, ...] | None = None   # its grading attempts' gates (None: an old record's,
                                           # every gate)


@dataclass(frozen=True)
class CapabilityMissing(Event):
    name: str
    detail: str
    fix: str


@dataclass(frozen=True)
class StaleCleaned(Event):
    """Something a killed earlier run left behind, found and cleaned at start-up."""

    detail: str


@dataclass(frozen=True)
class SandboxSet(Event):
    """How every client of the session is confined (probes/boundary/sandbox.py), exactly."""

    enabled: bool
    summary: str                    # one line: user, namespaces, limits; or why there is none
    settings: dict                  # SandboxSettings as a dict (the archive's record)
    cgroups: str                    # the cgroup layout and where limits come from
    deny_egress: bool
    network: str = ""               # the lab network per attempt, or why it is the host's
    own_network: bool = False       # each attempt had a network of its own


@dataclass(frozen=True)
class ScenarioStarted(Event):
    scenario: str
    client_path: str
    client_sha256: str
    expected_failures: tuple[str, ...]
    expected_passes: tuple[str, ...]
    faults: tuple[dict, ...]        # armed faults (spec/scenario_faults.py), each with its id
    endpoint_port: int              # the endpoint's port (an old record's name: compat)
    decoy_port: int                 # the decoy's (0: the task has none)
    source_size: int
    scenario_file: str
    expected_invalid: bool = False  # declared: an armed fault cannot fire (attempt invalid)
    noise: tuple[str, ...] = ()     # ambient noise running during the scenario
    attempt: int = 0                # a grading attempt (1..N) of grade scenario `base`; 0: not
    base: str = ""
    client: str = ""                # a campaign's client (its name); "" outside a campaign
    network: str = ""               # the attempt's lab network (its name); "": the host's
    files_sha256: dict = field(default_factory=dict)   # the command's files, hashed as it began
    servers: dict = field(default_factory=dict)   # name -> {"role", "port"} (docs/tasks.md)
    display: dict = field(default_factory=dict)   # the task's: invocations, figures, marks

    @property
    def _old(self) -> bool:
        """Recorded before tasks said their servers (compat: an old archive's); a task with
        none (mirror) records its display."""
        return not self.servers and not self.display

    @property
    def roles(self) -> dict[str, str]:   # by name
        return ({n: str(s.get("role", "internal")) for n, s in self.servers.items()}
                if not self._old else dict(compat.OLD_SERVERS))

    @property
    def ports(self) -> dict[str, int | None]:   # by name (an old archive's: its two fields)
        return ({n: s.get("port") for n, s in self.servers.items()} if not self._old
                else compat.old_ports(self.endpoint_port, self.decoy_port))


@dataclass(frozen=True)
class GradeStarted(Event):
    """`evlab grade`: who is graded (identity) and how many attempts of which scenarios."""

    command: tuple[str, ...]        # the client's command line template, as given
    executable: str                 # the resolved executable behind the command
    sha256: str
    files: dict                     # other command-line arguments naming files -> sha256
    env: dict                       # the whole environment the client is given
    attempts: int
    scenarios: tuple[str, ...]      # grade scenario ids
    client: str = ""                # a campaign's client name
    shipped: dict = field(default_factory=dict)  # campaign: files shipped with it -> sha256


@dataclass(frozen=True)
class ClientLaunched(Event):
    scenario: str
    invocation: int
    pid: int
    argv: tuple[str, ...]
    cwd: str
    source: str                     # the watched input it was given ("": none)
    own_files: tuple[str, ...] = () # the command's own files (a script), which it may read
    outputs: str = ""               # the outputs folder its task gave it, which it may write
    scratch: tuple[str, ...] = ()   # its own places in the sandbox ("/tmp", "/dev/shm": each a
                                    # folder of its home, as its cwd is; "/run/service": an
                                    # operable service's folder; (): none, the host's /tmp and
                                    # /dev/shm are outside, an old record's too)
    read_only: tuple[str, ...] = () # what the sandbox shows read-only (its inputs, its program)
    inputs: str = ""                # the folder of the inputs its task gave it, to read ("": an
                                    # old record's)
    tools: tuple[str, ...] = ()     # the programs its task's protocol has it run (client.tools),
                                    # as paths on its PATH at launch: starting one is no finding

    def in_scratch(self, path: str) -> bool:
        """path is in one of its own places (its /tmp, its /dev/shm): under it, and not under
        what the sandbox shows there read-only (evlab's client homes are in the host's /tmp:
        its inputs, a program; a program may be in /dev/shm)."""
        def under(p: str, d: str) -> bool:
            return p == d or p.startswith(d.rstrip("/") + "/")
        return any(under(path, place) for place in self.scratch) and not any(
            under(path, shown) for shown in self.read_only)


@dataclass(frozen=True)
class PhaseChanged(Event):
    scenario: str
    phase: str                      # setup, invocation, verify, lifecycle, judging, teardown,
                                    # done (an old record: durability, restore for lifecycle)
    invocation: int = 0


@dataclass(frozen=True)
class CounterSample(Event):
    scenario: str
    invocation: int
    counters: dict[str, int]        # only counters the collector observed
    functions: dict[str, int]       # symbol -> entries, only symbols with a probe attached
    unobserved: tuple[str, ...]
    final: bool = False
    overhead: dict = field(default_factory=dict)
    target_files: dict[str, int] = field(default_factory=dict)   # final: bytes written to each
                                    # file of the target by the invocation, by inode (the key)


@dataclass(frozen=True)
class ConnectObserved(Event):
    scenario: str
    invocation: int
    pid: int
    family: str
    address: str | None
    port: int | None
    result: int


@dataclass(frozen=True)
class ProcessObserved(Event):
    scenario: str
    invocation: int
    kind: str                       # exec, fork, exit
    pid: int
    child_pid: int | None = None
    filename: str | None = None


@dataclass(frozen=True)
class FileObserved(Event):
    """A file-system operation of the client's tree, from the kernel (grading attempts)."""

    scenario: str
    invocation: int
    pid: int
    op: str                         # open, unlink, rmdir, rename, mkdir, truncate, link,
                                    # symlink, (f)chdir
    path: str                       # as the process passed it
    writes: bool                    # changes the file system (an open for writing counts)
    dfd: int = -100                 # AT_FDCWD (-100), or the directory fd of an *at() call
    old_path: str | None = None     # rename, link: the old name; symlink: the link's text
    old_dfd: int = -100             # rename, link: the directory fd old_path is relative to
    fd: int | None = None           # open only: the descriptor it returned


@dataclass(frozen=True)
class CleanupObserved(Event):
    """What an invocation left behind once it had exited (grading attempts)."""

    scenario: str
    invocation: int
    leftover: tuple[str, ...]       # "pid command" of processes of its tree still running
    listening: tuple[str, ...]      # "address:port (pid)" sockets those processes listen on
    cwd_files: tuple[str, ...]      # files left in its working directory
    store_files: tuple[str, ...]    # files in the servers' state (residue_dir) beyond residue_keep
    kernel_view: bool               # leftovers seen by the kernel (else: session scan only)
    left_at_exit: tuple[str, ...] = ()  # "pid comm" still running when the launched process
                                        # ended (the sandbox's pid namespace then killed them)


@dataclass(frozen=True)
class BoundaryObserved(Event):
    """The invocation's cgroup when it ended: the whole tree's CPU (exited children included),
    its memory peak, the limits it hit, tasks still in it, whether the egress hooks watched."""

    scenario: str
    invocation: int
    cpu_ns: int | None
    memory_peak: int | None
    limit_hits: dict                # "memory": OOM kills, "pids": forks refused
    tasks_left: int
    egress_watched: bool


@dataclass(frozen=True)
class EgressObserved(Event):
    """A destination a socket of the client's cgroup used (first sighting per pid and kind),
    seen at the socket layer whatever syscall or io_uring path produced it."""

    scenario: str
    invocation: int
    pid: int
    kind: str                       # connect, or sendmsg (a datagram with its own destination)
    family: str
    protocol: str                   # tcp, udp, ...
    address: str
    port: int
    refused: bool                   # --deny-egress refused it (EPERM)


@dataclass(frozen=True)
class EgressSummary(Event):
    """The kernel's per-destination totals for an invocation: socket calls and packets."""

    scenario: str
    invocation: int
    calls: tuple[dict, ...]         # pid kind protocol address port calls refused first/last_ns
    flows: tuple[dict, ...]         # protocol address port packets bytes dropped first/last_ns


@dataclass(frozen=True)
class LifecycleCheck(Event):
    """A check of the task's lifecycle program, run after a grading attempt's invocations."""

    scenario: str
    check: str                      # e.g. durability, restore (the gate of that name reads it)
    ok: bool
    detail: str
    fields: dict


@dataclass(frozen=True)
class PacketSeen(Event):
    scenario: str
    invocation: int
    src: str
    sport: int
    dst: str
    dport: int
    flags: str
    payload_len: int
    tcp_seq: int = -1    # the segment's TCP sequence number (-1: not recorded: an older archive)


@dataclass(frozen=True)
class PacketStats(Event):
    scenario: str
    invocation: int
    kept: int
    dropped_by_kernel: int
    pcap: str                       # file name inside the session (archive member)
    error: str = ""                 # why the capture stopped early: the wire view is partial


@dataclass(frozen=True)
class ServerRecord(Event):
    """A record from one of the task's servers, the fault proxy or evlab's harness, as it was
    written (its own t_ns)."""

    scenario: str
    invocation: int
    server: str                     # its name in the task, "proxy" or "harness"
    event: str
    fields: dict


@dataclass(frozen=True)
class ClientClaim(Event):
    scenario: str
    invocation: int
    claim: dict                     # the JSON line the client printed, or {"unparsed": text}


@dataclass(frozen=True)
class ClientExited(Event):
    scenario: str
    invocation: int
    exit_code: int | None           # None when it had to be killed
    timed_out: bool
    wall_ns: int
    rusage_cpu_ns: int | None       # wait4 of the launched process (strace's own when traced)
    timeout_s: float | None = None  # the timeout it was given (None: an archive from before)


@dataclass(frozen=True)
class ProcessMetrics(Event):
    scenario: str
    invocation: int
    role: str                       # "client" or a server's name
    pid: int
    cpu_s: float
    rss_bytes: int
    ctx_switches: int
    open_fds: int | None
    children: int


@dataclass(frozen=True)
class VerifierResult(Event):
    """The task's verifier on the end state: match is its ok, detail its one line, fields the
    rest of what it printed (its figures; an old record's own fields: compat)."""

    scenario: str
    invocation: int                 # 0: the state before the first invocation
    match: bool
    detail: str = ""
    fields: dict = field(default_factory=dict)

    @property
    def described(self) -> str:   # what it found, in one line
        return self.detail or f"the verifier said {'ok' if self.match else 'not ok'}"


@dataclass(frozen=True)
class SessionEnded(Event):
    partial: bool
    reason: str                     # "complete", "interrupted: SIGTERM", "error: ..."


# The kernel's operations, defined apart and found here with every other event type
from sessions.stream.operations import (  # noqa: E402, F401
    ProcessLife,
    SignalObserved,
    TruncateObserved,
)

# What the verdict engine derives from the observations: never replayed, judged again
DERIVED = (Verdict, ScenarioJudged, GateResult, RiskFinding, RiskScan, AttemptJudged)
