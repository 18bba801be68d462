"""What one evlab process owns, found from the outside, so tests can check it is all gone after
that process ends — without being confused by other evlab runs on the same machine."""

import ctypes
import tempfile
import time
from pathlib import Path

import psutil

from probes.owned_tmp import OWNER_FILE, PREFIXES


def owned_dirs(pid: int) -> set[Path]:
    """evlab temp dirs whose owner record names pid."""
    found = set()
    for path in Path(tempfile.gettempdir()).iterdir():
        if path.name.startswith(PREFIXES):
            try:
                if int((path / OWNER_FILE).read_text().split()[0]) == pid:
                    found.add(path)
            except (OSError, ValueError, IndexError):
                pass
    return found


def prog_ids_held(pid: int) -> set[int]:
    """BPF program ids behind the process's open descriptors (from /proc/PID/fdinfo)."""
    ids = set()
    fdinfo = Path(f"/proc/{pid}/fdinfo")
    for entry in fdinfo.iterdir() if fdinfo.exists() else ():
        try:
            for line in entry.read_text().splitlines():
                if line.startswith("prog_id:"):
                    ids.add(int(line.split()[1]))
        except OSError:
            pass
    return ids


def loaded_prog_ids() -> set[int]:
    """Every BPF program loaded on the machine (BPF_PROG_GET_NEXT_ID)."""
    libc = ctypes.CDLL(None, use_errno=True)
    ids, current = set(), 0
    while True:
        attr = (ctypes.c_uint32 * 4)(current, 0, 0, 0)
        if libc.syscall(321, 11, attr, 16) != 0:
            return ids
        current = attr[1]
        ids.add(current)


def still_loaded(programs: set[int], seconds: float = 10.0) -> set[int]:
    """Those of the programs still loaded after up to `seconds` (an empty set when all are
    gone): the kernel frees a program a cgroup held once the cgroup's release work has run,
    after its holder exited, later on a busy machine."""
    deadline = time.monotonic() + seconds
    while (left := programs & loaded_prog_ids()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def processes_using(dirs: set[Path]) -> list[psutil.Process]:
    """Processes whose command line names one of these dirs (receivers, decoys, clients)."""
    names = [str(d) for d in dirs]
    return [p for p in psutil.process_iter(["cmdline"])
            if any(n in " ".join(p.info["cmdline"] or []) for n in names)]


def listening_ports(procs: list[psutil.Process]) -> set[int]:
    pids = {p.pid for p in procs}
    return {c.laddr.port for c in psutil.net_connections("inet")
            if c.status == psutil.CONN_LISTEN and c.pid in pids}


def wait_gone(dirs: set[Path], seconds: float = 5.0) -> list[psutil.Process]:
    """Processes still using the dirs after up to `seconds` (an empty list when all are gone)."""
    deadline = time.monotonic() + seconds
    while (procs := processes_using(dirs)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return procs



def cgroups_of(pid: int) -> set[Path]:
    """evlab client cgroups (every hierarchy) whose name says pid made them."""
    from probes.boundary.cgroup import PARENT, find_layout
    layout = find_layout()
    roots = ([layout.v2] if layout.v2 else []) + list(layout.v1.values())
    return {d for root in roots if (root / PARENT).is_dir()
            for d in (root / PARENT).iterdir() if d.name.startswith(f"{pid}-")}
