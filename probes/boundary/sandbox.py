"""The sandbox every client runs in: judge and judged never share a room.

    box = Sandbox.open(Limits(...))             # None + a Capability when it cannot be built
    home = box.make_home(path)                  # a size-limited tmpfs for its files
    scratch = {"/tmp": box.workdir(home / "run-1.tmp"),        # its own /tmp and /dev/shm
               "/dev/shm": box.workdir(home / "run-1.shm")}    # (folders of the home)
    argv = box.wrap(client_argv, cwd=..., source_dir=..., programs=[...], scratch=scratch)

The launched chain is `sh` (joins the client's cgroup, see probes/boundary/cgroup.py) -> `prlimit`
(open files, CPU seconds, no core dumps) -> `setpriv` (the unprivileged user made by
`make setup`, no groups, no_new_privs) -> `bwrap` (Debian's bubblewrap, run unprivileged: a
user namespace with further user namespaces disabled, its own PID, IPC, UTS and cgroup
namespaces, every capability dropped, a new session) -> the client. In its mount namespace the
client sees the system's read-only directories, its program files read-only, its source
directory read-only, its working directory and a /tmp and a /dev/shm of its own (SCRATCH): a
folder of its home bound at each (`scratch`), so what it keeps there (a runtime's semaphores and
shared memory in /dev/shm too) is on its working directory's filesystem, within its disk limit,
and judged as its working directory is — nothing of evlab's (session directory, store, records,
fault files, outputs) exists there. Its root and the rest of /dev are bubblewrap's own tmpfs:
writable, private, and outside. bwrap resolves its binds as the sandbox user, so
the program's files are first bind-mounted by root into the client's own (searchable) home
(`stage`): a client in a directory only root may enter (a checkout under /root) still runs,
at its own path. Only the files themselves must be readable by others (`unreadable`).

The network namespace is the host's: the task's servers listen on its loopback. What the client may
contact is watched and (with --deny-egress) enforced by the cgroup hooks
(probes/bcc/collector.bpf.c).
The client is its PID namespace's init: when it ends, the kernel kills whatever it left there;
the kernel's view of the tree records what that was (leftover_tasks, exit events).

With an operable service (`service=`, issue 46) the chain is started inside the lab's service
pid namespace (probes/boundary/servicens.py, whose prefix gives it a /proc of that namespace) and
bwrap makes no pid namespace of its own (no --unshare-pid, no --as-pid-1): the client and the
service, each in a bubblewrap user namespace of its own (so neither can ptrace the other), see
and signal each other's processes there, and the service's folder (its config, pid file, logs)
is bound read-write at the same path in both (SERVICE_DIR). The client is then not its
namespace's init: what it leaves is killed with its cgroup at the end of each invocation.
"""

import ctypes
import os
import pwd
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from probes.boundary.limits import SandboxLimits
from probes.capability import Capability

USER = "evlab-client"
SYSTEM_DIRS = ("/usr", "/etc", "/opt")
MERGED = ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32")   # symlinks into /usr (or dirs)
SCRATCH = ("/tmp", "/dev/shm")   # the client's own places: each a folder of its home, if given
SERVICE_DIR = "/run/service"     # an operable service's folder, where it and the client see it


def service_folder(client_home: Path) -> Path:
    """Where an operable service's folder is on the host, in the scenario's client home."""
    return client_home / "service"


@dataclass(frozen=True)
class SandboxSettings:
    """Exactly how a client was confined: recorded in the session's events and archive."""

    enabled: bool
    user: str = ""
    uid: int = 0
    gid: int = 0
    bwrap: str = ""
    namespaces: tuple[str, ...] = ()
    limits: dict | None = None
    why_not: str = ""                 # enabled=False: the reason (--no-sandbox, unavailable)

    def describe(self) -> str:
        if not self.enabled:
            return f"no sandbox ({self.why_not})"
        assert self.limits is not None  # Sandbox.settings() records an enabled sandbox's limits
        return (f"bubblewrap as {self.user} (uid {self.uid}), namespaces "
                f"{'+'.join(self.namespaces)}, no capabilities, no_new_privs; "
                + SandboxLimits(**self.limits).describe())


NAMESPACES = ("user", "pid", "ipc", "uts", "cgroup", "mount")
SHARED_PID = "pid (the operable service's, shared)"
# --as-pid-1: the client is its pid namespace's init, so there is no reaper of bwrap's inside
# for it to ptrace or stop (the namespace ends, killing what it left, when the client ends).
_BWRAP_NS = ("--unshare-user", "--disable-userns", "--unshare-pid", "--as-pid-1",
             "--unshare-ipc", "--unshare-uts", "--unshare-cgroup")
# in an operable service's pid namespace (servicens.py): that namespace, not one of bwrap's
_BWRAP_NS_SERVICE = tuple(f for f in _BWRAP_NS if f not in ("--unshare-pid", "--as-pid-1"))


class Sandbox:
    def __init__(self, bwrap: str, user: pwd.struct_passwd, limits: SandboxLimits):
        self.bwrap = bwrap
        self.user = user
        self.limits = limits

    @classmethod
    def open(cls, limits: SandboxLimits = SandboxLimits()  # noqa: B008 - frozen
             ) -> tuple["Sandbox | None", Capability | None]:
        """The sandbox, or why it cannot be built here (and the fix)."""
        bwrap = shutil.which("bwrap")
        if os.geteuid() != 0:
            return None, Capability("sandbox", False, "the sandbox needs root (to make the "
                                    "client's cgroup and tmpfs and drop to its user)",
                                    "run evlab as root")
        if bwrap is None:
            return None, Capability("sandbox", False, "bubblewrap (bwrap) is not installed",
                                    "apt-get install bubblewrap (make setup)")
        for tool in ("setpriv", "prlimit"):
            if shutil.which(tool) is None:
                return None, Capability("sandbox", False, f"{tool} is not installed",
                                        "apt-get install util-linux (make setup)")
        try:
            user = pwd.getpwnam(USER)
        except KeyError:
            return None, Capability("sandbox", False, f"the sandbox user {USER} does not exist",
                                    "make setup (creates it)")
        box = cls(bwrap, user, limits)
        problem = box._probe()
        if problem:
            return None, Capability("sandbox", False, f"bubblewrap cannot build the sandbox "
                                    f"here: {problem}",
                                    "enable unprivileged user namespaces "
                                    "(sysctl user.max_user_namespaces=10000)")
        return box, None

    def _probe(self) -> str:
        try:
            done = subprocess.run(self.wrap(["/bin/true"], cwd=None), capture_output=True,
                                  timeout=10)
        except (OSError, subprocess.TimeoutExpired) as e:
            return str(e)
        return "" if done.returncode == 0 else (done.stderr.decode(errors="replace").strip()
                                                 or f"exit {done.returncode}")

    def settings(self, service: bool = False) -> SandboxSettings:
        """service: the clients run in an operable service's pid namespace, not one of their own."""
        spaces = tuple(SHARED_PID if n == "pid" and service else n for n in NAMESPACES)
        return SandboxSettings(True, USER, self.user.pw_uid, self.user.pw_gid, self.bwrap,
                               spaces, asdict(self.limits))

    # --- the client's files ----------------------------------------------------------------
    def make_home(self, path: Path) -> Path:
        """A tmpfs of the disk limit at path (its pages count against the cgroup's memory too),
        root-owned; working directories in it are given to the sandbox user by `workdir`."""
        path.mkdir(mode=0o755)
        _mount("evlab-client", path, "tmpfs", MS_NOSUID | MS_NODEV,
               f"size={self.limits.disk_bytes},mode=0755")
        return path

    def workdir(self, path: Path) -> Path:
        path.mkdir(mode=0o700)
        os.chown(path, self.user.pw_uid, self.user.pw_gid)
        return path

    # --- launching ---------------------------------------------------------------------------
    def wrap(self, argv: list[str], cwd: Path | None, source_dir: Path | None = None,
             programs: Iterable[tuple[Path, Path]] = (),
             outputs: Path | None = None,
             scratch: Mapping[str, Path] | None = None,
             service: Path | None = None) -> list[str]:
        """The launch chain for argv; outputs: a folder the client writes, kept between its
        invocations (a workdir of the home); scratch: a workdir of the home shown at each of
        SCRATCH it names (without: /tmp an empty tmpfs of bubblewrap's, /dev/shm its /dev's);
        service: an operable service's folder, bound read-write at SERVICE_DIR, and no pid
        namespace of bwrap's (the chain is started in the service's, by ServiceNamespace.argv())."""
        lim = self.limits
        box = [self.bwrap, *(_BWRAP_NS if service is None else _BWRAP_NS_SERVICE),
               "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
        for d in SYSTEM_DIRS:
            if os.path.isdir(d):
                box += ["--ro-bind", d, d]
        for d in MERGED:
            if os.path.islink(d):
                box += ["--symlink", os.readlink(d), d]
            elif os.path.isdir(d):
                box += ["--ro-bind", d, d]
        box += ["--proc", "/proc", "--dev", "/dev"]
        scratch = scratch or {}
        if "/tmp" not in scratch:
            box += ["--tmpfs", "/tmp"]
        for place in (p for p in SCRATCH if p in scratch):   # /dev/shm: over its /dev's, after
            box += ["--bind", str(scratch[place]), place]

        for staged, original in programs:
            box += ["--ro-bind", str(staged), str(original)]
        if source_dir is not None:
            box += ["--ro-bind", str(source_dir), str(source_dir)]
        if outputs is not None:
            box += ["--bind", str(outputs), str(outputs)]
        if service is not None:
            box += ["--bind", str(service), SERVICE_DIR]
        if cwd is not None:
            box += ["--bind", str(cwd), str(cwd), "--chdir", str(cwd)]
        chain = ["prlimit", f"--nofile={lim.open_files}", f"--cpu={lim.cpu_s}", "--core=0", "--",
                 "setpriv", f"--reuid={self.user.pw_uid}", f"--regid={self.user.pw_gid}",
                 "--clear-groups", "--no-new-privs", "--inh-caps=-all", "--bounding-set=-all",
                 "--"]
        return [*chain, *box, "--", *argv]

    def unreadable(self, paths) -> str | None:
        """The first program file the sandbox user may not read (or directory it may not
        search), or None: only the files' own modes matter (see `stage`)."""
        for path in map(Path, paths):
            if _is_system(path):
                continue
            try:
                mode = path.stat().st_mode
            except OSError as e:
                return f"{path}: {e.strerror}"
            need, fix = (0o005, "o+rx") if path.is_dir() else (0o004, "o+r")
            if mode & need != need:
                return f"{path} is not readable by the sandbox user {USER} (chmod {fix})"
        return None

    @staticmethod
    def stage(paths, under: Path) -> list[tuple[Path, Path]]:
        """Bind-mount the program's files (as root) under `under`, which the sandbox user can
        search: (staged, original) pairs for `wrap`. Unmounted with the home (unmount_under)."""
        pairs = []
        for i, path in enumerate(_outside_system(paths)):
            staged = under / "program" / str(i)
            staged.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            if path.is_dir():
                staged.mkdir()
            else:
                staged.touch()
            _mount(str(path), staged, None, MS_BIND)
            pairs.append((staged, path))
        return pairs


def _is_system(path: Path) -> bool:
    return any(path == Path(d) or Path(d) in path.parents for d in SYSTEM_DIRS + MERGED)


def _outside_system(paths) -> list[Path]:
    """The program's own files and directories that the system binds do not already show,
    outermost first, without duplicates or paths inside one another."""
    out: list[Path] = []
    for p in sorted({Path(os.path.abspath(p)) for p in paths}, key=lambda p: len(p.parts)):
        if _is_system(p):
            continue
        if any(p == o or o in p.parents for o in out):
            continue
        if p.exists():
            out.append(p)
    return out


# mount(2) and umount2(2) directly: a fork of evlab (large, with BCC loaded) per mount would
# cost more than the mount, and briefly doubles what the process tree appears to use.
_libc = ctypes.CDLL(None, use_errno=True)
MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MNT_DETACH = 0x2, 0x4, 0x20, 0x1000, 0x2


def _mount(source: str, target: Path, fstype: str | None, flags: int, data: str = "") -> None:
    if _libc.mount(os.fsencode(source), os.fsencode(target),
                   fstype.encode() if fstype else None, flags, data.encode() or None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {source} on {target}: {os.strerror(err)}")


def mount_tmpfs(path: Path, size_bytes: int, mode: int = 0o755) -> Path:
    """A tmpfs of its own at path (made): a filesystem the kernel tells apart by its device
    (a task's target, its source tree), full past size_bytes. unmount_under removes it."""
    path.mkdir(mode=mode, exist_ok=True)
    _mount("evlab-client", path, "tmpfs", MS_NOSUID | MS_NODEV,
           f"size={size_bytes},mode={mode:o}")
    return path


def remount_size(path: Path, size_bytes: int) -> None:
    """A tmpfs of mount_tmpfs's given another size: full past it (a fault), or healed."""
    _mount("evlab-client", path, None, MS_REMOUNT | MS_NOSUID | MS_NODEV, f"size={size_bytes}")


def unmount_under(root: Path) -> None:
    """Unmount any tmpfs evlab mounted under root (a client home), innermost first."""
    try:
        mounts = [line.split()[1] for line in Path("/proc/self/mounts").read_text().splitlines()]
    except OSError:
        return
    prefix = str(root).rstrip("/") + "/"
    for mount in sorted((m for m in mounts if m == str(root) or m.startswith(prefix)),
                        key=len, reverse=True):
        if _libc.umount2(os.fsencode(mount), MNT_DETACH) != 0:
            pass   # already gone: a concurrent sweep, or it was never mounted
