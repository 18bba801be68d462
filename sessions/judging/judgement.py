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


# Whose doing an inconclusive judgement is (docs/grading.md, "Invalid attempts"): the client's
# (what it chose: a path the kernel gives no bytes for, a flood, an odd protocol exchange, and
# any cause not known to be another's); the environment's (a capability this machine lacks,
# recorded as missing: no kernel view, no socket layer); the harness's (evlab's own machinery
# failed by itself: a verifier result or lifecycle check missing, the capture stopped by an
# error). Only the last two make an attempt invalid.
CLIENT, ENVIRONMENT, HARNESS = "client", "environment", "harness"


def failed(reason, evidence=()):
    return Judgement(FAIL, reason, tuple(evidence), CLIENT)


def unknown(reason, evidence=(), failure_class=CLIENT):
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
