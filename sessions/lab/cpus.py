"""How many labs run at once by default (`--jobs`); light to import, as the `evlab` command
asks before it imports the rest (sessions/cli/entry.py)."""

import os


def default_jobs() -> int:
    """One lab per two CPUs this process may use: a scenario's lab (collector, servers,
    capture) and its client each want one at their peak."""
    return max(1, len(os.sched_getaffinity(0)) // 2)
