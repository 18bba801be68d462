"""Scenario files: the seeded ones load; a malformed one names the file, the key and what was
expected."""

import shutil
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessions.spec.scenario import (
    ScenarioError,
    expand,
    load_dir,
    parse,
    placeholders_of,
    select,
    suite_dir,
)
from sessions.spec.task import load_task
from tests.backup_lab import BEHAVIOURS, client_path

SEEDED_FAILURES = {
    "baseline": (), "retry": (), "false-success": ("integrity", "honest-outcome"),
    "hash-storm": ("hash-work",), "unexpected-egress": ("destination-only",),
    "redundant-upload": ("unchanged-no-upload",), "busy-wait": ("cpu-budget",),
    "corrupt-upload": ("integrity", "bounded-recovery"),
}


def test_the_eight_seeded_scenarios_ship_as_files():
    scenarios = load_dir()
    assert [s.id for s in scenarios] == ["baseline", "false-success", "hash-storm",
                                         "unexpected-egress", "redundant-upload", "busy-wait",
                                         "corrupt-upload", "retry"]
    for s in scenarios:
        assert s.file.parent == suite_dir("seeded")
        assert s.expect_fail == SEEDED_FAILURES[s.id]
        assert s.client == client_path(s.id) and s.id in BEHAVIOURS
    by_id = {s.id: s for s in scenarios}
    assert by_id["corrupt-upload"].expect_pass == ("mismatch-rejected",)
    assert by_id["retry"].faults == ({"id": "retry-f1", "kind": "drop", "invocation": 1,
                                      "transfer": 1, "after_bytes": 65536},)


def test_argv_fills_placeholders(tmp_path):
    s = parse('[client]\nbehaviour = "baseline"\n', tmp_path / "x.toml")
    assert s.argv({"host": "127.0.0.1", "port": "4000", "source": str(tmp_path / "src"),
                   "decoy_port": "4001"}) == [
        str(client_path("baseline")), "127.0.0.1", "4000", str(tmp_path / "src"), "4001"]
    assert s.id == "x" and s.timeout_s == 20


@pytest.mark.parametrize("text, key, expected", [
    ("", "client", "a [client] table"),
    ("[client]\n", "client", "exactly one of behaviour or path"),
    ('[client]\nbehaviour = 3\n', "client.behaviour", "a fixture behaviour name"),
    ('[client]\nbehaviour = "baseline"\ntimeout_s = "ten"\n', "client.timeout_s",
     "a number of seconds"),
    ('[client]\nbehaviour = "baseline"\ntimeout_s = 0\n', "client.timeout_s", "in (0, 600]"),
    ('[client]\nbehaviour = "baseline"\ncolour = "red"\n', "client.colour", "one of args"),
    ('[client]\npath = "/bin/true; rm -rf /"\n', "client.path", "shell syntax"),
    ('[client]\npath = "$(whoami)"\n', "client.path", "shell syntax"),
    ('[client]\nbehaviour = "baseline"\nargs = ["{port}", "{evil}"]\n', "client.args",
     "placeholders"),
    ('[client]\nbehaviour = "baseline"\n[expect]\nfail = ["speed"]\n', "expect.fail",
     "clause ids"),
    ('[client]\nbehaviour = "baseline"\n[expect]\nfail = "integrity"\n', "expect.fail",
     "a list of clause ids"),
    ('[client]\nbehaviour = "baseline"\n[faults]\ndrop_first_upload_after = 1\n', "faults",
     "an array of tables"),
    ('[client]\nbehaviour = "baseline"\n[[faults]]\nkind = "explode"\n', "faults[0].kind",
     "one of drop"),
    ('[client]\nbehaviour = "baseline"\n[[faults]]\nkind = "drop"\nafter_bytes = -1\n',
     "faults[0].after_bytes", "a byte count"),
    ('[client]\nbehaviour = "baseline"\n[[faults]]\nkind = "crash"\nphase = "later"\n',
     "faults[0].phase", "before-rename"),
    ('[client]\nbehaviour = "baseline"\n[[faults]]\nkind = "reset"\nat_byte = 9\n',
     "faults[0].direction", '"up" or "down"'),
    ('[client]\nbehaviour = "baseline"\n[[faults]]\nkind = "latency"\ndirection = "up"\n'
     'ms = 5\nat_byte = 3\n', "faults[0].at_byte", "one of direction"),
    ('[client]\nbehaviour = "baseline"\n[noise]\nkinds = ["earthquake"]\n', "noise.kinds",
     "a list from traffic"),
    ('[client]\nbehaviour = "baseline"\n[environment]\nstate = "sunny"\n', "environment.state",
     '"fresh" or "stale"'),
    ('[client]\nbehaviour = "baseline"\n[environment]\nstore = "full"\n', "environment.store",
     '"fresh" or "stale"'),
    ('[client]\nbehaviour = "baseline"\n[environment]\nload_rates = { traffic = 200 }\n',
     "environment.load_rates", "nothing: the task has no [load]"),
    ('[client]\nbehaviour = "baseline"\n[environment]\nbefore_first = "grow"\n',
     "environment.before_first", "nothing: the task has no [steps]"),
    ('client = "baseline"\n', "client", "a table"),
    ('[client\n', "(syntax)", "valid TOML"),
    ('id = "Bad Id"\n[client]\nbehaviour = "baseline"\n', "id", "lowercase"),
])
def test_malformed_files_name_file_key_and_expectation(tmp_path, text, key, expected):
    path = tmp_path / "broken.toml"
    with pytest.raises(ScenarioError) as err:
        parse(text, path)
    message = str(err.value)
    assert message.startswith(f"{path}: {key}: expected ")
    assert expected in message
    assert "\n" not in message


@pytest.mark.parametrize("fault, key, expected", [
    # each of these the proxy or the receiver would refuse mid-session: refused at load instead
    ('kind = "bandwidth"\ndirection = "up"\nbytes_per_s = 0', "bytes_per_s", "from 1 to 10^12"),
    ('kind = "bandwidth"\ndirection = "up"\nbytes_per_s = 1.5', "bytes_per_s", "bytes per second"),
    ('kind = "latency"\ndirection = "up"\nms = 2.5', "ms", "milliseconds from 0 to 600,000"),
    ('kind = "latency"\ndirection = "up"\nms = -1', "ms", "milliseconds"),
    ('kind = "corrupt"\ndirection = "up"\nat_byte = 4611686018427387905', "at_byte",
     "a byte offset"),
    ('kind = "stall"\nafter_bytes = 1\nseconds = nan', "seconds", "seconds from 0 to 600"),
    ('kind = "stall"\nafter_bytes = 1', "seconds", "seconds from 0 to 600"),
    ('kind = "drop"\nafter_ms = 600001', "after_ms", "milliseconds into the transfer"),
    ('kind = "drop"\nafter_ms = 5\nafter_bytes = 5', "after_bytes", "exactly one trigger"),
    ('kind = "reset"\ndirection = "up"\nat_byte = 1\nid = "mine"', "id", "one of at_byte"),
])
def test_a_fault_the_proxy_or_receiver_would_refuse_is_refused_at_load(tmp_path, fault, key,
                                                                       expected):
    path = tmp_path / "faulty.toml"
    with pytest.raises(ScenarioError) as err:
        parse(f'[client]\nbehaviour = "baseline"\n[[faults]]\n{fault}\n', path)
    assert str(err.value).startswith(f"{path}: faults[0].{key}: expected ")
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_a_user_adds_a_scenario_by_adding_a_file(tmp_path):
    (tmp_path / "mine.toml").write_text(
        '# my own client\n[client]\npath = "/bin/true"\nargs = []\n'
        '[expect]\nfail = ["integrity"]\n')
    (mine,) = load_dir(tmp_path)
    assert mine.id == "mine" and mine.client == Path("/bin/true").resolve() and mine.args == ()
    chosen = select([str(tmp_path / "mine.toml"), "baseline"], load_dir())
    assert [s.id for s in chosen] == ["mine", "baseline"]


def test_unknown_scenario_name_is_a_clear_error():
    with pytest.raises(ScenarioError, match="a scenario id .*baseline.* or a .toml file"):
        select(["nonesuch"], load_dir())


def test_duplicate_ids_are_rejected(tmp_path):
    for name in ("a.toml", "b.toml"):
        (tmp_path / name).write_text('id = "same"\n[client]\nbehaviour = "baseline"\n')
    with pytest.raises(ScenarioError, match="a unique id"):
        load_dir(tmp_path)


@given(st.text(alphabet="{}abhostpruced_:.!0 ", max_size=40))
def test_templates_substitute_documented_names_literally_or_are_refused(text):
    values = {"host": "H", "port": "P", "source": "S", "decoy_port": "D"}
    names = placeholders_of(text, values)
    if names is None:
        return   # refused when the scenario or command is read
    # for what it accepts (plain documented names, doubled braces) str.format agrees
    assert names <= set(values) and expand(text, values) == text.format(**values)


_toml_value = st.recursive(
    st.one_of(st.integers(-10**20, 10**20), st.floats(), st.booleans(), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text("abcdefghijklmnopqrstuvwxyz_", max_size=8),
                                            inner, max_size=3)), max_leaves=12)
_keys = st.sampled_from(["id", "client", "behaviour", "path", "args", "timeout_s", "faults",
                         "kind", "after_bytes", "seconds", "expect", "fail", "noise", "kinds",
                         "environment", "store", "deny_egress", "invocation", "x"])


def _toml(value, depth=0) -> str:
    import json as _json
    if isinstance(value, dict):
        return "{" + ", ".join(f'"{k}" = {_toml(v, depth + 1)}' for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v, depth + 1) for v in value) + "]"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value).replace("inf", "inf").replace("nan", "nan")
    return _json.dumps(value) if isinstance(value, str) else str(value)


@given(st.dictionaries(_keys, st.one_of(_toml_value, st.dictionaries(_keys, _toml_value,
                                                                       max_size=4)),
                       max_size=6), st.text(max_size=30))
def test_any_scenario_file_is_a_scenario_or_one_scenario_error(tables, junk):
    text = "\n".join(f"{k} = {_toml(v)}" for k, v in tables.items())
    for candidate in (text, junk, text + "\n" + junk, "a = " + "[" * 3000 + "]" * 3000):
        try:
            parse(candidate, "fuzz.toml")
        except ScenarioError as e:
            assert "\n" not in str(e) and str(e).startswith("fuzz.toml: ")


@given(st.dictionaries(st.sampled_from(["client", "grade", "sandbox", "x"]),
                       st.dictionaries(st.sampled_from(["command", "env", "timeout_s",
                                                        "attempts", "scenarios", "memory_mib",
                                                        "pids", "deny_egress", "y"]),
                                       _toml_value, max_size=4), max_size=3))
def test_any_grade_file_is_a_spec_or_one_client_spec_error(tmp_path_factory, tables):
    from sessions.spec.client_spec import ClientSpecError, from_file
    path = tmp_path_factory.mktemp("g") / "g.toml"
    path.write_text("\n".join(f"[{t}]\n" + "\n".join(f"{k} = {_toml(v)}" for k, v in body.items())
                              for t, body in tables.items()))
    try:
        from_file(path)
    except ClientSpecError as e:
        assert "\n" not in str(e)


def test_a_state_is_the_tasks_and_the_old_store_key_still_names_it(tmp_path):
    """environment.state names one of the task's [states] (backup's stale); `store`, its name
    in scenario files from before tasks were folders, reads the same ("empty": fresh)."""
    client = '[client]\nbehaviour = "baseline"\n'
    assert parse(client + '[environment]\nstate = "stale"\n', tmp_path / "a.toml").state == "stale"
    assert parse(client + '[environment]\nstore = "stale"\n', tmp_path / "b.toml").state == "stale"
    assert parse(client + '[environment]\nstore = "empty"\n', tmp_path / "c.toml").state == ""
    assert parse(client, tmp_path / "d.toml").state == ""


def test_a_behaviour_is_a_build_of_the_tasks_reference_client(tmp_path):
    """client.behaviour runs the task's [client] reference with that name; a task without one
    has no behaviours to name."""
    assert parse('[client]\nbehaviour = "retry"\n', tmp_path / "a.toml").client \
        == client_path("retry").resolve()
    folder = tmp_path / "task"
    shutil.copytree(load_task().folder, folder)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace('reference = "../build/client-{behaviour}"\n', ""))
    with pytest.raises(ScenarioError, match="client.behaviour: expected a client.path: the "
                                            "task has no reference client"):
        parse('[client]\nbehaviour = "retry"\n', tmp_path / "b.toml", load_task(folder))


@pytest.mark.parametrize("line, expected", [
    ("load_rates = { traffic = 0 }", "a table of requests per second in (0, 200] by load name "
                                     "(traffic)"),
    ("load_rates = { traffic = 201 }", "in (0, 200]"),
    ("load_rates = { traffic = -5 }", "in (0, 200]"),
    ("load_rates = { traffic = nan }", "in (0, 200]"),
    ("load_rates = { traffic = true }", "in (0, 200]"),
    ('load_rates = { traffic = "200" }', "in (0, 200]"),
    ("load_rates = { web = 100 }", "by load name (traffic)"),
    ("load_rates = 200", "by load name (traffic)"),
])
def test_a_load_rate_is_one_of_the_tasks_loads_within_its_bounds(tmp_path, line, expected):
    """[environment] load_rates: a rate in place of task.toml's, for a load the task has, in
    the bounds a task's own rate is held to; refused in one line naming the key."""
    reload = load_task("reload")
    path = tmp_path / "heavy.toml"
    text = '[client]\npath = "/bin/true"\n[environment]\nvalues = { version = "2" }\n'
    with pytest.raises(ScenarioError) as err:
        parse(text + line + "\n", path, reload)
    assert str(err.value).startswith(f"{path}: environment.load_rates: expected ")
    assert expected in str(err.value) and "\n" not in str(err.value)
    assert parse(text, path, reload).load_rates == ()
    given = parse(text + "load_rates = { traffic = 200 }\n", path, reload)
    assert given.load_rates == (("traffic", 200.0),)


def test_a_step_before_the_first_invocation_is_one_of_the_tasks(tmp_path):
    reload = load_task("reload")
    path = tmp_path / "broken.toml"
    text = '[client]\npath = "/bin/true"\n[environment]\nvalues = { version = "2" }\n'
    assert parse(text + 'before_first = "break"\n', path, reload).before_first == "break"
    assert parse(text, path, reload).before_first == ""
    with pytest.raises(ScenarioError, match=r'environment.before_first: expected "grow" or '
                                            r'"break"$'):
        parse(text + 'before_first = "melt"\n', path, reload)
