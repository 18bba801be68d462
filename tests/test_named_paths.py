"""The files and folders a client's command names (sessions/spec/named_paths.py): which words
name one, what the sandbox shows of them (read-only), what evlab refuses to show, what a
campaign ships; and honest clients whose program is a folder (a Java class path, a Python
package folder) graded through every fetch scenario."""

import os
import pwd
import shutil
import subprocess
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from probes.boundary.sandbox import Sandbox, unmount_under
from probes.owned_tmp import make_owned_dir
from sessions.campaign.jobs import plan
from sessions.campaign.shipping import pack, unpack
from sessions.lab.boundary import program_paths
from sessions.spec.campaign import CampaignError, load_campaign
from sessions.spec.client_spec import ClientSpecError, build
from sessions.spec.named_paths import REPOSITORY, SHARED_DIRS, folder_sha256, shown
from tests.support import grade

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = ROOT / "tests" / "clients"
SCENARIOS = ("normal", "interrupted", "unavailable", "updated", "partial")
root_only = pytest.mark.root(reason="the sandbox and BCC need root")


def _program(tmp_path: Path) -> Path:
    """A folder of a program's files: tmp/app/{classes/p/A.class, lib/a.jar, run.py}."""
    app = tmp_path / "app"
    (app / "classes" / "p").mkdir(parents=True)
    (app / "classes" / "p" / "A.class").write_bytes(b"\xca\xfe\xba\xbe")
    (app / "lib").mkdir()
    (app / "lib" / "a.jar").write_bytes(b"PK")
    (app / "run.py").write_text("print(1)\n")
    return app


def _spec(app: Path, *words: str):
    return build(["/usr/bin/java", *words, "{url}", "{out}"], app, task="fetch")


# --- which words name a path ---------------------------------------------------------------------
def test_words_lists_and_option_values_that_name_paths_are_made_absolute_and_recorded(tmp_path):
    app = _program(tmp_path)
    spec = _spec(app, "-cp", "classes:lib/*:lib/a.jar:nothere", "-Dconf=run.py",
                 "--module-path=lib", "Main", "http://127.0.0.1:1/x", "/proc/self/status",
                 "-")
    assert spec.args == (
        "-cp", f"{app}/classes:{app}/lib/*:{app}/lib/a.jar:nothere", f"-Dconf={app}/run.py",
        f"--module-path={app}/lib", "Main", "http://127.0.0.1:1/x", "/proc/self/status", "-",
        "{url}", "{out}")
    # a folder is recorded with a trailing "/" and one digest of its files' names and contents
    assert set(spec.files) == {f"{app}/classes/", f"{app}/lib/", f"{app}/lib/a.jar",
                               f"{app}/run.py"}
    assert spec.files[f"{app}/classes/"] == folder_sha256(app / "classes")
    before = folder_sha256(app / "classes")
    (app / "classes" / "p" / "A.class").write_bytes(b"other")
    assert folder_sha256(app / "classes") != before
    # the placeholders are the lab's: a word holding one is never looked up
    assert _spec(app, "-cp", "{out}:classes").args[1] == "{out}:" + str(app / "classes")


def test_a_named_folder_is_shown_itself_and_a_files_folder_only_where_it_may_be(tmp_path):
    app = _program(tmp_path)
    s = SimpleNamespace(client=Path("/usr/bin/java"),
                        own_files=(f"{app}/classes/", f"{app}/run.py", "/tmp/x.py",
                                   f"{REPOSITORY}/README.md"))
    # the repository's root holds evlab's own: a file there is shown alone
    assert program_paths(s) == (Path("/usr/bin/java"), *sorted(
        [Path("/tmp/x.py"), app, app / "classes", REPOSITORY / "README.md"]))
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / "client.py").write_text("")
    assert shown(str(home / "client.py")) == home / "client.py"   # not beside ~/.ssh


# --- what is refused ------------------------------------------------------------------------
@pytest.mark.parametrize("word, message", [
    ("/", "/ is a folder every program shares"),
    ("/tmp", "/tmp is a folder every program shares"),
    ("/var/tmp", "/var/tmp is a folder every program shares"),
    (str(REPOSITORY), f"{REPOSITORY} is evlab's repository"),
    # a checkout in /tmp (a CI clone): its folder is refused as everyone's first
    (str(REPOSITORY.parent), f"{REPOSITORY.parent} is a folder every program shares"
     if REPOSITORY.parent in SHARED_DIRS else f"holds evlab's repository {REPOSITORY}"),
    (pwd.getpwuid(os.geteuid()).pw_dir, "the home of the user evlab runs as"),
])
def test_a_folder_holding_evlabs_own_or_everyones_is_refused_in_one_line(word, message):
    with pytest.raises(ClientSpecError, match=message) as e:
        _spec(Path("/"), "-cp", f"{word}:x.jar", "Fetch")
    assert "\n" not in str(e.value) and "name the folder of your program" in str(e.value)


def test_evlabs_temporary_folders_links_to_them_and_secrets_are_refused(tmp_path):
    session = make_owned_dir("evlab-session-")
    try:
        (session / "records").mkdir()
        (session / "records" / "r.jsonl").write_text("{}\n")
        for word in (str(session), f"{session}/records", f"{session}/records/r.jsonl",
                     f"--x={session}/records"):
            with pytest.raises(ClientSpecError, match="inside evlab's own temporary folder"):
                _spec(tmp_path, word)
        (tmp_path / "link").symlink_to(session / "records")
        with pytest.raises(ClientSpecError, match=r"link \(that is .*records\) is inside"):
            _spec(tmp_path, "-cp", "link")
    finally:
        shutil.rmtree(session)
    (tmp_path / "slash").symlink_to("/")
    with pytest.raises(ClientSpecError, match="every program shares"):
        _spec(tmp_path, "-cp", "slash")
    temp = tempfile.gettempdir()   # /tmp, or where TMPDIR says evlab keeps its sessions
    with pytest.raises(ClientSpecError, match="every program shares" if temp == "/tmp"
                       else f"{temp} is evlab's temporary folder"):
        _spec(tmp_path, temp)
    (tmp_path / "home" / ".aws").mkdir(parents=True)
    (tmp_path / "home" / ".aws" / "credentials").write_text("key")
    with pytest.raises(ClientSpecError, match=r"home/\.aws/credentials, a secret"):
        _spec(tmp_path, "-cp", "home")
    # the kernel's own folders name nothing of the program's: left alone, shown nothing
    assert _spec(tmp_path, "-cp", "/proc:/sys:/dev", "/run").files == {}


def test_a_campaign_ships_a_named_folder_and_a_node_finds_the_same_identity(tmp_path):
    app = _program(tmp_path)
    (app / "classes" / "link").symlink_to("/etc/hostname")   # a link is not shipped
    toml = app / "c.toml"
    toml.write_text('[campaign]\nname = "j"\ntask = "fetch"\nscenarios = ["normal"]\n'
                    '[[client]]\nname = "java"\n'
                    'command = "/usr/bin/java -cp classes:lib/* Fetch {url} {out}"\n')
    client = load_campaign(toml).clients[0]
    assert set(client.ship) == {"classes/p/A.class", "lib/a.jar"}
    assert client.tokens[1:] == ("-cp", "classes:lib/*", "Fetch", "{url}", "{out}")
    ship = make_owned_dir("evlab-ship-")   # where a node (or a local campaign) lays it out
    try:
        node = ship / "java"
        unpack(node, pack(client))
        order = plan(load_campaign(toml))[0].order(node)
        assert order.spec.args[1] == f"{node}/classes:{node}/lib/*"
        assert sorted(order.spec.files.values()) == sorted(client.spec.files.values())
        # a client's folder there is its own; the folder of every client and the tasks' are not
        for word in (str(ship), str(ship / ".tasks")):
            (ship / ".tasks").mkdir(exist_ok=True)
            with pytest.raises(ClientSpecError, match="inside evlab's own temporary folder"):
                _spec(node, "-cp", word)
    finally:
        shutil.rmtree(ship)
    (app / "empty").mkdir()
    toml.write_text(toml.read_text().replace("classes:", "empty:classes:"))
    with pytest.raises(CampaignError, match="empty is an empty folder: nothing of it can be"):
        load_campaign(toml)


# --- inside the sandbox -----------------------------------------------------------------------
@root_only
def test_a_named_folder_is_read_only_inside_and_nothing_beside_it_is_there(tmp_path):
    box, gap = Sandbox.open()
    assert box is not None, gap
    app = _program(tmp_path)
    (app / "classes" / "hello.txt").write_text("hello\n")
    script = (f'cat "$1/hello.txt"; echo x > "$1/new" || echo refused; mkdir "$1/d" || echo '
              f'no-dir; ls {app}; ls {REPOSITORY} || echo no-repo')
    spec = build(["/bin/sh", "-c", script, "sh", "classes", "{url}", "{out}"], app,
                 task="fetch")
    assert set(spec.files) == {f"{app}/classes/"}
    home = make_owned_dir("evlab-client-")   # where the lab stages a program, reachable
    os.chmod(home, 0o711)
    try:
        staged = box.stage(program_paths(SimpleNamespace(client=spec.executable,
                                                         own_files=tuple(spec.files))), home)
        done = subprocess.run(box.wrap(["/bin/sh", *spec.args[:4]], None, programs=staged),
                              capture_output=True, text=True, timeout=30)
    finally:
        unmount_under(home)
        shutil.rmtree(home)
    out, err = done.stdout.split(), done.stderr
    # its parent holds only what is shown: lib/ and run.py beside it were not named
    assert out == ["hello", "refused", "no-dir", "classes", "no-repo"], (out, err)
    assert "Read-only file system" in err and not (app / "classes" / "new").exists()


# --- honest clients whose program is a folder ------------------------------------------------
def _passes_every_scenario(doc: dict, attempts: int) -> list[dict]:
    """Every attempt valid and a success; its risk findings."""
    scenarios = doc["grade"]["scenarios"]
    assert set(scenarios) == set(SCENARIOS)
    for name, sc in scenarios.items():
        assert [(r["valid"], r["success"]) for r in sc["runs"]] == [(True, True)] * attempts, (
            name, [(r["reason"], [c for c, v in r["clauses"].items() if v != "pass"])
                   for r in sc["runs"]])
        assert {v for r in sc["runs"] for v in r["clauses"].values()} <= {"pass",
                                                                          "not-applicable"}
    return [f for sc in scenarios.values() for r in sc["runs"] for f in r["risk_findings"]]


@root_only
def test_an_honest_java_client_on_a_class_path_folder_passes_every_scenario(tmp_path):
    """tests/clients/Fetch.java, written from fixture/fetch/protocol.md alone, compiled into a
    folder and run from it: `java -cp DIR Fetch`. The folder is shown to it read-only."""
    classes = tmp_path / "classes"
    subprocess.run(["javac", "-d", str(classes), str(CLIENTS / "Fetch.java")], check=True,
                   timeout=120)
    assert {p.name for p in classes.iterdir()} == {"Fetch.class", "Fetch$Response.class"}
    doc = grade(f"java -cp {classes} Fetch {{url}} {{out}}", tmp_path, attempts=1,
                task="fetch")
    findings = _passes_every_scenario(doc, 1)
    assert not [f for f in findings if str(classes) in f["detail"]], findings
    # the JVM's /tmp/hsperfdata_USER/PID is in the sandbox's /tmp, its own (#44)
    assert not [f for f in findings if f["kind"] == "write-outside"], findings


@root_only
def test_an_honest_python_client_run_as_its_package_folder_passes_every_scenario(tmp_path):
    """`python3 DIR/fetchpkg URL OUT` runs the folder's __main__.py, which imports the module
    beside it: only the named folder holds it."""
    pkg = tmp_path / "fetchpkg"
    pkg.mkdir()
    shutil.copy(CLIENTS / "fetch_client.py", pkg / "download.py")
    (pkg / "__main__.py").write_text(
        "import json\nimport sys\n\nfrom download import main\n\n"
        "if main(sys.argv[1], sys.argv[2]):\n    print(json.dumps({'claim': 'completed'}))\n"
        "    sys.exit(0)\nsys.exit(1)\n")
    doc = grade(f"/usr/bin/python3 {pkg} {{url}} {{out}}", tmp_path, attempts=1, task="fetch")
    # its modules' byte code is not written beside them (read-only): an interpreter's cache
    assert {(f["kind"], f["severity"]) for f in _passes_every_scenario(doc, 1)} <= {
        ("write-outside", "low")}
