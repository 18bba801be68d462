"""The whole instrument, headless, as a user runs it: the article's figures in the JSON document,
the archive, the reports, replay, degradation, and a clean exit on SIGTERM and Ctrl-C."""

import json
import signal
import subprocess
import sys
import tarfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import psutil
import pytest

from sessions.lab.schedule import run_session
from sessions.lab.session import Options
from sessions.output import report
from sessions.output.archive import ArchiveWriter, load_archive
from sessions.output.judged import JudgedStream
from sessions.spec.scenario import load_dir
from sessions.stream.events import ScenarioJudged, Verdict
from sessions.stream.evidence import EvidenceBook
from sessions.stream.replay import replay
from tests.leftovers import (
    cgroups_of,
    listening_ports,
    owned_dirs,
    processes_using,
    prog_ids_held,
    still_loaded,
    wait_gone,
)
from tests.support import evlab_in

ROOT = Path(__file__).resolve().parent.parent
EVLAB = str(ROOT / ".venv" / "bin" / "evlab")
root_only = pytest.mark.root(reason="the BCC collector needs root")


def evlab(*args, cwd, timeout=240):
    return subprocess.run([EVLAB, *map(str, args)], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout)


@pytest.fixture(scope="module")
def full_run(seeded_run):
    """The seeded suite run once per worker (conftest.py seeded_run, in the worker's process;
    `evlab run --all` as a process of its own is test_hardening's, in a namespace with only
    lo, and this file's interrupted runs)."""
    return seeded_run


def _scenario(doc, sid):
    return next(s for s in doc["scenarios"] if s["id"] == sid)


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_full_suite_is_detected_with_the_articles_figures(full_run):
    result, out = full_run
    assert result.returncode == 0, result.stderr
    doc = json.loads((out / "out.json").read_text())
    assert doc["collector"] == "bcc" and doc["packets"] == "on"
    assert doc["summary"]["detected"] == 8 and doc["summary"]["missed"] == 0
    assert all(s["instrument_check"] == "detected" for s in doc["scenarios"])

    def figure(sid, section, name):
        return [i[section][name] for i in _scenario(doc, sid)["invocations"]]

    assert figure("baseline", "kernel", "connects") == [2, 1]
    assert figure("unexpected-egress", "kernel", "connects") == [3, 2]
    assert [f["hash_file"] for f in figure("hash-storm", "kernel", "function_calls")] \
        == [256, 256]
    assert figure("hash-storm", "kernel", "source_read_bytes")[1] == 134_217_728
    assert figure("retry", "figures", "receiver payload bytes")[0] == 589_824
    assert figure("retry", "verifier", "match") == [True, True]
    assert figure("corrupt-upload", "figures", "rejections") == [3, 3]
    assert figure("corrupt-upload", "verifier", "saved") == [False, False]
    assert figure("false-success", "kernel", "connects") == [0, 0]
    assert figure("false-success", "packets", "count") == [0, 0]
    assert figure("false-success", "verifier", "saved") == [False, False]
    assert [i["exit_code"] for i in _scenario(doc, "false-success")["invocations"]] == [0, 0]
    decoy = f"127.0.0.1:{_ports(out, 'unexpected-egress')['decoy']}"
    assert decoy in figure("unexpected-egress", "kernel", "connect_destinations")[0]
    corrupt = {c["id"]: c["status"] for c in _scenario(doc, "corrupt-upload")["clauses"]}
    assert corrupt["integrity"] == "fail" and corrupt["mismatch-rejected"] == "pass"
    storm = {c["id"]: c["status"] for c in _scenario(doc, "hash-storm")["clauses"]}
    assert storm["hash-work"] == "fail" and storm["cpu-budget"] == "pass"
    for s in doc["scenarios"]:
        assert s["client"]["sha256"] and len(s["clauses"]) == 8
        for c in s["clauses"]:
            assert c["reason"] and (c["evidence"] or c["status"] == "not-applicable")


def _ports(out: Path, sid: str) -> dict:
    loaded = load_archive(out / "s.tar.gz")
    started = next(e for e in loaded.events if type(e).__name__ == "ScenarioStarted"
                   and e.scenario == sid)
    return {"receiver": started.endpoint_port, "decoy": started.decoy_port}


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_reports_from_the_archive(full_run):
    _, out = full_run
    archive = out / "s.tar.gz"
    junit = evlab("report", archive, "--format", "junit", cwd=out)
    assert junit.returncode == 0, junit.stderr
    tree = ET.fromstring(junit.stdout.split("?>", 1)[1])
    assert len(tree.findall("testsuite")) == 8
    assert len(tree.findall(".//testcase")) == 64 and not tree.findall(".//failure")
    md = evlab("report", archive, "--format", "md", cwd=out)
    with tarfile.open(archive) as tar:
        assert md.stdout == tar.extractfile("report.md").read().decode()
        names = set(tar.getnames())
    assert {"manifest.json", "events.jsonl", "verdicts.json", "verifier.jsonl"} <= names
    assert {f"pcap/{s.id}.pcap" for s in load_dir()} <= names
    assert {f"records/{s.id}.receiver.jsonl" for s in load_dir()} <= names
    manifest = load_archive(archive).manifest
    assert manifest["collector"] == "bcc" and not manifest["partial"]
    assert set(manifest["clients"]) == {s.id for s in load_dir()}


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_archive_round_trip_and_replay_rejudges_identically(tmp_path, built_clients):
    book = EvidenceBook()
    stream = JudgedStream(book=book)
    writer = ArchiveWriter(tmp_path / "staging", book, stream)
    scenarios = [s for s in load_dir() if s.id in ("baseline", "retry")]
    run_session(stream, scenarios, tmp_path / "staging", Options())
    loaded = load_archive(writer.finish(tmp_path / "s.tar.gz"))
    written = book.events
    assert loaded.events == written  # exactly the events that were written

    rederived = []
    replay(loaded.events, JudgedStream(rederived.append))

    def judgements(events):
        return [(e.scenario, e.clause, e.status, e.reason, e.evidence) for e in events
                if isinstance(e, Verdict)] + [(e.scenario, e.instrument_check) for e in events
                                              if isinstance(e, ScenarioJudged)]

    assert judgements(rederived) == judgements(written)
    assert report.markdown(EvidenceBook.of(rederived)) == report.markdown(book)


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_without_a_kernel_collector_nothing_kernel_based_passes(tmp_path, built_clients):
    result = evlab("run", "--all", "--headless", "--collector", "none", "--json",
                   tmp_path / "none.json", cwd=tmp_path)
    assert result.returncode == 3, result.stderr  # not missed; evidence missing
    doc = json.loads((tmp_path / "none.json").read_text())
    assert doc["collector"] == "none"
    assert any(m["name"] == "kernel-events" for m in doc["capabilities"]["missing"])
    assert doc["summary"]["missed"] == 0 and doc["summary"]["inconclusive"] >= 1
    for s in doc["scenarios"]:
        clauses = {c["id"]: c for c in s["clauses"]}
        assert clauses["hash-work"]["status"] == "inconclusive"
        assert clauses["cpu-budget"]["status"] == "inconclusive"
        assert clauses["destination-only"]["status"] in ("inconclusive", "fail")
        for inv in s["invocations"]:
            assert inv["kernel"]["connects"] is None and inv["kernel"]["cpu_ns"] is None
    egress = {c["id"]: c for c in _scenario(doc, "unexpected-egress")["clauses"]}
    assert egress["destination-only"]["status"] == "fail"  # the decoy and the wire saw it


@pytest.mark.slow
@pytest.mark.live
@root_only
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "ctrl-c"])
def test_interrupted_run_leaves_nothing_behind(tmp_path, built_clients, sig):
    proc = subprocess.Popen([EVLAB, "run", "--all", "--headless", "--archive",
                             str(tmp_path / "partial.tar.gz")], cwd=tmp_path,
                            stderr=subprocess.PIPE, text=True)
    seen = []
    for line in proc.stderr:  # wait until it is halfway
        seen.append(line)
        if line.startswith("[3/8]"):
            break
    # what it holds while it runs: the next scenario's servers may not have started yet
    deadline = time.monotonic() + 30
    while not (servers := processes_using(dirs := owned_dirs(proc.pid))):
        assert proc.poll() is None and time.monotonic() < deadline, "no server seen running"
        time.sleep(0.005)
    programs = prog_ids_held(proc.pid)
    assert dirs and programs and servers
    proc.send_signal(sig)
    _, rest = proc.communicate(timeout=60)
    assert proc.returncode == 130, "".join(seen) + rest
    assert "Traceback" not in rest
    assert wait_gone(dirs) == []                       # no receiver, decoy or client
    assert [d for d in dirs if d.exists()] == []        # no temp dir
    assert still_loaded(programs) == set()             # no BPF program of its own
    assert cgroups_of(proc.pid) == set()               # no client cgroup
    assert listening_ports(servers) == set()           # no bound port
    partial = load_archive(tmp_path / "partial.tar.gz")
    assert partial.partial and partial.manifest["partial"]
    assert "interrupted" in partial.manifest["end_reason"]


def test_import_rule_no_textual_outside_tui():
    code = ("import sys, sessions.cli, sessions.lab.session, sessions.output.report, "
            "sessions.output.archive, probes.collectors.choose, probes.packets.capture, "
            "probes.doctor.preflight, "
            "sessions.lab.harness, sessions.cli.dispatch, sessions.cli.entry\n"
            "print('textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
    lint = subprocess.run([str(ROOT / ".venv" / "bin" / "lint-imports"), "--no-cache"],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert lint.returncode == 0, lint.stdout
    assert "Only tui imports Textual KEPT" in lint.stdout


@pytest.mark.slow
@pytest.mark.live
@root_only
def test_a_hanging_client_is_killed_after_its_timeout_and_judged(tmp_path, built_clients):
    hang = tmp_path / "hang.toml"
    hang.write_text('description = "a client that never finishes"\n'
                    '[client]\npath = "/bin/sleep"\nargs = ["30"]\ntimeout_s = 1\n'
                    '[expect]\nfail = ["integrity", "honest-outcome"]\n')
    started = time.monotonic()
    result = evlab_in("run", hang, "--headless", "--json", tmp_path / "hang.json", cwd=tmp_path)
    assert time.monotonic() - started < 20
    doc = json.loads((tmp_path / "hang.json").read_text())
    (scenario,) = doc["scenarios"]
    assert [i["timed_out"] for i in scenario["invocations"]] == [True, True]
    assert [i["exit_code"] for i in scenario["invocations"]] == [None, None]
    clauses = {c["id"]: c for c in scenario["clauses"]}
    assert clauses["integrity"]["status"] == "fail"
    assert clauses["honest-outcome"]["status"] == "fail"   # it never gave its caller an outcome
    assert clauses["honest-outcome"]["reason"] == (
        "invocation 1 never exited, so it never gave an outcome: killed by evlab at its 1 s "
        "timeout")
    assert result.returncode == 0, result.stdout   # judged as it declared: both fail
    assert not [p for p in psutil.process_iter(["cmdline"])
                if p.info["cmdline"] == ["/bin/sleep", "30"]]
