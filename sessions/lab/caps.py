"""How much of one invocation's evidence evlab keeps: past these caps what a client floods (the
task's servers' or the proxy's records; captured segments) is counted, not kept, so
evlab's memory and time stay bounded whatever the client sends. What was dropped is on record
(a harness `evidence_capped` record), and the judge holds it against the client: a clause cannot
pass on evidence the client swamped (docs/grading.md, "A judge the client cannot swamp").
Kernel events and claims have their caps where they are read (sessions/lab/invocation.py)."""

import time
from collections import Counter

from sessions.stream.events import ServerRecord

# An honest invocation makes a few dozen records per server and a few hundred segments; these
# caps are 100x that and keep one flooded invocation's evidence to tens of MB.
# A task's server is capped by its role (task.toml: endpoint, decoy or internal).
CAPS = {"endpoint": 20_000, "internal": 20_000, "proxy": 20_000, "decoy": 2_000,
        "packets": 50_000, "files": 20_000, "lab": 100}


class Caps:
    def __init__(self):
        self.kept: Counter[str] = Counter()
        self.dropped: Counter[str] = Counter()
        self.limits: dict[str, int] = {}

    def take(self, what: str, kind: str | None = None) -> bool:
        """May one more of `what` (a server's name, or packets) be kept? Counted either way;
        kind: which of CAPS holds it (a server's role), else `what` itself."""
        limit = self.limits.setdefault(what, CAPS[kind or what])
        if self.kept[what] < limit:
            self.kept[what] += 1
            return True
        self.dropped[what] += 1
        return False

    def records(self, scenario: str, n: int) -> list[ServerRecord]:
        """What was dropped in invocation n, one record per kind of evidence."""
        return [ServerRecord(time.monotonic_ns(), scenario, n, "harness", "evidence_capped",
                             {"what": what, "kept": self.kept[what], "dropped": dropped,
                              "cap": self.limits[what]})
                for what, dropped in sorted(self.dropped.items())]
