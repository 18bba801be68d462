"""`evlab campaign` for real: three clients (the fixture's C baseline, the Python client written
from fixture/backup/protocol.md, the C build that uploads when it need not) on two scenarios × two
attempts, here and on a real multi-node Ray cluster (Ray's own test cluster: a head and two
worker raylets on this machine); the verdicts must be the same attempt for attempt. A node
killed mid-campaign costs attempts that are reported lost and run again; a file changed on its
way to a node makes its attempts invalid; a stopped campaign resumes without redoing
finished attempts."""

import collections
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from probes.boundary.cgroup import sweep_stale as sweep_stale_cgroups
from probes.owned_tmp import sweep_stale
from sessions import cli
from sessions.campaign import driver
from sessions.spec.task import load_task
from tests.backup_lab import client_path

pytestmark = [pytest.mark.root(reason="runs the lab: BCC, cgroups, packet capture, sandbox"),
              pytest.mark.slow, pytest.mark.live]

CLIENTS = Path(__file__).parent / "clients"
ROOT = Path(__file__).resolve().parent.parent
CAMPAIGN = """
[campaign]
name = "three"
scenarios = ["normal", "interrupted"]
attempts = 2
[[client]]
name = "c-baseline"
command = ["./client-baseline", "{host}", "{port}", "{source}"]
[[client]]
name = "py-honest"
command = "python3 client.py {host} {port} {source}"
[[client]]
name = "c-redundant"
command = ["./client-redundant-upload", "{host}", "{port}", "{source}"]
"""
SLEEPY = """import os, runpy, sys, time
time.sleep(1.5)
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "client.py"),
               run_name="__main__")
"""


def _campaign(tmp: Path, text: str) -> Path:
    tmp.mkdir(parents=True, exist_ok=True)
    shutil.copy(CLIENTS / "backup_client.py", tmp / "client.py")
    (tmp / "sleepy.py").write_text(SLEEPY)
    for build in ("baseline", "redundant-upload"):
        shutil.copy(client_path(build), tmp / f"client-{build}")
    (tmp / "campaign.toml").write_text(text)
    return tmp / "campaign.toml"


def _run(tmp: Path, file: Path, *extra: str) -> tuple[int, dict]:
    out = tmp / f"doc-{time.monotonic_ns()}.json"
    rc = cli.main(["campaign", str(file), "--headless", "--dir", str(tmp / "dir"),
                   "--json", str(out), *extra])
    return rc, json.loads(out.read_text())


# the campaign's scenario `normal` alone: its six attempts, for the runs compared with it
NORMAL = CAMPAIGN.replace('scenarios = ["normal", "interrupted"]', 'scenarios = ["normal"]')


def _of_normal(doc: dict) -> dict:
    return {k: v for k, v in _verdicts(doc).items() if ":normal@" in k}


def _verdicts(doc: dict) -> dict:
    """Every attempt's clause and gate statuses and outcome, by attempt id."""
    return {run["id"]: (run["clauses"], {g: v["status"] for g, v in run["gates"].items()},
                        run["valid"], run["success"])
            for entry in doc["campaign"]["clients"].values()
            for scenario in entry["scenarios"].values() for run in scenario["runs"]}


@pytest.fixture(scope="module")
def local_doc(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("local")
    rc, doc = _run(tmp, _campaign(tmp, CAMPAIGN))
    assert rc == 0
    return doc


def test_a_local_campaign_ranks_the_clients_from_their_attempts(local_doc):
    board = local_doc["campaign"]
    assert board["engine"] == "local" and board["progress"]["done"] == 12
    assert [r["name"] for r in board["leaderboard"]] == ["c-baseline", "py-honest",
                                                         "c-redundant"]
    worst = board["leaderboard"][2]
    assert worst["figures"]["pass_at_1"] == 0 and worst["fails_most"]["name"] == "gate re-run"
    assert board["clients"]["py-honest"]["overall"]["pass_hat_k"] == 1
    assert all(ok for _, _, ok, _ in _verdicts(local_doc).values())       # all valid


def test_a_local_campaign_on_two_labs_at_once_judges_as_one_at_a_time(local_doc, tmp_path):
    rc, doc = _run(tmp_path, _campaign(tmp_path, NORMAL), "--jobs", "2")
    assert rc == 0
    assert _verdicts(doc) == _of_normal(local_doc)
    assert doc["campaign"]["progress"]["nodes"]["local"]["done"] == 6
    at_once = _dispatched_at_once(tmp_path / "dir")   # pieces come back in order: maybe 3
    assert len(at_once) >= 2 and set(at_once) == {"local"}


def _dispatched_at_once(directory: Path) -> list[str]:
    """The nodes of the attempts dispatched before the first one came back (a piece's events
    are journalled when it is back)."""
    lines = (directory / "journal.jsonl").read_text().splitlines()
    first_back = next(i for i, x in enumerate(lines) if '"ScenarioStarted"' in x)
    return [json.loads(x)["node"] for x in lines[:first_back] if '"AttemptDispatched"' in x]


@pytest.fixture(scope="module")
def cluster():
    """A head (no evlab resource: it runs nothing) and two evlab nodes, each a raylet of its
    own; Ray's files go to a temp directory removed afterwards, straight under /tmp: its
    socket paths are ~70 characters deeper and AF_UNIX allows 107 (a worker's TMPDIR is deeper)."""
    from ray.cluster_utils import Cluster
    temp = tempfile.mkdtemp(prefix="ray-", dir="/tmp")
    before = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = temp
    c = None
    try:
        # no log monitor: the engine asks for no worker's output (log_to_driver=False)
        c = Cluster(initialize_head=True, head_node_args={
            "num_cpus": 1, "include_dashboard": False, "include_log_monitor": False})
        workers = [c.add_node(num_cpus=1, resources={"evlab": 1}, include_log_monitor=False)
                   for _ in range(2)]
        c.wait_for_nodes()
        yield c, workers
    finally:
        if c is not None:
            c.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
        if before is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = before


THREE = ("c-baseline", "py-honest", "c-redundant")   # the local campaign's clients


@pytest.fixture(scope="module")
def ray_doc(cluster, tmp_path_factory):
    """One campaign on the cluster, two labs at once on each node, for the tests that read it:
    the local campaign's three clients on `normal` (its six attempts), `py` whose client.py is
    changed on its way to the nodes, and `c-mine`, the C baseline on a copy of backup's folder
    (a task of the user's), two attempts each."""
    c, _ = cluster
    tmp = tmp_path_factory.mktemp("ray")
    _user_copy_of_backup(tmp / "my-backup")
    text = NORMAL + \
        '[[client]]\nname = "py"\ncommand = "python3 client.py {host} {port} {source}"\n' \
        '[[client]]\nname = "c-mine"\ntask = "my-backup"\n' \
        'command = ["./client-baseline", "{host}", "{port}", "{source}"]\n'
    real = driver.pack

    def tampered(client):
        files = real(client)
        if client.name != "py":
            return files
        mode, data = files["client.py"]
        return {**files, "client.py": (mode, data.replace(b"CHUNK = 64", b"CHUNK = 32"))}

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(driver, "pack", tampered)
        rc, doc = _run(tmp, _campaign(tmp, text), "--ray", c.address, "--jobs", "2",
                       "--archive", str(tmp / "c.tar.gz"))
    return rc, doc, tmp


def test_the_same_campaign_on_a_ray_cluster_two_labs_a_node_gives_the_same_verdicts(
        cluster, ray_doc, local_doc):
    """The local campaign's six attempts of `normal` on the cluster, two labs at once on each
    node (one lab a node is what the node-killed test runs): every verdict the same, and its
    archive replays."""
    c, _ = cluster
    rc, doc, tmp = ray_doc
    assert rc == 0
    assert doc["campaign"]["engine"] == f"ray {c.address}"
    nodes = doc["campaign"]["progress"]["nodes"]
    assert len(nodes) == 2 and sum(n["done"] for n in nodes.values()) == 10
    assert {k: v for k, v in _verdicts(doc).items()
            if k.split(":")[0] in THREE} == _of_normal(local_doc)
    # four labs, two per node, took the first four attempts at once
    at_once = _dispatched_at_once(tmp / "dir")
    assert len(at_once) == 4 and sorted(collections.Counter(at_once).values()) == [2, 2]
    assert cli.main(["replay", str(tmp / "c.tar.gz"), "--headless"]) == 0


def test_a_file_changed_on_its_way_to_a_node_makes_the_attempt_invalid(ray_doc):
    _, doc, _ = ray_doc
    runs = [r for s in doc["campaign"]["clients"]["py"]["scenarios"].values()
            for r in s["runs"]]
    assert len(runs) == 2 and all(r["valid"] is False for r in runs)
    assert all("identity: " in r["reason"] and "client.py is" in r["reason"] for r in runs)
    py = next(r for r in doc["campaign"]["leaderboard"] if r["name"] == "py")
    assert py["invalid"] == 2
    # the other clients' own files came whole: their attempts are valid
    assert all(valid for k, (_, _, valid, _) in _verdicts(doc).items()
               if not k.startswith("py:"))


def _kill_when_busy(cluster, journal: Path, victim, ended: threading.Event) -> threading.Thread:
    """Remove the victim node once the journal shows it running an attempt (however long the
    nodes' labs take to open on a loaded machine: until the campaign has ended)."""
    c, _ = cluster
    name = victim.node_id[:8]

    def watch():
        while not ended.is_set():
            lines = journal.read_text().splitlines() if journal.exists() else []
            mine = [json.loads(x) for x in lines if '"AttemptDispatched"' in x
                    and f'"node":"{name}@' in x]
            if mine and not any(f'"scenario":"{mine[-1]["scenario"]}"' in x
                                and '"phase":"done"' in x for x in lines):
                c.remove_node(victim)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def test_a_node_killed_mid_campaign_costs_lost_attempts_that_run_again(cluster, tmp_path):
    c, workers = cluster
    text = CAMPAIGN.split("[[client]]")[0].replace('"normal", "interrupted"', '"normal"') \
        .replace("attempts = 2", "attempts = 4") + \
        '[[client]]\nname = "sleepy"\n' \
        'command = ["/bin/sh", "-c", "sleep 1.5; exec \\"$0\\" \\"$@\\"", "./client-baseline", ' \
        '"{host}", "{port}", "{source}"]\n'   # asleep while the node goes: a light C client
    file = _campaign(tmp_path, text)
    ended = threading.Event()
    watcher = _kill_when_busy(cluster, tmp_path / "dir" / "journal.jsonl", workers[0], ended)
    try:
        rc, doc = _run(tmp_path, file, "--ray", c.address)
    finally:
        ended.set()
        watcher.join()
    board = doc["campaign"]
    lost = board["clients"]["sleepy"]["lost"]
    assert lost and all(e["reason"].startswith("node lost") and e["retried"] for e in lost)
    assert board["progress"]["done"] == 4 and board["progress"]["given_up"] == 0 and rc == 0
    runs = board["clients"]["sleepy"]["scenarios"]["normal"]["runs"]
    assert sorted(r["id"] for r in runs) == [f"sleepy:normal@{k}" for k in range(1, 5)]
    assert all(r["valid"] and r["success"] for r in runs), [
        (r["id"], r["reason"]) for r in runs if not (r["valid"] and r["success"])]
    assert {e["id"] for e in lost} <= {r["id"] for r in runs}      # run again, judged
    # the killed node's lab could not tear down: the next evlab run sweeps what it left
    sweep_stale_cgroups()
    sweep_stale()


def test_a_stopped_campaign_resumes_without_redoing_finished_attempts(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)     # a local campaign needs no Ray
    text = CAMPAIGN.split("[[client]]")[0].replace('"normal", "interrupted"', '"normal"') \
        .replace("attempts = 2", "attempts = 3") + \
        '[[client]]\nname = "c"\ncommand = ["./client-baseline", "{host}", "{port}", "{source}"]\n'
    file = _campaign(tmp_path, text)
    finished = driver.Merger.finished
    calls = []

    def stop_after_two(self, job, piece):
        finished(self, job, piece)
        calls.append(job.id)
        if len(calls) == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(driver.Merger, "finished", stop_after_two)
    assert cli.main(["campaign", str(file), "--headless", "--dir", str(tmp_path / "dir")]) == 130
    monkeypatch.setattr(driver.Merger, "finished", finished)
    assert cli.main(["campaign", str(file), "--headless", "--dir", str(tmp_path / "dir")]) == 2
    rc, doc = _run(tmp_path, file, "--resume")
    assert rc == 0 and doc["campaign"]["progress"]["done"] == 3
    journal = (tmp_path / "dir" / "journal.jsonl").read_text().splitlines()
    dispatched = [json.loads(x)["scenario"] for x in journal if '"AttemptDispatched"' in x]
    assert dispatched == ["c:normal@1", "c:normal@2", "c:normal@3"]   # 1 and 2 ran once


def test_a_task_folder_of_the_users_travels_to_the_ray_nodes(ray_doc, local_doc):
    """A client on a copy of backup's folder (a task of the user's) runs on the cluster: each
    node lays the folder out beside the client's files and judges on it, and the verdicts are
    the built-in task's, attempt for attempt."""
    _, doc, tmp = ray_doc
    client = doc["campaign"]["clients"]["c-mine"]
    assert client["client"]["task"]["sha256"] == load_task(tmp / "my-backup").sha256
    expected = {k.replace("c-baseline:", "c-mine:"): v for k, v in _verdicts(local_doc).items()
                if k.startswith("c-baseline:normal@")}
    assert {k: v for k, v in _verdicts(doc).items() if k.startswith("c-mine:")} == expected
    assert len(expected) == 2


def test_a_node_lays_a_shipped_task_folder_out_apart_and_judges_on_that_copy(tmp_path):
    """What the Ray engine sends with a client of a user's task: the folder's files under their
    own prefix, laid out beside (never inside) the client's, and the job's task is that copy,
    whose digest is the driver's folder's."""
    from sessions.campaign.jobs import plan
    from sessions.campaign.node import Ship
    from sessions.campaign.shipping import pack, with_task
    from sessions.spec.campaign import load_campaign
    folder = tmp_path / "my-backup"
    _user_copy_of_backup(folder)
    text = CAMPAIGN.replace("attempts = 2", 'attempts = 1\ntask = "my-backup"').replace(
        '"{source}"]\n', '"{source}"]\nship = [".task"]\n', 1)   # a folder named like it
    (tmp_path / ".task").mkdir()
    (tmp_path / ".task" / "task.toml").write_text("the client's own file\n")
    campaign = load_campaign(_campaign(tmp_path, text))
    job = plan(campaign)[0]
    files = with_task(pack(campaign.clients[0]), job.task)
    assert set(pack(campaign.clients[0])) == {"client-baseline", ".task/task.toml"} and \
        {n for n in files if n.startswith("/task/")} >= {"/task/task.toml",
                                                          "/task/contract.toml"}
    ship = Ship()
    try:
        placed = ship.place(job, files)
        assert Path(placed.task) == ship.dir / ".tasks" / "c-baseline"
        assert load_task(placed.task).sha256 == load_task(folder).sha256
        assert sorted(p.name for p in (ship.dir / "c-baseline").iterdir()) == [
            ".task", "client-baseline"]
        assert (ship.dir / "c-baseline" / ".task" / "task.toml").read_text() == \
            "the client's own file\n"
        builtin = plan(load_campaign(_campaign(tmp_path / "b", CAMPAIGN)))[0]
        assert with_task({}, builtin.task) == {}   # a built-in task is every node's own
    finally:
        ship.close()


def _user_copy_of_backup(folder: Path) -> None:
    """Backup's folder with a summary of the user's: a byte-identical copy would be the built-in
    task itself (a task is known by its folder's sha256), which every node has."""
    shutil.copytree(ROOT / "fixture" / "backup", folder,
                    ignore=shutil.ignore_patterns("__pycache__", "build"))
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace('summary = "', 'summary = "my copy: ', 1))
