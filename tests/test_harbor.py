"""Harbor's verifier files (sessions/output/harbor.py): `--reward` writes the flat object of
named numbers Harbor reads (`reward` the headline), `--ctrf` a CTRF report that holds against
the format's published JSON schema (tests/data/ctrf.schema.json: ctrf-io/ctrf
schema/ctrf.schema.json at 84ddec5, MIT licensed), one test per clause and attempt."""

import json
from pathlib import Path

import jsonschema
import pytest

from tests.support import evlab_in

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = json.loads((ROOT / "tests" / "data" / "ctrf.schema.json").read_text())


@pytest.mark.root(reason="grading runs the lab: BPF, mounts, the sandbox")
def test_reward_and_ctrf_files_are_what_harbor_and_ctrf_readers_take(tmp_path):
    files = {name: tmp_path / f"{name}.json" for name in ("reward", "ctrf", "json")}
    done = evlab_in("grade", "--headless", "--task", "mirror", "--attempts", "2", "--scenario",
                    "first", "--client", "/usr/bin/rsync -a --inplace --delete {src}/ {dst}/",
                    *(a for name, path in files.items() for a in (f"--{name}", path)))
    assert done.returncode == 1, done.stderr   # --inplace rewrites files in place: it fails
    doc = json.loads(files["json"].read_text())
    overall = doc["grade"]["overall"]

    reward = json.loads(files["reward"].read_text())
    assert all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in reward.values())
    assert reward["reward"] == overall["pass_at_1"] == 0.0
    assert reward["valid_attempts"] == 2 and reward["pass_hat_k"] == overall["pass_hat_k"]
    assert reward["clause:no-rewrite-in-place"] == 0.0 and reward["clause:mirrored"] == 1.0

    report = json.loads(files["ctrf"].read_text())
    jsonschema.Draft7Validator(SCHEMA).validate(report)
    tests = report["results"]["tests"]
    verdicts = [(sc["id"], v["id"], v["status"]) for sc in doc["scenarios"]
                for v in sc["clauses"]]
    assert len(tests) == len(verdicts) == 2 * len(doc["scenarios"][0]["clauses"])
    assert [t["name"] for t in tests] == [f"{s} {c}" for s, c, _ in verdicts]
    failed = {t["name"] for t in tests if t["status"] == "failed"}
    assert failed == {f"{s} no-rewrite-in-place" for s in ("first@1", "first@2")}
    summary = report["results"]["summary"]
    assert summary["tests"] == len(tests) and summary["failed"] == 2
    assert 0 < summary["start"] <= summary["stop"]
