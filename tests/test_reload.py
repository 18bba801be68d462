"""The reload task (fixture/reload/, issue 47): nginx as an operable service (a master and a
worker, as the sandbox user, in the scenario's service pid namespace, its folder /run/service)
under evlab's load, and programs that change the version it serves.

One session judges everything (the seeded suite's reference client, one behaviour per clause,
and real tools, written as an operator would, on the grade scenarios' versions): each fails
exactly the clauses declared beside it, which were written from nginx's manual before evlab
judged them:
- `cp`, `sed`, `nginx -t`, `nginx -s reload` (tested, then reloaded): nothing, on a first
  change with its re-run and on an invalid change (the test refuses it: nothing changed);
- `sed -i` then `nginx -s reload` (no test) on the invalid change: the configuration on disk
  no longer passes `nginx -t` (version-served); `nginx -s reload` parses it first and sends
  nothing, so the service itself is kept;
- `nginx -s stop` then `nginx` (a restart): the master ended by SIGTERM (service-kept, and
  signals-as-allowed: only HUP is). The manual's expectation that the load sees refusals does
  not hold on every run: the new master binds within a few milliseconds of the old one's exit,
  shorter than the load's 25 ms between requests, so no-request-failed is asserted only as
  what it may be, not declared. The new nginx, in the program's cgroup, answers whoever
  connects to the service's port (the load, the program's own curl, the verifier): no
  contact, destination-only passes;
- `kill -9` of the master then `nginx`: the master ended by SIGKILL (service-kept,
  signals-as-allowed); its orphaned worker keeps the port and answers the load with the old
  version, so the new `nginx` cannot bind (exit 1) and the lab cannot start the service again
  either (`restarts_failed`): version-served fails, and the attempt is valid (the kernel saw
  the client's SIGKILL).
"""

import json
import time
import tomllib
from pathlib import Path

import pytest

from sessions.spec.scenario import ScenarioError, load_suite, parse
from sessions.spec.task import load_task
from tests.support import clauses, grade, operated, tool_scenario

TASK = load_task("reload")
CLIENTS = Path(__file__).parent / "clients"
OPERATORS = Path(__file__).resolve().parent.parent / "docs" / "examples" / "operators"
SEEDED = [s.id for s in load_suite("seeded", TASK)]
FAULTS = [s.id for s in load_suite("faults", TASK)]
GRADE = {s.id: dict(s.values)["version"] for s in load_suite("grade", TASK)}

# what operators write (docs/examples/operators/reload-NAME.sh, also a campaign there): the
# port from CONF's listen, /version asked with curl, confirmed for 4 s at most
TOOLS = {   # name: {grade scenario: the clauses it fails}
    "tested": {"first": [], "invalid": []},
    "untested": {"invalid": ["version-served"]},
    # declared as the manual has it; judged below clause by clause (see the module's words)
    "stop-start": {"first": ["service-kept", "signals-as-allowed", "no-request-failed"]},
    "kill-start": {"first": ["service-kept", "signals-as-allowed", "version-served"]},
}
TIMED = ("stop-start-first",)   # its load's refusals depend on a few milliseconds' gap


def _tools(root: Path) -> list[Path]:
    """A script and a scenario file per tool and grade scenario it is judged on."""
    return [tool_scenario(root, f"{name}-{on}", name,
                          (OPERATORS / f"reload-{name}.sh").read_text(), fails,
                          f"values = {{ version = {json.dumps(GRADE[on])} }}")
            for name, judged in TOOLS.items() for on, fails in judged.items()]


@pytest.fixture(scope="module")
def document(tmp_path_factory):
    return operated(tmp_path_factory, "reload", SEEDED + FAULTS, _tools)


def test_each_behaviour_and_tool_is_judged_as_declared(document):
    scenarios, done = document
    expected = [*SEEDED, *FAULTS, *(f"{n}-{g}" for n, judged in TOOLS.items() for g in judged)]
    assert sorted(scenarios) == sorted(expected)
    checks = {i: (s["instrument_check"], s["instrument_detail"]) for i, s in scenarios.items()
              if i not in TIMED}
    assert checks == dict.fromkeys(set(expected) - set(TIMED), (
        "detected", "every clause judged as declared")), done.stdout


def test_nginx_own_control_command_reloads_the_master_the_lab_started(document):
    """Stage 1's proof: from inside the sandbox, `nginx -t` and `nginx -s reload` (the real
    control command, finding the master by the pid file in /run/service) reach the service:
    one SIGHUP, to the server's master, which lives on, and the load is answered throughout."""
    scenarios, _ = document
    tested = scenarios["tested-first"]
    first, rerun = tested["invocations"]
    assert [(s["name"], s["whose"], s["server"]) for s in first["operations"]["signals"]
            if s.get("target")] == [("SIGHUP", "server", "web")]
    assert first["operations"]["signals"] and not rerun["operations"]["signals"]
    verdicts = clauses(tested)
    for clause in ("service-kept", "no-request-failed", "latency-bound", "signals-as-allowed",
                   "atomic-config", "unchanged-nothing", "version-served"):
        assert verdicts[clause][0] == "pass", (clause, verdicts[clause])
    load = first["load"]["traffic"]
    assert load["sent"] > 0 and load["outcomes"] == {"answered": load["sent"]}
    assert first["servers"]["web"]["restarts"] == 0
    assert "'2.0', '2.0'" in verdicts["version-served"][1]


def test_an_invalid_version_is_refused_and_nothing_changes(document):
    scenarios, _ = document
    for name in ("invalid", "tested-invalid"):
        verdicts = clauses(scenarios[name])
        assert verdicts["version-served"] == ("pass", verdicts["version-served"][1])
        assert "'1.0' kept, '1.0' kept" in verdicts["version-served"][1]
        assert [i["exit_code"] for i in scenarios[name]["invocations"]] == [1, 1]
        assert verdicts["atomic-config"][0] == "not-applicable"   # CONF never touched
        assert not any(i["operations"]["signals"] for i in scenarios[name]["invocations"])
    untested = clauses(scenarios["untested-invalid"])["version-served"]
    assert untested[0] == "fail" and "fails nginx -t" in untested[1]


def test_a_restart_is_told_from_a_reload_by_how_the_master_ended(document):
    scenarios, _ = document
    restart = clauses(scenarios["restart"])   # the seeded one waits 0.3 s before starting
    assert "after the client's pid" in restart["service-kept"][1]
    assert "SIGTERM" in restart["service-kept"][1]
    assert "refused" in restart["no-request-failed"][1]
    tool = clauses(scenarios["stop-start-first"])
    assert tool["service-kept"][0] == "fail" and "SIGTERM" in tool["service-kept"][1]
    assert tool["signals-as-allowed"][0] == "fail"
    assert tool["version-served"][0] == tool["honest-outcome"][0] == "pass"
    assert tool["destination-only"][0] == "pass", tool["destination-only"]
    assert scenarios["stop-start-first"]["invocations"][0]["servers"]["web"]["restarts"] == 1
    killed = scenarios["kill-start-first"]
    first = killed["invocations"][0]
    assert "SIGKILL" in clauses(killed)["service-kept"][1]
    assert first["servers"]["web"]["restarts"] == 0
    assert first["servers"]["web"]["restarts_failed"], first["servers"]
    assert first["exit_code"] == 1 and "'1.0'" in clauses(killed)["version-served"][1]
    slow = clauses(scenarios["slow"])
    assert slow["no-request-failed"][0] == "pass" and "took longer than 200 ms" in slow[
        "latency-bound"][1]


def test_the_seeded_reasons_name_what_was_done(document):
    scenarios, _ = document
    assert "opened for writing under its own name" in clauses(scenarios["in-place"])[
        "atomic-config"][1]
    again = clauses(scenarios["again"])["unchanged-nothing"][1]
    assert "already served, yet sent SIGHUP" in again
    assert "SIGUSR1 to server web" in clauses(scenarios["usr1"])["signals-as-allowed"][1]


def test_the_fault_suite_is_judged_as_declared(document):
    """scenarios/faults/, in the same session: the load at 200 requests a second; CONF grown
    by 200,000 redirects (a slow reload: the reference client asks until it is served, a
    client that looks once is told from it); CONF broken by the lab (nothing can be applied:
    the program leaves the service as it was and says it failed)."""
    scenarios, _ = document
    assert FAULTS == ["heavy-load", "slow-reload", "slow-reload-once", "broken-conf"]
    for name in FAULTS:
        assert scenarios[name]["instrument_check"] == "detected", (name, clauses(scenarios[name]))
    heavy = scenarios["heavy-load"]["invocations"][0]["load"]["traffic"]
    assert heavy["rate"] == 200 and heavy["outcomes"] == {"answered": heavy["sent"]}
    assert scenarios["slow-reload"]["invocations"][0]["load"]["traffic"]["rate"] == 40
    once = clauses(scenarios["slow-reload-once"])["honest-outcome"][1]
    assert "claimed failure (exit 1)" in once and "serves '2.0'" in once
    broken = scenarios["broken-conf"]
    assert 'unknown directive "retrun"' in clauses(broken)["version-served"][1]
    assert [i["exit_code"] for i in broken["invocations"]] == [1, 1]
    assert not any(i["operations"]["signals"] for i in broken["invocations"])


def test_a_scenario_gives_each_value_the_task_names(tmp_path):
    """`{scenario.version}`: the task's placeholder and verifier name it, every scenario of the
    task gives it ([environment] values), and no other."""
    assert TASK.scenario_words == {"version"}
    assert TASK.fills == {"conf": "{service}/nginx.conf", "version": "scenario.version"}
    text = '[client]\npath = "/bin/true"\n'
    with pytest.raises(ScenarioError, match="environment.values: expected a table of texts, "
                                            "one for each of version"):
        parse(text, tmp_path / "none.toml", TASK)
    with pytest.raises(ScenarioError, match="environment.values"):
        parse(text + '[environment]\nvalues = { version = "2", other = "3" }\n',
              tmp_path / "more.toml", TASK)
    given = parse(text + '[environment]\nvalues = { version = "2" }\n', tmp_path / "v.toml",
                  TASK)
    assert given.words == {"scenario.version": "2"}
    assert GRADE == {"first": "2.0", "invalid": "2.0$beta"}
    grade = tomllib.loads((TASK.folder / "scenarios/grade/invalid.toml").read_text())
    assert grade["expect"]["fail"] == []


@pytest.mark.parametrize("client", ["reload_client.pl", "reload_client.sh"])
def test_an_honest_client_from_the_document_alone_is_graded_a_success(client, tmp_path):
    """tests/clients/reload_client.pl (Perl) and reload_client.sh (Bash, coreutils and nginx:
    HTTP by bash's /dev/tcp), each written from protocol.md alone, graded as a user would: on
    the grade's own PATH (Debian root's, sbin included: `nginx` by name) every attempt is
    valid and a success, and its work in the service's folder (a new configuration written
    there, renamed over CONF) is its own, no write outside and no read finding (#47: the Bash
    client's mv reads /proc/filesystems as it starts, which is none)."""
    doc = grade(f"{CLIENTS / client} {{conf}} {{version}}", tmp_path, attempts=1,
                task="reload")
    for name, sc in doc["grade"]["scenarios"].items():
        assert [(r["valid"], r["success"]) for r in sc["runs"]] == [(True, True)], (
            name, [(r["reason"], r["clauses"]) for r in sc["runs"]])
        found = [f for r in sc["runs"] for f in r["risk_findings"]]
        assert not [f for f in found if f["kind"] in ("write-outside", "read")], found


def test_the_verifier_counts_a_version_once_the_reloads_old_worker_has_stopped_answering(
        monkeypatch):
    """#47: after a reload nginx's old worker answers for up to 100 ms beside the new one. The
    verifier's reading that VERSION is served counts once VERSION was answered SETTLE_S in a
    row, so the next invocation (a re-run) is not started while the old version still answers;
    an answer that is not VERSION counts once the grace has passed (at once for a version that
    cannot be served)."""
    from fixture.reload import verifier
    answers = iter([(200, "1.0"), (200, "2.0"), (200, "1.0")])   # the old worker, then the new
    asked = []

    def served(port):
        asked.append(time.monotonic())
        return next(answers, (200, "2.0"))
    monkeypatch.setattr(verifier, "served", served)
    assert verifier.settled(1, "2.0", verifier.GRACE_S) == (200, "2.0")
    assert len(asked) > 4 and asked[-1] - asked[3] >= verifier.SETTLE_S   # 2.0, since the last 1.0
    answers, asked[:] = iter([(200, "1.0")]), []
    assert verifier.settled(1, "2.0$beta", 0) == (200, "1.0") and len(asked) == 1
