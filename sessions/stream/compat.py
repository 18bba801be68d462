"""Compatibility: what a record or a contract written by an earlier evlab means today. evlab judged
one task first, backup, and what it wrote then named backup's things (its receiver, its uploads,
its verifier's digests). Everything else in the core reads neutral names; this module alone maps
the old ones: an event as it is loaded (sessions/stream/codec.py: upgrade), an archive's copy of a
contract (ARCHIVED_*), a record that names no task (OLD_TASK)."""

# The task a record naming none ran (archives from before tasks were folders judged backup), and
# what a command, grade file or campaign naming none judges, as it did then (the command line's
# default, sessions/cli/parser.py)
OLD_TASK = "backup"

# An archived contract's [vocabulary] where it leaves a name out: the words evlab gave every
# contract then (backup's), so it re-judges with the words it was judged with
ARCHIVED_VOCABULARY = {
    "transfer": "upload",
    "state": "store",
    "saved": "backup",
    "started": "upload_started",
    "committed": "committed",
    "refused": "rejected",
    "closed": "connection_closed",
    "bytes": "payload_bytes",
    "mismatch": "digest-mismatch",
    "digest_function": "hash_file",
    "input": "source",
}

# An archived contract's [thresholds] where it leaves one out: the figures evlab gave every
# contract then (backup's, measured as fixture/backup/contract.toml says)
ARCHIVED_THRESHOLDS = {
    "max_transfer_attempts": 3,
    "unchanged_wire_bytes_max": 1024,
    "hash_passes_allowed": 1,
    "relay_passes_allowed": 1,
    "relay_slack_bytes": 65_536,
    "cpu_startup_allowance_ns": 500_000_000,
    "cpu_ns_per_byte": 5,
    "cpu_ns_per_exec": 2_000_000,
    "cpu_stretch_allowance_ns": 40_000_000,
    "cpu_startup_stretch_ns": 50_000_000,
    "cpu_waste_ns": 320_000_000,
    "cpu_view_tolerance_ns": 30_000_000,
    "pace_reference_ns": 151_700,
    "pace_noise": 1.25,
    "pace_max": 3.0,
    "request_overhead_bytes": 512,   # two of backup's request lines (256 bytes at most)
}

# Thresholds renamed since: an old contract's name -> today's
THRESHOLD_NAMES = {"max_upload_attempts": "max_transfer_attempts"}

# Library predicates renamed since: a clause id that named one (an old contract's clauses named
# no predicate: each was judged by the one of its id) -> today's
PREDICATE_NAMES = {"unchanged-no-upload": "unchanged-no-transfer"}

# Predicates the library had that are now a built-in task's own: a contract an archive keeps
# names them as the library's, and is judged by them where they are now
MOVED_PREDICATES = {name: "fixture.backup.predicates" for name in (
    "unchanged-no-transfer", "bounded-recovery", "mismatch-rejected", "hash-work")}

# The wire proxy's record of the request a one-shot fault is bound to: today's, and the name it
# had when it bound faults to backup's uploads only
BOUND_REQUEST_EVENTS = ("request_bound", "source_upload")

# A server fault's key for the k-th transfer, as an archive recorded it before it was `transfer`
OLD_TRANSFER_KEY = "upload"
# A fault's keys renamed since (a scenario file or an archive of then) -> today's
FAULT_KEY_NAMES = {OLD_TRANSFER_KEY: "transfer"}

# A scenario recorded before tasks said their servers ran backup's two
OLD_SERVERS = {"receiver": "endpoint", "decoy": "decoy"}

# Fields of an event renamed since: (event type, old name) -> today's
RENAMED = {("ScenarioStarted", "receiver_port"): "endpoint_port"}
_RENAMED_KINDS = frozenset(kind for kind, _ in RENAMED)   # asked of every event read

# The verifier's figures an old record carried as fields of the event: now in its `fields`
OLD_VERIFIER_FIELDS = ("saved", "source_sha256", "saved_sha256")


def upgrade(data: dict) -> dict:
    """An event's JSON object as today's names have it (a record of today's evlab: as it is)."""
    kind = str(data.get("type"))
    if kind in _RENAMED_KINDS and any((kind, k) in RENAMED for k in data):
        data = {RENAMED.get((kind, k), k): v for k, v in data.items()}
    if kind == "VerifierResult" and any(k in data for k in OLD_VERIFIER_FIELDS):
        data = dict(data)
        old = {k: data.pop(k) for k in OLD_VERIFIER_FIELDS if k in data}
        fields = data.get("fields")
        fields = {**old, **fields} if isinstance(fields, dict) else old
        data["fields"] = fields
        if not data.get("detail"):   # before verifiers said what they found: backup's words
            data["detail"] = old_verifier_detail(fields, data.get("match") is True)
    return data


def old_verifier_detail(fields: dict, match: bool) -> str:
    """What backup's verifier found, in the words evlab said it with before verifiers said it."""
    source, saved = str(fields.get("source_sha256") or ""), fields.get("saved_sha256")
    if not fields.get("saved", match):
        return "the store holds no backup"
    if not match:
        return (f"the saved backup's sha256 {str(saved)[:12]}… differs from the source's "
                f"{source[:12]}…")
    return f"the saved backup matches the source (sha256 {source[:12]}…)"


def old_ports(endpoint_port: int, decoy_port: int) -> dict[str, int | None]:
    """The ports of a scenario recorded before tasks said their servers, by server name."""
    return {"receiver": endpoint_port, "decoy": decoy_port}
