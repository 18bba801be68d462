"""evlab as a library (sessions/cli/api.py, docs/api.md): the document's example runs as
written; a grade returns what `evlab grade` judges of the same client; every mistake is one
EvlabError with the command line's line, leaving nothing behind; the Harbor files are what a
verifier reads."""

import json
import os
import re
from pathlib import Path

import psutil
import pytest

import evlab
from tests.leftovers import owned_dirs
from tests.support import evlab_in

ROOT = Path(__file__).resolve().parent.parent
root_only = pytest.mark.root(reason="grading runs the lab: BPF, mounts, the sandbox")
RSYNC = ["/usr/bin/rsync", "-a", "--delete", "{src}/", "{dst}/"]


def _example() -> str:
    (example,) = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "api.md").read_text(),
                            re.S)
    return example


def test_the_documents_example_is_the_file_mypy_checks():
    assert (ROOT / "docs" / "examples" / "grade.py").read_text().endswith(_example())


@root_only
def test_the_documents_example_runs_as_written(capsys):
    exec(compile(_example(), "docs/api.md", "exec"), {})
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:3] == ["0", "1.0"]
    assert any(" mirrored pass " in line for line in lines)


@root_only
def test_a_grade_is_what_the_command_line_judges_of_the_same_client(tmp_path):
    result = evlab.grade(RSYNC, task="mirror", attempts=1, scenarios=["first"],
                         reward=tmp_path / "api-reward.json")
    # the command line's parser and dispatch, in this process (its collector reused)
    done = evlab_in("grade", "--headless", "--task", "mirror", "--attempts", "1", "--scenario",
                    "first", "--client", " ".join(RSYNC), "--reward", tmp_path / "cli-reward.json")
    assert done.returncode == result.status == 0
    assert done.stderr.strip().splitlines()[-1] == result.summary
    assert result.success_rate == 1.0
    assert {(v.scenario, v.clause, v.status) for v in result.verdicts()} == {
        (sc["id"], c, st) for sc in result.document["scenarios"]
        for c, st in ((v["id"], v["status"]) for v in sc["clauses"])}
    assert json.loads((tmp_path / "api-reward.json").read_text()) == \
        json.loads((tmp_path / "cli-reward.json").read_text())


def evlab_leftovers() -> tuple:
    """This process's evlab temp folders and children."""
    return owned_dirs(os.getpid()), psutil.Process().children(recursive=True)


@pytest.mark.parametrize(("call", "line"), [
    (lambda: evlab.grade(RSYNC, attempts="x"),
     "grade: argument --attempts: invalid int value: 'x'"),
    (lambda: evlab.grade(RSYNC, task="no-such-task"), "no-such-task"),
    (lambda: evlab.grade(RSYNC, task="mirror", scenarios=["nope"]), "nope"),
    (lambda: evlab.grade(RSYNC, spec="grade.toml"), "exactly one"),
    (lambda: evlab.grade(RSYNC, colour="red"), "unknown option(s) colour"),
    (lambda: evlab.run(["no-such-scenario"]), "no-such-scenario"),
    (lambda: evlab.run(suite="--all"), "argument --suite: invalid choice"),
    (lambda: evlab.campaign("/nonexistent/campaign.toml"), "/nonexistent/campaign.toml"),
])
def test_every_mistake_is_one_line_and_leaves_nothing(call, line):
    before = evlab_leftovers()
    with pytest.raises(evlab.EvlabError) as raised:
        call()
    message = str(raised.value)
    assert line in message and "\n" not in message and "Traceback" not in message
    assert evlab_leftovers() == before


def test_an_output_that_cannot_be_written_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(evlab.EvlabError, match=r"--reward .*: not a regular file"):
        evlab.grade(RSYNC, task="mirror", reward=tmp_path)   # a directory
    assert list(tmp_path.iterdir()) == []


@root_only
def test_a_run_returns_its_scenarios_verdicts():
    result = evlab.run(["baseline", "outside"], task="mirror")
    assert result.status == 0 and result.grade is None and result.success_rate is None
    assert {s["id"]: s["instrument_check"] for s in result.document["scenarios"]} == {
        "baseline": "detected", "outside": "detected"}
    assert ("outside", "writes-inside", "fail") in {
        (v.scenario, v.clause, v.status) for v in result.verdicts()}


MIRROR_CAMPAIGN = """
[campaign]
name = "mirrors"
task = "mirror"
scenarios = ["first"]
attempts = 1
[[client]]
name = "rsync-delete"
command = ["/usr/bin/rsync", "-a", "--delete", "{src}/", "{dst}/"]
[[client]]
name = "rsync-keep"
command = ["/usr/bin/rsync", "-a", "{src}/", "{dst}/"]
"""


@root_only
def test_a_campaign_returns_its_board(tmp_path):
    (tmp_path / "campaign.toml").write_text(MIRROR_CAMPAIGN)
    result = evlab.campaign(tmp_path / "campaign.toml", dir=tmp_path / "run", jobs=1)
    assert result.board is not None and result.status == 0
    rank = [row["name"] for row in result.document["campaign"]["leaderboard"]]
    assert rank[0] == "rsync-delete"


def test_the_command_line_and_the_library_make_the_same_request(tmp_path):
    """One frozen request, built by the same code from flags or keyword arguments."""
    import dataclasses

    from sessions.cli.parser import build_parser, request_of
    from sessions.spec.request import grade_request
    flags = request_of(build_parser().parse_args([
        "grade", "--headless", "--task", "mirror", "--client", " ".join(RSYNC), "--attempts",
        "2", "--scenario", "first", "--env", "A=1", "--timeout", "5", "--noise=cpu,twin",
        "--memory", "64", "--no-sandbox", "--deny-egress", "--jobs", "1", "--json",
        str(tmp_path / "x.json")]))
    keywords = grade_request(" ".join(RSYNC), task="mirror", attempts=2, scenarios=["first"],
                             env=["A=1"], timeout=5, noise=["cpu", "twin"], memory_mib=64,
                             sandbox=False, deny_egress=True, jobs=1, json=tmp_path / "x.json")
    assert flags == keywords
    assert keywords.lab.limits.memory_mib == 64 and keywords.env == (("A", "1"),)
    with pytest.raises(dataclasses.FrozenInstanceError):
        keywords.attempts = 3   # type: ignore[misc]


@pytest.mark.parametrize(("argv", "call"), [
    (["grade", "--attempts", "x"], lambda: evlab.grade(RSYNC, attempts="x")),
    (["grade", "--jobs", "0"], lambda: evlab.grade(RSYNC, jobs=0)),
    (["grade", "--timeout", "1e9"], lambda: evlab.grade(RSYNC, timeout="1e9")),
    (["grade", "--collector", "x"], lambda: evlab.grade(RSYNC, collector="x")),
    (["grade", "--noise=cpu,zzz"], lambda: evlab.grade(RSYNC, noise=["cpu", "zzz"])),
    (["grade", "--env", "A B=1"], lambda: evlab.grade(RSYNC, env={"A B": "1"})),
    (["grade", "--memory", "-1"], lambda: evlab.grade(RSYNC, memory_mib=-1)),
    (["run", "--suite=--all"], lambda: evlab.run(suite="--all")),
    (["run", "baseline", "--suite", "seeded"], lambda: evlab.run(["baseline"], suite="seeded")),
])
def test_a_mistake_reads_the_same_from_the_command_line_and_the_library(argv, call, capsys):
    from sessions.cli.dispatch import main
    if argv[0] == "grade":
        argv = [*argv, "--client", " ".join(RSYNC)]
    try:
        code = main([*argv, "--headless"])
    except SystemExit as e:   # argparse's own refusals
        code = e.code
    line = capsys.readouterr().err.strip()
    with pytest.raises(evlab.EvlabError) as raised:
        call()
    assert code == 2 and line == f"evlab: {raised.value}"
