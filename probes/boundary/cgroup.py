"""The client's own cgroup: the boundary of everything one invocation started.

    layout = find_layout()                       # v2-only, hybrid (v2 + v1 controllers) or none
    cg = ClientCgroup.create(layout, "inv-3", Limits(memory_bytes=512 << 20, pids=256))
    argv = cg.join_argv() + client_argv          # the launched process joins before it execs
    cg.cpu_ns(); cg.census(); cg.kill(); cg.remove()

A process that leaves its session (setsid, a double fork) is still in its cgroup, so the cgroup
is what evlab counts, limits and kills. The v2 hierarchy gives the cgroup id that evlab's BPF
programs attach to and filter on, and the whole tree's CPU (`cpu.stat`, exited children
included). On a hybrid machine the v2 hierarchy has no controllers: memory and pids limits come
from the v1 `memory` and `pids` hierarchies, in a cgroup of the same name.

Names carry their owner (`<pid>-<start time>-<name>`), so a run killed with SIGKILL has its
cgroups swept by the next one (`sweep_stale`).
"""

import errno
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path

from probes.boundary.owner import owner_alive, owner_tag
from probes.capability import Capability

PARENT = "evlab"          # every client cgroup lives under <hierarchy>/evlab/
V1_LIMITS = ("memory", "pids")


@dataclass(frozen=True)
class Layout:
    kind: str                                  # "v2", "hybrid" or "none"
    v2: Path | None                            # the cgroup2 mount
    v1: dict[str, Path] = field(default_factory=dict)   # controller -> its v1 mount
    controllers: tuple[str, ...] = ()          # v2 controllers available at the v2 root

    def limits_from(self, controller: str) -> str | None:
        """Where a controller's limit is set: "v2", "v1" or None (unavailable)."""
        if controller in self.controllers:
            return "v2"
        return "v1" if controller in self.v1 else None

    def capability(self) -> Capability | None:
        if self.v2 is None:
            return Capability("cgroup-v2", False,
                              "no cgroup v2 hierarchy is mounted: no client cgroup, no egress "
                              "hooks, no whole-tree CPU accounting",
                              "mount -t cgroup2 none /sys/fs/cgroup/unified (make setup)")
        if os.geteuid() != 0 or not os.access(self.v2, os.W_OK):
            return Capability("cgroup-v2", False, f"cannot create cgroups under {self.v2}",
                              "run evlab as root")
        return None

    def describe(self) -> str:
        if self.v2 is None:
            return "no cgroup v2"
        limits = ", ".join(f"{c} ({self.limits_from(c) or 'unavailable'})" for c in V1_LIMITS)
        return f"{self.kind}: v2 at {self.v2}; limits: {limits}"


def find_layout(mounts: str | None = None) -> Layout:
    """The cgroup hierarchies mounted here (from /proc/self/mounts)."""
    if mounts is None:
        try:
            mounts = Path("/proc/self/mounts").read_text()
        except OSError:
            mounts = ""
    v2: Path | None = None
    v1: dict[str, Path] = {}
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 4:
            continue
        path, fstype, options = Path(parts[1]), parts[2], parts[3].split(",")
        if fstype == "cgroup2" and v2 is None:
            v2 = path
        elif fstype == "cgroup":
            for controller in V1_LIMITS:
                if controller in options:
                    v1.setdefault(controller, path)
    if v2 is None:
        return Layout("none", None, v1)
    try:
        controllers = tuple((v2 / "cgroup.controllers").read_text().split())
    except OSError:
        controllers = ()
    kind = "v2" if not v1 else "hybrid"
    return Layout(kind, v2, {c: p for c, p in v1.items() if c not in controllers}, controllers)


@dataclass(frozen=True)
class Limits:
    memory_bytes: int | None = None
    pids: int | None = None


def _write(path: Path, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except OSError:
        return None


def _keyed(text: str | None) -> dict[str, int]:
    out = {}
    for line in (text or "").splitlines():
        key, _, value = line.partition(" ")
        if value.strip().lstrip("-").isdigit():
            out[key] = int(value)
    return out


def _shared_dir(path: Path) -> None:
    """A parent evlab's cgroups share, made if missing. Another evlab removes it as its last
    child goes, even between mkdir's "it exists" and a look at it: said as the parent gone
    (FileNotFoundError), which create() tries again, not as pathlib's FileExistsError."""
    try:
        path.mkdir()
    except FileExistsError:
        if not path.is_dir():
            raise FileNotFoundError(errno.ENOENT, "removed while being made", str(path)) \
                from None


class ClientCgroup:
    def __init__(self, layout: Layout, dirs: dict[str, Path], limits: Limits):
        self.layout = layout
        self.dirs = dirs                 # "v2" and any v1 controller -> its directory
        self.limits = limits

    @classmethod
    def create(cls, layout: Layout, name: str, limits: Limits = Limits()) -> "ClientCgroup":
        if layout.v2 is None:
            raise OSError("no cgroup v2 hierarchy")
        dirs = {"v2": layout.v2 / PARENT / f"{owner_tag()}-{name}"}
        for controller in V1_LIMITS:
            if layout.limits_from(controller) == "v1":
                dirs[controller] = layout.v1[controller] / PARENT / dirs["v2"].name
        self = cls(layout, dirs, limits)
        for tries_left in (2, 1, 0):
            try:
                self._make(limits)
                break
            except FileNotFoundError:
                # Another evlab on this machine (a campaign's second node, a test beside) removed
                # the shared parent as its last child went, between our mkdir of it and of ours.
                self.remove()
                if not tries_left:
                    raise
            except OSError:
                self.remove()
                raise
        return self

    def _make(self, limits: Limits) -> None:
        v2 = self.layout.v2
        assert v2 is not None  # create() refuses a layout without a v2 hierarchy
        parent = v2 / PARENT
        _shared_dir(parent)
        wanted = [c for c in V1_LIMITS if c in self.layout.controllers]
        if wanted:  # v2 controllers must be enabled down the path to the client's cgroup
            for where in (v2, parent):
                _write(where / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))
        for d in self.dirs.values():
            _shared_dir(d.parent)
            d.mkdir()
        self._apply(limits)

    def _apply(self, limits: Limits) -> None:
        if limits.memory_bytes is not None:
            if "memory" in self.dirs:
                _write(self.dirs["memory"] / "memory.limit_in_bytes", str(limits.memory_bytes))
            else:
                _write(self.dirs["v2"] / "memory.max", str(limits.memory_bytes))
                if (self.dirs["v2"] / "memory.swap.max").exists():
                    _write(self.dirs["v2"] / "memory.swap.max", "0")
        if limits.pids is not None:
            where = self.dirs.get("pids", self.dirs["v2"])
            _write(where / "pids.max", str(limits.pids))

    # --- joining ---------------------------------------------------------------------------
    @property
    def id(self) -> int:
        """The v2 cgroup id (its directory's inode), as bpf_get_current_cgroup_id() gives it."""
        return os.stat(self.dirs["v2"]).st_ino

    def procs_files(self) -> list[Path]:
        return [d / "cgroup.procs" for d in self.dirs.values()]

    def join_argv(self) -> list[str]:
        """A prefix that moves the launched process into this cgroup before it execs the rest
        (so nothing it runs is ever outside): POSIX sh, one write per hierarchy."""
        script = ('while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; '
                  'shift; exec "$@"')
        return ["/bin/sh", "-c", script, "evlab-join", *map(str, self.procs_files()), "--"]

    # --- accounting ------------------------------------------------------------------------
    def cpu_ns(self) -> int | None:
        """CPU of everything that ran in the cgroup, exited processes included."""
        usage = _keyed(_read(self.dirs["v2"] / "cpu.stat")).get("usage_usec")
        return usage * 1000 if usage is not None else None

    def memory_peak(self) -> int | None:
        if "memory" in self.dirs:
            value = _read(self.dirs["memory"] / "memory.max_usage_in_bytes")
        else:
            value = _read(self.dirs["v2"] / "memory.peak")
        return int(value) if value and value.strip().isdigit() else None

    def limit_hits(self) -> dict[str, int]:
        """How often each limit stopped the client: OOM kills, refused forks."""
        hits = {}
        if self.limits.memory_bytes is not None:
            if "memory" in self.dirs:
                hits["memory"] = _keyed(_read(self.dirs["memory"] / "memory.oom_control")
                                        ).get("oom_kill", 0)
            else:
                hits["memory"] = _keyed(_read(self.dirs["v2"] / "memory.events")
                                        ).get("oom_kill", 0)
        if self.limits.pids is not None:
            where = self.dirs.get("pids", self.dirs["v2"])
            hits["pids"] = _keyed(_read(where / "pids.events")).get("max", 0)
        return hits

    def census(self) -> list[int]:
        """Every task (thread) still in the cgroup, in any hierarchy: a zombie leader's live
        threads included."""
        tids = set()
        for d in self.dirs.values():
            for name in ("cgroup.threads", "tasks"):
                text = _read(d / name)
                if text is not None:
                    tids |= {int(t) for t in text.split()}
                    break
        return sorted(tids)

    def populated(self) -> bool:
        events = _keyed(_read(self.dirs["v2"] / "cgroup.events"))
        if "populated" in events:
            return bool(events["populated"])
        return bool(self.census())

    # --- ending ----------------------------------------------------------------------------
    def kill(self, timeout_s: float = 2.0) -> bool:
        """SIGKILL everything in the cgroup (cgroup.kill where the kernel has it, else rounds
        of a census) and wait until it is empty. True when it is."""
        deadline = time.monotonic() + timeout_s
        kill_file = self.dirs["v2"] / "cgroup.kill"
        while self.populated():
            if kill_file.exists():
                try:
                    _write(kill_file, "1")
                except OSError:
                    pass
            else:
                for tid in self.census():
                    try:
                        os.kill(tid, signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass
            if time.monotonic() > deadline:
                return False
            time.sleep(0.005)
        return True

    def remove(self) -> None:
        self.kill()
        for d in self.dirs.values():
            for _ in range(100):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.01)   # the last task is still being reaped


def remove_parents(layout: Layout) -> None:
    """Remove the shared evlab/ parents once empty (another evlab's children keep them)."""
    for root in ([layout.v2] if layout.v2 else []) + list(layout.v1.values()):
        try:
            (root / PARENT).rmdir()
        except OSError:
            pass


def sweep_stale(layout: Layout | None = None) -> list[str]:
    """Kill and remove client cgroups whose evlab is gone (killed with SIGKILL)."""
    layout = layout or find_layout()
    roots = ([layout.v2] if layout.v2 else []) + [layout.v1[c] for c in layout.v1]
    cleaned = []
    for root in roots:
        parent = root / PARENT
        try:
            children = sorted(p for p in parent.iterdir() if p.is_dir())
        except OSError:
            continue
        for d in children:
            if owner_alive(d.name):
                continue
            cg = ClientCgroup(layout, {"v2": d}, Limits())   # v1: census and kill by tasks
            left = cg.census()
            cg.remove()
            cleaned.append(f"removed stale cgroup {d}"
                           + (f" (killed {len(left)} task(s) left running)" if left else ""))
    return cleaned
