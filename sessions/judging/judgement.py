"""A judgement of one clause or gate: status, reason, the events that decided it."""

import re
from dataclasses import dataclass

PASS, FAIL, INCONCLUSIVE, NA = "pass", "fail", "inconclusive", "not-applicable"


@dataclass(frozen=True)
class Judgement:
    status: str
    reason: str
    evidence: tuple[int, ...] = ()
    failure_class: str | None = None   # client, environment, harness — for anything not a pass


def failed(reason, evidence=()):
    return Judgement(FAIL, reason, tuple(evidence), "client")


def unknown(reason, evidence=(), failure_class="environment"):
    return Judgement(INCONCLUSIVE, reason, tuple(evidence), failure_class)


def seqs(*groups) -> list[int]:
    return sorted({e.seq for group in groups for e in group if e is not None})


# Names a client's temporary or partial files take (left behind, they fail the cleanup gate);
# any other file left in its working directory is named but allowed (a cache, say).
TEMP_NAME = re.compile(r"(\.(tmp|temp|part|partial|swp|download|crdownload|inprogress)$"
                       r"|^\.?tmp|^\.#|~$|\.~)", re.IGNORECASE)


def is_temp(path: str) -> bool:
    """Is any component of a listed path (`dir/`, `dir/file`) temporary-looking? A leaked
    tempfile.mkdtemp() directory counts, whatever its files are called."""
    return any(TEMP_NAME.search(part) for part in path.strip("/").split("/") if part)
