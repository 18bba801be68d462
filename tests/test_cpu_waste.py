"""cpu-budget against waste spread thin (#33 item 4): spinning over many threads, or cut into
pieces each under the stretch allowances, fails; the same evidence gets the same verdict
whatever the pace of the machine that judged it (the judge run again on the recorded stream
at several paces), for the spinners and for honest clients alike. Waste hidden behind programs
started (#44), each of which earns the budget a fork + exec's honest cost: more than that
per program fails, programs that do nothing cost what they earn."""

import re
from dataclasses import replace
from pathlib import Path

import pytest

from sessions.output.judged import JudgedStream
from sessions.stream import events as E
from sessions.stream.evidence import EvidenceBook
from sessions.stream.replay import observations
from tests.support import grade

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = ROOT / "tests" / "clients"
PACES = (1.0, 1.3, 1.5, 2.0, 3.0)   # the reference machine's, then ever slower ones
pytestmark = [pytest.mark.root(reason="the sandbox and BCC need root"), pytest.mark.slow,
              pytest.mark.live]
COMMANDS = {
    "threads-spin": "{egress} threads-spin {{host}} {{port}} {{source}}",
    "pieces-spin": "{egress} pieces-spin {{host}} {{port}} {{source}}",
    "c": "{egress} honest {{host}} {{port}} {{source}}",
    "python": f"/usr/bin/python3 {CLIENTS / 'backup_client.py'} {{{{host}}}} {{{{port}}}} "
              f"{{{{source}}}}",
}


def recorded(egress, tmp_path, name: str) -> list[E.Event]:
    """One attempt of the normal scenario graded here: its observations, as an archive keeps."""
    return _observed(COMMANDS[name].format(egress=egress), tmp_path, scenarios=("normal",))


def _observed(command: str, tmp_path, **options) -> list[E.Event]:
    book = EvidenceBook()
    grade(command, tmp_path, attempts=1, book=book, **options)
    return observations(book.events)


def cpu_budget_at(events: list[E.Event], pace: float) -> tuple[str, str]:
    """(status, reason) of cpu-budget when the same evidence is judged on a machine of `pace`."""
    book = EvidenceBook()
    stream = JudgedStream(book=book)
    for e in events:
        stream.publish(replace(e, cpu_pace=pace) if isinstance(e, E.SessionStarted) else e,
                       keep_seq=True)
    (ev,) = book.scenarios.values()
    (v,) = [v for v in ev.verdicts if v.clause == "cpu-budget"]
    return v.status, v.reason


@pytest.mark.parametrize("name, before", [("threads-spin", True), ("pieces-spin", False)])
def test_waste_spread_thin_fails_cpu_budget_at_every_pace(egress, tmp_path, name, before):
    """640 ms of CPU burnt in 16 threads of 40 ms before the source is opened, or in 128
    pieces of 5 ms after: no single stretch is long, their sum is."""
    events = recorded(egress, tmp_path, name)
    verdicts = {pace: cpu_budget_at(events, pace) for pace in PACES}
    for pace, (status, reason) in verdicts.items():
        assert status == "fail", (pace, reason)
        split = re.search(r"ran (\d+) ms on the CPU in stretches without progress \((\d+) ms "
                          r"before it opened the source, (\d+) after", reason)
        assert split, (pace, reason)
        total, start, after = map(int, split.groups())
        assert total >= 600 and (start if before else after) >= 600, reason
    assert len({reason for _, reason in verdicts.values()}) == 1   # the same words everywhere
    # the stream the live judge saw: only that clause failed, and the attempt stays valid
    book = EvidenceBook()
    stream = JudgedStream(book=book)
    for e in events:
        stream.publish(e, keep_seq=True)
    (ev,) = book.scenarios.values()
    assert [v.clause for v in ev.verdicts if v.status == "fail"] == ["cpu-budget"]


@pytest.mark.parametrize("name", ["c", "python"])
def test_an_honest_client_passes_cpu_budget_at_every_pace(egress, tmp_path, name):
    events = recorded(egress, tmp_path, name)
    for pace in PACES:
        status, reason = cpu_budget_at(events, pace)
        assert status == "pass", (pace, reason)


HIDDEN = CLIENTS / "mirror_hidden_waste.sh"


def _hidden(tmp_path, mode: str, n: int) -> list[E.Event]:
    """The Bash mirror's first sync (~430 programs started) with waste behind each program."""
    return _observed(f"/bin/bash {HIDDEN} {{src}} {{dst}} {mode} {n}", tmp_path,
                     task="mirror", scenarios=("first",), timeout_s=300)


def test_spinning_behind_every_program_started_fails_cpu_budget(tmp_path):
    """6 ms of the shell's CPU per program started, in pieces under the 2 ms busy stretch:
    no stretch shows it, and each program earns 2 ms (x the pace): the total fails, at this
    machine's pace and at every pace up to 2 (4 ms a program allowed; at the cap of 3, 6)."""
    events = _hidden(tmp_path, "spin", 6)
    for pace in (PACES[0], 2.0, None):   # the budget grows with the pace: its two ends, and live
        status, reason = (cpu_budget_at(events, pace) if pace else _live(events))
        assert status == "fail", (pace, reason)
        got = re.search(r"invocation 1: \d+ ms of CPU \(its cgroup\) for [\d.]+ MB moved and "
                        r"(\d+) program\(s\) started; budget", reason)
        assert got and int(got[1]) >= 400, (pace, reason)


def test_programs_started_for_nothing_cost_what_they_earn(tmp_path):
    """Two idle programs (/bin/true) beside every one the work needs: each costs about what a
    program start earns, so the budget grows with them and holds; it cannot tell a needed
    program from an idle one, only CPU beyond a start's cost (the test above)."""
    status, reason = _live(_hidden(tmp_path, "idle", 2))
    assert status == "pass", reason
    started = [int(n) for n in re.findall(r"with (\d+) program\(s\) started", reason)]
    assert started and started[0] >= 3 * 400, reason


def _live(events: list[E.Event]) -> tuple[str, str]:
    """(status, reason) of cpu-budget as judged where it ran."""
    (start,) = [e for e in events if isinstance(e, E.SessionStarted)]
    return cpu_budget_at(events, start.cpu_pace)
