"""A process's own /proc entries, read as proc(5) lays them out.

    stat_fields(pid)[1]          # the parent's pid: field 4 of /proc/PID/stat
    status_fields(pid)["Tgid"]   # a line of /proc/PID/status, its name before the colon

Both raise OSError once the process is gone."""

from pathlib import Path


def stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat's fields after the command, from field 3 (the state) on: index k is
    proc(5)'s field k + 3. The command is between parentheses and may hold both, and spaces."""
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rindex(")") + 2:].split()


def status_fields(pid: int) -> dict[str, str]:
    """/proc/PID/status: {name: value}, the value stripped."""
    lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    return {name: value.strip() for name, _, value in (line.partition(":") for line in lines)}
