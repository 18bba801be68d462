"""Compatibility shim: what a contract or an archive from before tasks were folders means. evlab
judged one task then, backup, so every name its contract left implicit is backup's; a task's
contract names its own (docs/tasks.md: "vocabulary"). Nothing else in the core names them."""

# The contract's [vocabulary] when it leaves a name out (sessions/spec/contract.py: Vocabulary)
VOCABULARY = {
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
}

# Thresholds renamed since: an old contract's name -> today's
THRESHOLD_NAMES = {"max_upload_attempts": "max_transfer_attempts"}

# Library predicates renamed since: a clause id that named one (an old contract's clauses named
# no predicate: each was judged by the one of its id) -> today's
PREDICATE_NAMES = {"unchanged-no-upload": "unchanged-no-transfer"}

# The wire proxy's record of the request a one-shot fault is bound to: today's, and the name it
# had when it bound faults to backup's uploads only
BOUND_REQUEST_EVENTS = ("request_bound", "source_upload")

# A server fault's key for the k-th transfer, as an archive recorded it before it was `transfer`
OLD_TRANSFER_KEY = "upload"
