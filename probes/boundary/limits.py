"""The sandbox's limits, with their defaults: data only, so the command line can offer them
without importing the sandbox."""

from dataclasses import dataclass


@dataclass(frozen=True)
class SandboxLimits:
    memory_bytes: int = 512 << 20     # the cgroup's memory (tmpfs pages it writes included)
    pids: int = 256                   # tasks alive at once in the cgroup
    cpu_s: int = 60                   # RLIMIT_CPU per process (SIGKILL at the limit)
    open_files: int = 1024            # RLIMIT_NOFILE
    disk_bytes: int = 256 << 20       # the working directory's tmpfs

    def describe(self) -> str:
        return (f"memory {self.memory_bytes >> 20} MiB, {self.pids} tasks, {self.cpu_s} CPU-s "
                f"per process, {self.open_files} open files, disk {self.disk_bytes >> 20} MiB")
