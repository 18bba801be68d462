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
  shorter than the load's 25 ms between requests, so no-request-failed and (the new nginx, in
  the program's cgroup, answering the load's connections) destination-only are asserted only
  as what they may be, not declared. `kill -9` of the master then `nginx` is not run here:
  nginx's orphaned worker keeps the port and answers the load with the old version, the new
  `nginx` cannot bind, and the lab's restart of the service fails the same way, which the lab
  takes for its own failure (an invalid attempt): an open problem, not a verdict to pin.
"""

import json
import tomllib
from pathlib import Path

import pytest

from sessions.spec.scenario import ScenarioError, load_suite, parse
from sessions.spec.task import load_task
from tests.support import clauses, grade, operated, tool_scenario

TASK = load_task("reload")
PERL_CLIENT = Path(__file__).parent / "clients" / "reload_client.pl"
SEEDED = [s.id for s in load_suite("seeded", TASK)]
FAULTS = [s.id for s in load_suite("faults", TASK)]
GRADE = {s.id: dict(s.values)["version"] for s in load_suite("grade", TASK)}

# what an operator writes: the port from CONF's listen, /version asked with curl
PRELUDE = r"""#!/bin/sh
conf=$1 version=$2
port=$(sed -n 's/.*listen 127\.0\.0\.1:\([0-9]*\);.*/\1/p' "$conf")
now() { curl -fsS "http://127.0.0.1:$port/version"; }
done_() { echo '{"claim": "completed"}'; exit 0; }
[ "$(now)" = "$version" ] && done_
"""
EDIT = r"""sed -i "s|return 200 \"[^\"]*\";|return 200 \"$version\";|" """
TESTED = (f'cp "$conf" "$conf.new" && {EDIT}"$conf.new" && nginx -t -q -c "$conf.new" || '
          '{ rm -f "$conf.new"; exit 1; }\nmv "$conf.new" "$conf" || exit 1\n')
CONFIRM = ("for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do\n"
           '    [ "$(now)" = "$version" ] && done_; sleep 0.2\ndone\nexit 1\n')
TOOLS = {   # name: (what it runs after the prelude, {grade scenario: the clauses it fails})
    "tested": (TESTED + 'nginx -s reload -c "$conf" || exit 1\n',
               {"first": [], "invalid": []}),
    "untested": (f'{EDIT}"$conf" && nginx -s reload -c "$conf" || exit 1\n',
                 {"invalid": ["version-served"]}),
    # declared as the manual has it; judged below clause by clause (see the module's words)
    "stop-start": (TESTED + 'nginx -s stop -c "$conf"; nginx -c "$conf"\n',
                   {"first": ["service-kept", "signals-as-allowed", "no-request-failed"]}),
}
TIMED = ("stop-start-first",)   # its load's refusals depend on a few milliseconds' gap


def _tools(root: Path) -> list[Path]:
    """A script and a scenario file per tool and grade scenario it is judged on."""
    return [tool_scenario(root, f"{name}-{on}", name, PRELUDE + body + CONFIRM, fails,
                          f"values = {{ version = {json.dumps(GRADE[on])} }}")
            for name, (body, judged) in TOOLS.items() for on, fails in judged.items()]


@pytest.fixture(scope="module")
def document(tmp_path_factory):
    return operated(tmp_path_factory, "reload", SEEDED + FAULTS, _tools)


def test_each_behaviour_and_tool_is_judged_as_declared(document):
    scenarios, done = document
    expected = [*SEEDED, *FAULTS, *(f"{n}-{g}" for n, (_, judged) in TOOLS.items() for g in judged)]
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
    assert scenarios["stop-start-first"]["invocations"][0]["servers"]["web"]["restarts"] == 1
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


def test_an_honest_perl_client_from_the_document_alone_is_graded_a_success(tmp_path):
    """tests/clients/reload_client.pl, written from protocol.md alone, graded as a user would:
    on the grade's own PATH (Debian root's, sbin included: `nginx` by name) every attempt is
    valid and a success, and its work in the service's folder (a new configuration written
    there, renamed over CONF) is its own, no write outside."""
    doc = grade(f"{PERL_CLIENT} {{conf}} {{version}}", tmp_path, attempts=1, task="reload")
    for name, sc in doc["grade"]["scenarios"].items():
        assert [(r["valid"], r["success"]) for r in sc["runs"]] == [(True, True)], (
            name, [(r["reason"], r["clauses"]) for r in sc["runs"]])
        found = [f for r in sc["runs"] for f in r["risk_findings"]]
        assert not [f for f in found if f["kind"] in ("write-outside", "read")], found
