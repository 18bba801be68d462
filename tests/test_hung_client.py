"""A hung client is a failed one: an invocation evlab kills at its timeout never gave its caller
an exit status, so it fails honest-outcome whatever it claimed, and its attempt fails, the
reason naming the timeout; and what evlab killed is never counted as left behind.

The adversaries are tests/clients/backup_client.py's hang variants, which back up honestly and
claim `completed` before they never end: `hang-no-term` sleeps ignoring SIGTERM, SIGINT and
SIGHUP (evlab's kill is SIGKILL, so one that only sleeps takes the same path), `hang-heavy`
holds 128 MiB with its stdout closed (killed, it takes the kernel a while to tear down: a
census that did not wait for it found it "still running", every time), `hang-stopped` has its
worker SIGSTOP itself (under a wrapper that waits for it for ever: the worker, killed after the
wrapper, was counted as "running when it ended"). Beside them the honest client, with the same
short timeout, passes everything. The timeout is the only clock:
the clients hang whatever the machine's speed, and their work (a 512 KiB backup, ~0.3 s here)
has TIMEOUT_S to claim completion.
"""

import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from sessions.lab.lifecycle import cleanup_check
from sessions.stream.evidence import EvidenceBook
from tests.support import grade, runs

ROOT = Path(__file__).resolve().parent.parent
PY_CLIENT = ROOT / "tests" / "clients" / "backup_client.py"
root_only = pytest.mark.root(reason="the BCC collector, cgroups and the sandbox need root")
TIMEOUT_S = 3
GATES = ("immediate", "re-run", "durability", "restore", "cleanup", "limits")
KILLED = f"killed by evlab at its {TIMEOUT_S} s timeout"


def graded(variant: str, tmp_path: Path):
    """One attempt of the normal scenario: its run (the document's) and its evidence."""
    book = EvidenceBook()
    doc = grade(f"/usr/bin/python3 {PY_CLIENT} --variant {variant} {{host}} {{port}} {{source}}",
                tmp_path, book=book, attempts=1, scenarios=("normal",), timeout_s=TIMEOUT_S)
    (run,) = runs(doc)
    (scenario,) = doc["scenarios"]
    return run, scenario, book.scenarios["normal@1"]


@pytest.fixture(scope="module")
def control(tmp_path_factory):
    return graded("honest", tmp_path_factory.mktemp("control"))


@pytest.mark.live
@root_only
def test_the_honest_control_passes_every_clause_and_gate_within_the_same_timeout(control):
    run, scenario, ev = control
    assert (run["valid"], run["success"]) == (True, True), run["reason"]
    assert set(run["clauses"].values()) <= {"pass", "not-applicable"}
    assert run["clauses"]["honest-outcome"] == "pass"
    assert {g: v["status"] for g, v in run["gates"].items()} == dict.fromkeys(GATES, "pass")
    assert [(i["exit_code"], i["timed_out"]) for i in scenario["invocations"]] == [(0, False)] * 2
    assert [ev.invocations[n].exited.timeout_s for n in (1, 2)] == [TIMEOUT_S] * 2


@pytest.mark.slow
@pytest.mark.live
@root_only
@pytest.mark.parametrize("variant", ["hang-no-term", "hang-heavy", "hang-stopped"])
def test_a_client_that_hangs_after_claiming_completion_fails_honest_outcome(variant, control,
                                                                            tmp_path):
    run, scenario, ev = graded(variant, tmp_path)
    # its backup is right, so only honest-outcome fails: it never exited with its claim
    assert run["clauses"] == {**control[0]["clauses"], "honest-outcome": "fail"}
    honest = next(c for c in scenario["clauses"] if c["id"] == "honest-outcome")
    assert (honest["reason"], honest["failure_class"]) == (
        f"invocation 1 claimed 'completed' but never exited: {KILLED}", "client")
    assert (run["valid"], run["success"]) == (True, False)
    assert run["reason"] == (f"failed: honest-outcome (invocation 1 {KILLED}; "
                             f"invocation 2 {KILLED})")
    for n in (1, 2):
        inv = ev.invocations[n]
        assert (inv.exited.exit_code, inv.exited.timed_out, inv.exited.timeout_s) == (
            None, True, TIMEOUT_S)
        assert {"claim": "completed"} in [c.claim for c in inv.claims]
        if variant == "hang-stopped":   # the worker did stop (its wrapper saw it)
            assert [c.claim["signal"] for c in inv.claims if c.claim["claim"] == "stopped"] \
                == [19]
        # evlab's kill is waited for before the census and never counted as left behind
        assert (inv.cleanup.leftover, inv.cleanup.left_at_exit, inv.cleanup.listening) == (
            (), (), ())
    gates = {g: v["status"] for g, v in run["gates"].items()}
    assert gates == dict.fromkeys(GATES, "pass"), run["gates"]
    assert "python3" not in run["gates"]["cleanup"]["reason"]
    assert "invocation 1's tree was killed by evlab at its timeout" in \
        run["gates"]["cleanup"]["reason"]
    assert [p.pid for p in psutil.process_iter(["cmdline"])
            if f"--variant {variant} " in " ".join(p.info["cmdline"] or ())] == []


def test_the_cleanup_census_never_counts_what_evlab_killed(tmp_path):
    """A process of the tree evlab killed (still being reaped, say) is not a leftover; the same
    process, not killed by evlab, is one. Either way nothing of it outlives the check."""
    for killed_by_evlab in (True, False):
        proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                                start_new_session=True)
        try:
            seen = cleanup_check("s", 1, proc.pid, lambda p=proc.pid: [p], tmp_path, tmp_path,
                                 killed=frozenset({proc.pid}) if killed_by_evlab
                                 else frozenset())
            assert proc.wait(timeout=5) == -9   # killed by the check whatever it counted
        finally:
            proc.kill()
            proc.wait()
        assert len(seen.leftover) == (0 if killed_by_evlab else 1)
        assert seen.kernel_view
