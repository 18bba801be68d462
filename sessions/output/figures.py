"""The task's figures of one invocation (task.toml [[figures]], as its scenario's record says):
what the dashboard's counters, the JSON document and the reports show besides evlab's own."""

from sessions.spec.task import display_of
from sessions.stream.events import ServerRecord
from sessions.stream.evidence import InvocationEvidence, ScenarioEvidence


def task_figures(ev: ScenarioEvidence,
                 inv: InvocationEvidence | None) -> list[tuple[str, int | None]]:
    """(label, value) for each of the task's figures; None: not observed (yet). The first
    invocation's count the records its servers wrote before it too (set-up)."""
    first = inv is not None and inv.n == min(ev.invocations, default=inv.n)
    before = ev.setup_records if first else {}
    return [(fig["label"], _value(fig, inv, before))
            for fig in display_of(ev.started)["figures"]]


def invocation_count(ev: ScenarioEvidence) -> int:
    return int(display_of(ev.started)["invocations"])


def _value(fig: dict, inv: InvocationEvidence | None,
           before: dict[str, list[ServerRecord]]) -> int | None:
    if inv is None:
        return None
    sample = inv.final or inv.latest
    if "counter" in fig:
        return sample.counters.get(fig["counter"]) if sample else None
    if "function" in fig:
        return sample.functions.get(fig["function"]) if sample else None
    server, _, event = fig["records"].partition(".")
    records = [r for r in [*before.get(server, []),
                           *inv.client_records(inv.records.get(server, []))]
               if r.event == event]   # the load's connections are not the client's
    if "sum" not in fig:
        return len(records)
    return sum(v for r in records if isinstance(v := r.fields.get(fig["sum"], 0), int))
