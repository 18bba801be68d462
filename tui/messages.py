"""What the panels tell the app (messages up; the app hands them data, attributes down)."""

from collections.abc import Sequence

from textual.message import Message

from sessions.stream.events import GateResult, Verdict


class ScenarioSelected(Message):
    """The scenario list's cursor is on a scenario: show that one."""

    def __init__(self, scenario: str):
        super().__init__()
        self.scenario = scenario


class RunRequested(Message):
    """Run (or rerun) these scenarios."""

    def __init__(self, scenarios: Sequence[str]):
        super().__init__()
        self.scenarios = tuple(scenarios)


class EvidenceRequested(Message):
    """Open the events that decided a clause (or gate), as the verdict panel showed it."""

    def __init__(self, scenario: str, clause: str, verdict: Verdict | GateResult | None):
        super().__init__()
        self.scenario, self.clause, self.verdict = scenario, clause, verdict

    @property
    def seqs(self) -> tuple[int, ...]:
        """The cited events' sequence numbers; none while the clause is not judged."""
        return () if self.verdict is None else tuple(self.verdict.evidence)


class FilterChanged(Message):
    """The user applied a filter to the panes ('' clears it)."""

    def __init__(self, text: str):
        super().__init__()
        self.text = text
