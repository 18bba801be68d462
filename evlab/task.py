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
- the verdict: `Judgement`, PASS, NA, `failed`, `unknown`, `seqs`, `is_temp`;
- the kernel's operations (`.signals`, `.truncations`, `.lives` of an invocation:
  `SignalObserved`, `TruncateObserved`, `ProcessLife`, whose each process was: OWN, SERVER,
  OTHER), what the client's tree did to the servers (`program_acts`, `Act`, `watched_pids`),
  whether the kernel saw it all (`operations_unseen`), the contract's `Operations`;
- the contract's words (`Vocabulary`), the endpoint and the views' gaps, the faults a scenario
  armed and whether each had its chance to fire (`armed`, `could_fire`, ...).

For servers and programs: `EventLog` and `exit_with_parent` (a server's JSON-line record),
`sha256_of`, `verifier_main` (a verifier's command line and output), `free_port` and
`answers(port)` (loopback ports), the fault
vocabulary (`check`, `FaultError`, SERVER_KINDS, TRIGGERED), and
evlab's deterministic inputs (`source_bytes`, SEED, BLOCK; `write_tree`, `changes`).
"""

from importlib import import_module
from typing import TYPE_CHECKING

from sessions.spec.task_predicates import PREDICATE_NAMES

if TYPE_CHECKING:
    from sessions.judging.clauses.operations import operations_unseen
    from sessions.judging.fault_chance import could_fire, fired_records, input_digest
    from sessions.judging.fault_chance import struck_refused
    from sessions.judging.judgement import CLIENT, ENVIRONMENT, HARNESS, FAIL, INCONCLUSIVE, NA
    from sessions.judging.judgement import PASS, Judgement, failed, is_temp, seqs, unknown
    from sessions.judging.outputs import FILE_EVENTS, FILES, arrived_whole, file_records
    from sessions.judging.outputs import written_in_place
    from sessions.judging.server_acts import Act, program_acts, watched_pids
    from sessions.judging.views import blind, consumed_bytes, endpoint_name, wire_lost, MOVES
    from sessions.judging.views import SOURCE_BY_DESCRIPTOR, counter, invocations, resolved_files
    from sessions.judging.views import under, unjudgeable
    from sessions.lab.event_log import EventLog, exit_with_parent
    from sessions.lab.inputs.source import BLOCK, SEED, source_bytes
    from sessions.lab.inputs.tree import changes, write_tree
    from sessions.lab.ports import answers, free_port
    from sessions.lab.verifier_cli import verifier_main
    from sessions.spec.contract import Vocabulary, Thresholds
    from sessions.spec.digest import sha256_of
    from sessions.spec.operations_table import Operations
    from sessions.spec.fault_kinds import HEADER_MAX, SERVER_KINDS, TRIGGERED, FaultError, check
    from sessions.spec.scenario_faults import CONTINUOUS, INTERRUPTIONS, armed
    from sessions.stream.events import ServerRecord
    from sessions.stream.evidence import InvocationEvidence, ScenarioEvidence
    from sessions.stream.operations import OTHER, OWN, SERVER, ProcessLife, SignalObserved
    from sessions.stream.operations import TruncateObserved

# where each name lives: it is loaded from there on first use, so a server importing EventLog
# does not load the judge (a user's verifier runs once per invocation)
_MODULES = {
    "sessions.judging.clauses.operations": "operations_unseen",
    "sessions.judging.fault_chance": "could_fire fired_records input_digest struck_refused",
    "sessions.judging.judgement": "CLIENT ENVIRONMENT HARNESS FAIL INCONCLUSIVE NA PASS Judgement "
                                  "failed is_temp seqs unknown",
    "sessions.judging.outputs": "FILE_EVENTS FILES arrived_whole file_records written_in_place",
    "sessions.judging.server_acts": "Act program_acts watched_pids",
    "sessions.judging.views": "blind consumed_bytes endpoint_name wire_lost MOVES "
                              "SOURCE_BY_DESCRIPTOR counter invocations resolved_files under "
                              "unjudgeable",
    "sessions.lab.event_log": "EventLog exit_with_parent",
    "sessions.lab.inputs.source": "BLOCK SEED source_bytes",
    "sessions.lab.inputs.tree": "changes write_tree",
    "sessions.lab.ports": "answers free_port",
    "sessions.lab.verifier_cli": "verifier_main",
    "sessions.spec.contract": "Vocabulary Thresholds",
    "sessions.spec.digest": "sha256_of",
    "sessions.spec.operations_table": "Operations",
    "sessions.spec.fault_kinds": "HEADER_MAX SERVER_KINDS TRIGGERED FaultError check",
    "sessions.spec.scenario_faults": "CONTINUOUS INTERRUPTIONS armed",
    "sessions.stream.events": "ServerRecord",
    "sessions.stream.evidence": "InvocationEvidence ScenarioEvidence",
    "sessions.stream.operations": "OTHER OWN SERVER ProcessLife SignalObserved TruncateObserved",
}
_HOME = {name: module for module, names in _MODULES.items() for name in names.split()}
__all__ = list(_HOME)
# what a server, the verifier, a state or a step uses besides the predicates' PREDICATE_NAMES
PROGRAM_NAMES = tuple(name for name in _HOME if name not in PREDICATE_NAMES)


def __getattr__(name: str):
    if name in _HOME:
        value = getattr(import_module(_HOME[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'evlab.task' has no attribute {name!r}")
