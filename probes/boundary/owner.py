"""Names that say which evlab made them, so a run killed with SIGKILL has what it made (client
cgroups, lab networks) swept by the next one: `<pid>-<start time>-<name>`. Pids are reused,
start times (in 1/100 s, as the kernel keeps them) are not.

psutil is imported where it is used: `evlab doctor` imports this module (through its lab
network check) in interpreters that may lack it.
"""

import os


def owner_tag() -> str:
    import psutil
    return f"{os.getpid()}-{int(psutil.Process().create_time() * 100)}"


def owner_alive(name: str) -> bool:
    """Whether the evlab named at the start of `<pid>-<start>-...` still runs."""
    import psutil
    pid_text, _, rest = name.partition("-")
    started, _, _ = rest.partition("-")
    try:
        return int(psutil.Process(int(pid_text)).create_time() * 100) == int(started)
    except (ValueError, psutil.Error):
        return False
