"""The status line: collector, packet capture, sandbox, capabilities, lost events, the probes'
cost, the feed's position, and whether the view is paused or filtered."""

from dataclasses import dataclass

from textual.reactive import reactive
from textual.widgets import Static

from tui.model import SessionFacts
from tui.styles import plain


@dataclass(frozen=True)
class StatusFacts:
    session: SessionFacts
    position: str
    paused: bool
    filter_text: str


class StatusLine(Static):
    # set on every tick; equal facts draw nothing
    facts: reactive[StatusFacts | None] = reactive(None, init=False)

    def watch_facts(self, facts: StatusFacts | None) -> None:
        if facts is not None:
            self.update(plain(status_text(facts)))


def status_text(facts: StatusFacts) -> str:
    s = facts.session
    bpf = s.overhead.get("bpf_run_time_ns")
    eps = s.overhead.get("events_per_s")
    box = s.sandbox
    parts = [f"collector {s.collector}", f"packets {s.packets_mode}",
             "" if box is None else "sandboxed" if box.enabled else "NOT SANDBOXED",
             "" if box is None or not box.network
             else "own network" if box.own_network else "HOST NETWORK",
             f"{len(s.missing)} capabilities missing" if s.missing
             else "all capabilities present",
             f"lost events {s.lost_events}",
             f"probe cost {bpf / 1e6:.1f} ms BPF" if bpf is not None else "probe cost n/a",
             f"{eps:.0f} ev/s" if eps is not None else "",
             facts.position,
             "PAUSED" if facts.paused else "",
             f"filter '{facts.filter_text}'" if facts.filter_text else ""]
    return " · ".join(p for p in parts if p)
