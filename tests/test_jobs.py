"""`--jobs N`: several scenarios at once, each on a lab of its own (a worker process with its
own collector, spawner, cgroups and capture). The verdicts must be those of the same scenarios
run one at a time, clause for clause, in the same order; nothing may be left behind.
(Twenty repetitions and the throughput ratio are `make bench`'s: bench/jobs.py.)"""

import json
import os

import psutil
import pytest

from sessions import cli
from sessions.lab.cpus import default_jobs
from tests.backup_lab import client_path

pytestmark = [pytest.mark.root(reason="runs the lab: BCC, cgroups, packet capture, sandbox"),
              pytest.mark.slow, pytest.mark.live]


def _judged(doc: dict) -> list:
    """Every scenario's id, clause statuses and instrument check, in order; and for a grade
    every attempt's gate statuses and outcome."""
    runs = [(r["id"], {g: v["status"] for g, v in r["gates"].items()}, r["valid"], r["success"])
            for s in (doc["grade"] or {"scenarios": {}})["scenarios"].values()
            for r in s["runs"]]
    return [(s["id"], {c["id"]: c["status"] for c in s["clauses"]}, s["instrument_check"])
            for s in doc["scenarios"]] + runs


def _run(tmp_path, name: str, *args: str) -> tuple[int, dict]:
    out = tmp_path / f"{name}.json"
    rc = cli.main([*args, "--headless", "--json", str(out)])
    return rc, json.loads(out.read_text())


def _labs() -> list:
    return [p for p in psutil.process_iter(["name", "cmdline"])
            if "evlab-lab" in (p.info["name"] or "")]


def test_the_seeded_suite_at_once_is_judged_as_one_at_a_time(tmp_path, seeded_run):
    ran, out = seeded_run   # `run --all --jobs 1`, once per worker (conftest.py)
    rc1, one = ran.returncode, json.loads((out / "out.json").read_text())
    rc2, two = _run(tmp_path, "two", "run", "--all", "--jobs", "2", "--archive",
                    str(tmp_path / "two.tar.gz"))
    assert rc1 == rc2 == 0
    assert _judged(two) == _judged(one)
    assert {s["id"] for s in two["scenarios"]} == {s["id"] for s in one["scenarios"]}
    assert cli.main(["replay", str(tmp_path / "two.tar.gz"), "--headless"]) == 0
    assert _labs() == []


def test_grade_attempts_at_once_are_judged_as_one_at_a_time(tmp_path):
    client = f"{client_path('baseline')} {{host}} {{port}} {{source}}"
    rc1, one = _run(tmp_path, "one", "grade", "--client", client, "--attempts", "2",
                    "--jobs", "1")
    rc2, two = _run(tmp_path, "two", "grade", "--client", client, "--attempts", "2",
                    "--jobs", "2")
    assert rc1 == rc2 == 0
    assert _judged(two) == _judged(one)
    assert list(two["grade"]["scenarios"]) == list(one["grade"]["scenarios"])
    assert two["grade"]["overall"]["pass_hat_k"] == 1
    assert _labs() == []


def test_jobs_default_from_the_cpus_and_refuse_the_dashboard(capsys):
    from sessions.cli.dispatch import main
    assert default_jobs() == max(1, len(os.sched_getaffinity(0)) // 2)
    with pytest.raises(SystemExit):
        cli.main(["run", "--all", "--jobs", "0", "--headless"])
    assert main(["run", "--all", "--jobs", "2"]) == 2
    assert "--jobs runs headless only" in capsys.readouterr().err
