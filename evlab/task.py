"""What a task folder imports: the one public module for task authors (docs/tasks.md, "The
public module"). A task's predicates, servers, verifier, states and steps import from here and
the standard library only — the built-in tasks in fixture/ as much as a folder of yours
(import-linter holds the built-in ones to it; a folder's predicates file is checked as it is
read, sessions/spec/task_predicates.py).

For predicates (pure functions of the evidence, `(ScenarioEvidence, Thresholds) -> Judgement`;
a predicates file may import only the names of PREDICATE_NAMES):

- the evidence: `ScenarioEvidence` (one scenario or attempt: `.invocations`, `.records`, the
  verifier's results), `InvocationEvidence` (one run of the client: `.n`, `.records` by server
  name, the collector's counters, its file and socket calls), `ServerRecord` (`.event`,
  `.fields`, `.seq`, `.t_ns`), and the contract's `Thresholds`;
- reading it: `invocations`, `unjudgeable` (the judgement to return when the evidence is too
  thin to judge), `counter`, `resolved_files`, `under`, MOVES, SOURCE_BY_DESCRIPTOR;
- the outputs folder as the kernel saw it: `file_records` and FILE_EVENTS (the `files` records'
  shapes: sessions/judging/outputs.py), and the reusable check `arrived_whole(ev, name)` ("the
  file was written under another name, then renamed into place");
- the verdict: `Judgement`, PASS, NA, `failed`, `unknown`, `seqs`, `is_temp`.

For servers and programs: `EventLog` and `exit_with_parent` (a server's JSON-line record),
`sha256_of`, the fault vocabulary (`check`, `FaultError`, SERVER_KINDS, TRIGGERED), and
evlab's deterministic inputs (`source_bytes`, SEED, BLOCK; `write_tree`, `changes`).
"""

from importlib import import_module
from typing import TYPE_CHECKING

from sessions.spec.task_predicates import PREDICATE_NAMES

if TYPE_CHECKING:
    from sessions.judging.fault_chance import could_fire, fired_records, input_digest
    from sessions.judging.fault_chance import struck_refused
    from sessions.judging.judgement import CLIENT, ENVIRONMENT, HARNESS
    from sessions.judging.views import blind, consumed_bytes, endpoint_name, wire_lost
    from sessions.spec.contract import Vocabulary
    from sessions.spec.scenario_faults import CONTINUOUS, INTERRUPTIONS, armed
    from sessions.judging.judgement import FAIL, INCONCLUSIVE, NA, PASS, Judgement, failed, is_temp
    from sessions.judging.judgement import seqs, unknown
    from sessions.judging.outputs import FILE_EVENTS, FILES, arrived_whole, file_records
    from sessions.judging.outputs import written_in_place
    from sessions.judging.views import MOVES, SOURCE_BY_DESCRIPTOR, counter, invocations
    from sessions.judging.views import resolved_files, under, unjudgeable
    from sessions.lab.event_log import EventLog, exit_with_parent
    from sessions.lab.inputs.source import BLOCK, SEED, source_bytes
    from sessions.lab.inputs.tree import changes, write_tree
    from sessions.spec.contract import Thresholds
    from sessions.spec.digest import sha256_of
    from sessions.spec.fault_kinds import HEADER_MAX, SERVER_KINDS, TRIGGERED, FaultError, check
    from sessions.stream.events import ServerRecord
    from sessions.stream.evidence import InvocationEvidence, ScenarioEvidence

# what a predicate may import from here is PREDICATE_NAMES: the evidence and its readings
# what a server, the verifier, a state or a step uses besides
PROGRAM_NAMES = (
    "EventLog", "exit_with_parent", "BLOCK", "SEED", "source_bytes", "changes", "write_tree",
    "sha256_of", "HEADER_MAX", "SERVER_KINDS", "TRIGGERED", "FaultError", "check",
)
__all__ = [*PREDICATE_NAMES, *PROGRAM_NAMES]

# Each name is loaded from its module on first use: a server importing EventLog does not load
# the judge (a user's verifier runs once per invocation).
_HOME = {
    "could_fire": "sessions.judging.fault_chance",
    "fired_records": "sessions.judging.fault_chance",
    "input_digest": "sessions.judging.fault_chance",
    "struck_refused": "sessions.judging.fault_chance",
    "CLIENT": "sessions.judging.judgement",
    "ENVIRONMENT": "sessions.judging.judgement",
    "HARNESS": "sessions.judging.judgement",
    "blind": "sessions.judging.views",
    "consumed_bytes": "sessions.judging.views",
    "endpoint_name": "sessions.judging.views",
    "wire_lost": "sessions.judging.views",
    "Vocabulary": "sessions.spec.contract",
    "CONTINUOUS": "sessions.spec.scenario_faults",
    "INTERRUPTIONS": "sessions.spec.scenario_faults",
    "armed": "sessions.spec.scenario_faults",
    "FAIL": "sessions.judging.judgement",
    "INCONCLUSIVE": "sessions.judging.judgement",
    "NA": "sessions.judging.judgement",
    "PASS": "sessions.judging.judgement",
    "Judgement": "sessions.judging.judgement",
    "failed": "sessions.judging.judgement",
    "is_temp": "sessions.judging.judgement",
    "seqs": "sessions.judging.judgement",
    "unknown": "sessions.judging.judgement",
    "FILE_EVENTS": "sessions.judging.outputs",
    "FILES": "sessions.judging.outputs",
    "arrived_whole": "sessions.judging.outputs",
    "file_records": "sessions.judging.outputs",
    "written_in_place": "sessions.judging.outputs",
    "MOVES": "sessions.judging.views",
    "SOURCE_BY_DESCRIPTOR": "sessions.judging.views",
    "counter": "sessions.judging.views",
    "invocations": "sessions.judging.views",
    "resolved_files": "sessions.judging.views",
    "under": "sessions.judging.views",
    "unjudgeable": "sessions.judging.views",
    "EventLog": "sessions.lab.event_log",
    "exit_with_parent": "sessions.lab.event_log",
    "BLOCK": "sessions.lab.inputs.source",
    "SEED": "sessions.lab.inputs.source",
    "source_bytes": "sessions.lab.inputs.source",
    "changes": "sessions.lab.inputs.tree",
    "write_tree": "sessions.lab.inputs.tree",
    "Thresholds": "sessions.spec.contract",
    "sha256_of": "sessions.spec.digest",
    "HEADER_MAX": "sessions.spec.fault_kinds",
    "SERVER_KINDS": "sessions.spec.fault_kinds",
    "TRIGGERED": "sessions.spec.fault_kinds",
    "FaultError": "sessions.spec.fault_kinds",
    "check": "sessions.spec.fault_kinds",
    "ServerRecord": "sessions.stream.events",
    "InvocationEvidence": "sessions.stream.evidence",
    "ScenarioEvidence": "sessions.stream.evidence",
}


def __getattr__(name: str):
    if name in _HOME:
        value = getattr(import_module(_HOME[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'evlab.task' has no attribute {name!r}")
