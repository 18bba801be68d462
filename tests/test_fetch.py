"""The fetch task (fixture/fetch/): its reference client's seeded behaviours each fail exactly
their clause, and real downloaders nobody here wrote are judged as their documentation says
they behave. docs/tasks.md ("fetch: real clients") keeps the same table with evlab's verdicts.

Each row below: a command as people use it, and per grade scenario the clauses it fails, each
with the reason from the tool's own documentation (curl(1) 7.88, wget(1) 1.21). Every clause
not listed must pass or be not applicable: a false alarm is as much a failure as a miss.
"""

import re
import shutil
from pathlib import Path

import pytest

from tests.support import evlab_run, grade

ROOT = Path(__file__).resolve().parent.parent
URLLIB = ROOT / "tests" / "clients" / "fetch_client.py"
NODE_CLIENT = ROOT / "tests" / "clients" / "fetch_client.js"
root_only = pytest.mark.root(reason="the BCC collector and the sandbox need root")

# curl -o and wget -O (and wget's own name) write the output as the bytes arrive, in place:
# atomic-output fails in every scenario for all of them (curl(1) -o "Write output to <file>";
# no temporary name is documented for either tool).
IN_PLACE = "atomic-output"

C, U, R, H, S = "content", "unchanged-no-download", "resume-not-restart", "honest-outcome", \
    "no-splice"
SCENARIOS = ("normal", "interrupted", "unavailable", "updated", "partial")


def row(command: str, *fails: set[str]) -> tuple[str, dict[str, set[str]]]:
    """A command and the clauses it fails in each grade scenario, in SCENARIOS' order."""
    return command, dict(zip(SCENARIOS, fails, strict=True))


TABLE = {
    # curl -f: "Fail silently on server errors": a 503 is exit 22 and, without --retry, not
    # tried again: no file after it (content), but the claim of failure is honest. A reset
    # mid-body is exit 56 and never retried ("--retry: transient error means a timeout, an
    # FTP 4xx or an HTTP 408, 429, 500, 502, 503 or 504"): the file is cut short, never asked
    # for again. No conditional request without --etag-compare or -z: the unchanged re-run
    # downloads it again.
    "curl -fsS -o": row(
        "/usr/bin/curl -fsS -o {out} {url}",
        {IN_PLACE, U}, {IN_PLACE, C, R}, {IN_PLACE, C}, {IN_PLACE}, {IN_PLACE, U}),
    # without -f, curl saves the 503's body and exits 0 ("-f ... the default behavior is to
    # output the document"): the claim is a lie.
    "curl -sS -o": row(
        "/usr/bin/curl -sS -o {out} {url}",
        {IN_PLACE, U}, {IN_PLACE, C, R}, {IN_PLACE, C, H}, {IN_PLACE}, {IN_PLACE, U}),
    # -C -: "automatically find out where/how to resume": from the output's size, with no
    # validator (no If-Range is documented): after the remote changed it appends the new
    # version's tail to the old bytes and exits 0 (no-splice, content, honest-outcome). On an
    # unchanged complete file it asks for the bytes past its end: nginx answers 416, which -f
    # makes exit 22 although the file is whole (a false claim of failure, and no revalidation).
    "curl -fsS -C - -o": row(
        "/usr/bin/curl -fsS -C - -o {out} {url}",
        {IN_PLACE, U, H}, {IN_PLACE, C, R}, {IN_PLACE, C}, {IN_PLACE, S, C, H},
        {IN_PLACE, U, H}),
    # --etag-save/--etag-compare: If-None-Match on the re-run, 304, nothing downloaded. But
    # the ETag is saved from the headers even when the body is then cut short (the man page
    # says nothing of it): the re-run after a reset sends it, gets 304 and exits 0 over a
    # truncated file (content, honest-outcome).
    "curl --etag-save/--etag-compare -o": row(
        "/usr/bin/curl -fsS --etag-compare {out}.etag --etag-save {out}.etag -o {out} {url}",
        {IN_PLACE}, {IN_PLACE, C, R, H}, {IN_PLACE, C}, {IN_PLACE}, {IN_PLACE}),
    # --retry 3: "If the server sends a Retry-After header curl waits that long": the 503 is
    # waited out (polite-retries passes); a reset is not transient: no resume.
    "curl --retry 3 -C - -o": row(
        "/usr/bin/curl -fsS --retry 3 -C - -o {out} {url}",
        {IN_PLACE, U, H}, {IN_PLACE, C, R}, {IN_PLACE, U, H}, {IN_PLACE, S, C, H},
        {IN_PLACE, U, H}),
    # wget -O retries a broken connection by itself and continues it with a Range request
    # (--tries: "Wget will ... retry"; a retried download is continued); no conditional
    # request: the re-run downloads again. A 503 is not retried (--retry-on-http-error is
    # empty by default) and -O has already created an empty file: no content, an honest exit 8.
    "wget -O": row(
        "/usr/bin/wget -q -O {out} {url}",
        {IN_PLACE, U}, {IN_PLACE, U}, {IN_PLACE, C}, {IN_PLACE}, {IN_PLACE, U}),
    # wget -c: "Continue getting a partially-downloaded file", and its warning: if the remote
    # file changed "you will end up with a garbled file": the updated remote is spliced. An
    # unchanged complete file is "already fully retrieved" (416): exit 0, no revalidation.
    "wget -c -O": row(
        "/usr/bin/wget -q -c -O {out} {url}",
        {IN_PLACE, U}, {IN_PLACE, U}, {IN_PLACE, C}, {IN_PLACE, S, C, H}, {IN_PLACE, U}),
    # wget -N: time-stamping, If-Modified-Since on the re-run, 304. The output is the URL's
    # name in the current directory, written in place; no file is made for the 503.
    "wget -N": row(
        "/bin/sh -c 'cd \"$(dirname \"$0\")\" && exec /usr/bin/wget -q -N \"$1\"' {out} {url}",
        {IN_PLACE}, {IN_PLACE}, {IN_PLACE, C}, {IN_PLACE}, {IN_PLACE}),
    # a client written from protocol.md alone, on urllib.request: passes everything.
    "python urllib (from protocol.md)": row(
        f"/usr/bin/python3 {URLLIB} {{url}} {{out}}", set(), set(), set(), set(), set()),
}


def _fails(doc: dict) -> dict[str, set[str]]:
    out = {}
    for sc in doc["scenarios"]:
        base = sc["id"].split("@")[0]
        out[base] = {v["id"] for v in sc["clauses"] if v["status"] not in ("pass",
                                                                          "not-applicable")}
    return out


@root_only
def test_the_reference_client_passes_and_each_seeded_behaviour_fails_exactly_its_clause(
        tmp_path):
    doc = evlab_run(tmp_path, "fetch", "--suite", "seeded")
    checks = {s["id"]: s["instrument_check"] for s in doc["scenarios"]}
    assert checks == dict.fromkeys(
        ("baseline", "no-revalidate", "restart", "in-place", "exit-zero", "retry-storm",
         "splice", "extra-host"), "detected"), checks
    base = next(s for s in doc["scenarios"] if s["id"] == "baseline")
    assert {v["status"] for v in base["clauses"]} <= {"pass", "not-applicable"}
    # every reason in fetch's words: none of backup's (its input, its requests, its server)
    backup = re.compile(r"\b(source|check|put|uploads?|backups?|receiver|store)\b", re.I)
    said = [v["reason"] for s in doc["scenarios"] for v in s["clauses"]]
    assert not [r for r in said if backup.search(r)], said


@root_only
@pytest.mark.parametrize("name", list(TABLE))
def test_a_real_client_is_judged_as_its_documentation_says(name, tmp_path):
    command, expected = TABLE[name]
    doc = grade(command, tmp_path, attempts=1, task="fetch")
    got = _fails(doc)
    assert set(got) == set(SCENARIOS)
    for scenario, fails in got.items():
        want = expected[scenario]
        assert fails == want, (scenario, fails, want, [
            (v["id"], v["status"], v["reason"]) for s in doc["scenarios"]
            if s["id"].startswith(scenario + "@") for v in s["clauses"] if v["id"] in fails ^ want])


@root_only
def test_an_honest_node_client_from_the_document_alone_passes_every_attempt(tmp_path):
    """tests/clients/fetch_client.js, written from protocol.md alone: an attempt of every grade
    scenario, each a success, and its writes in the outputs folder its task gave it are its
    own (no write-outside finding). Its repetitions (3 attempts of each, quiet and beside a
    CPU hog and another lab, every verdict compared) are make bench's soak."""
    node = shutil.which("node")
    assert node, "make setup installs Node.js"
    every_attempt_succeeds(grade(f"{node} {NODE_CLIENT} {{url}} {{out}}", tmp_path, attempts=1,
                                 task="fetch"), 1)


def every_attempt_succeeds(doc: dict, attempts: int = 3) -> None:
    """attempts of every grade scenario, each valid and a success, with no write-outside
    finding (its writes in the outputs folder its task gave it are its own)."""
    scenarios = doc["grade"]["scenarios"]
    assert set(scenarios) == set(SCENARIOS)
    for name, sc in scenarios.items():
        assert [(r["valid"], r["success"]) for r in sc["runs"]] == [(True, True)] * attempts, (
            name, [(r["reason"], [c for c, v in r["clauses"].items() if v == "fail"])
                   for r in sc["runs"]])
        outside = [f for r in sc["runs"] for f in r["risk_findings"]
                   if f["kind"] == "write-outside"]
        assert not outside, outside


EVASIONS = ROOT / "tests" / "clients" / "fetch_evasions.py"


@root_only
@pytest.mark.parametrize(("mode", "scenario", "clause"), [
    ("hardlink", "normal", "atomic-output"),            # writes through another name
    ("symlink", "normal", "atomic-output"),             # the name points at the partial file
    ("mmap", "normal", "atomic-output"),                # no write(2) at all: ftruncate, a map
    ("rename-then-write", "normal", "atomic-output"),   # renamed first, written after
    ("copy-range", "normal", "atomic-output"),          # copy_file_range into the final name
    ("spin-wait", "unavailable", "cpu-budget"),         # waits Retry-After out on the CPU
    ("odd-path", "interrupted", "resume-not-restart"),  # //data.bin: the bound reset passes by
    ("odd-path", "unavailable", "polite-retries"),      # ... and so does the bound 503
])
def test_an_evasion_of_a_fetch_clause_fails_it_with_the_attempt_valid(mode, scenario, clause,
                                                                      tmp_path):
    doc = grade(f"/usr/bin/python3 {EVASIONS} {mode} {{url}} {{out}}", tmp_path, attempts=1,
                task="fetch", scenarios=(scenario,))
    (run,) = doc["grade"]["scenarios"][scenario]["runs"]
    (judged,) = doc["scenarios"]
    reasons = {c["id"]: c["reason"] for c in judged["clauses"]}
    assert run["valid"], run["reason"]
    assert run["clauses"][clause] == "fail", (run["clauses"], reasons[clause])
    if mode == "spin-wait":   # it did wait as long as it was told
        assert run["clauses"]["polite-retries"] == "pass", reasons["polite-retries"]


TCL_CLIENT = ROOT / "tests" / "clients" / "fetch_client.tcl"


@root_only
def test_an_honest_tcl_client_from_the_document_alone_passes_every_attempt(tmp_path):
    """tests/clients/fetch_client.tcl, written from protocol.md alone on Tcl's core `socket`:
    an attempt of every grade scenario, each a success with every clause and gate passing.
    Tcl's socket resolves its local address with getaddrinfo(NULL, AI_PASSIVE), which glibc
    sorts by connect()ing UDP sockets to [::]:0 and 0.0.0.0:0 (nothing sent): the kernel sees
    those datagram connects, and destination-only still passes (they are not contacts)."""
    tclsh = shutil.which("tclsh")
    assert tclsh, "tclsh (Tcl 8.6) is installed"
    doc = grade(f"{tclsh} {TCL_CLIENT} {{url}} {{out}}", tmp_path, attempts=1, task="fetch")
    every_attempt_succeeds(doc, 1)
    for name, sc in doc["grade"]["scenarios"].items():
        for r in sc["runs"]:
            assert set(r["clauses"].values()) <= {"pass", "not-applicable"}, (name, r["clauses"])
            assert r["clauses"]["destination-only"] == "pass", (name, r["clauses"])
            gates = {g["status"] for g in r["gates"].values()}
            assert "pass" in gates and gates <= {"pass", "not-applicable"}, (name, r["gates"])
    judged = doc["scenarios"]
    assert len(judged) == len(SCENARIOS)
    for sc in judged:
        assert {v["status"] for v in sc["clauses"]} <= {"pass", "not-applicable"}, (
            sc["id"], [(v["id"], v["status"], v["reason"]) for v in sc["clauses"]
                       if v["status"] not in ("pass", "not-applicable")])
    calls = [c for sc in judged for inv in sc["invocations"]
             for c in inv["boundary"]["egress"]["calls"]]
    probes = [c for c in calls if c["kind"] == "connect" and c["datagram"]]
    assert probes, calls   # glibc's address sort: UDP connects to [::]:0 / 0.0.0.0:0
    assert {(c["address"], c["port"]) for c in probes} <= {("::", 0), ("0.0.0.0", 0)}, probes
