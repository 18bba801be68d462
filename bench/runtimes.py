"""Honest clients in other runtimes (bench/__main__.py section `runtimes`).

Each runtime has a backup client written from fixture/backup/protocol.md alone, under
bench/runtimes/ (the directory of client sources; this module is the section that grades them):
  java   Java 17, javac + jar, the JVM's default sockets (IPv6 dual-stack: 127.0.0.1 is
         connected as ::ffff:127.0.0.1; java.net.preferIPv4Stack is deliberately not set)
  go     Go, standard library only, `go build` offline (GOPROXY=off, GOTOOLCHAIN=local)
  rust   one main.rs built with rustc alone (no crates: SHA-256 by hand, checked here against
         sha256sum before it is graded)
  perl   Perl 5 core modules (Digest::SHA, IO::Socket::INET, JSON::PP)
  bash   bash's /dev/tcp, sha256sum for the digest, cat for the payload
Per runtime: install its Debian packages when a tool is missing (`apt-get install -y
--no-install-recommends`), build into bench/runtimes/build/ (gitignored), then one default
`evlab grade --attempts 3` over the grade scenarios. A runtime that cannot be installed or
built is skipped with the reason; nothing here fails the whole bench.
"""

import json
import os
import shutil
import subprocess
import time
from collections import Counter
from pathlib import Path

from bench.measure import say
from bench.suite import run_evlab

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "bench" / "runtimes"
BUILD = SRC / "build"
ATTEMPTS = 3
CLIENT_PATH = "/usr/local/bin:/usr/bin:/bin"   # the PATH evlab gives a client
ARGS = "{host} {port} {source}"
APT_TIMEOUT_S = 900
BUILD_TIMEOUT_S = 300
# A failure naming this address is the IPv4-mapped-IPv6 comparison evlab got wrong until
# 2026-12-02 (the Java client's dual-stack connect was not the receiver's 127.0.0.1): named as
# such should it come back, still counted as a failure.
MAPPED = "::ffff:127.0.0.1"


class Skip(Exception):
    """This runtime cannot be graded here; the message says why."""


def _run(argv: list[str], timeout_s: float = BUILD_TIMEOUT_S, **kwargs) -> str:
    """argv's stdout (stderr appended); Skip with its last lines when it fails."""
    shown = " ".join([Path(argv[0]).name, *argv[1:]])
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                              stdin=subprocess.DEVNULL, **kwargs)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Skip(f"`{shown}`: {e}") from None
    if proc.returncode != 0:
        tail = " / ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise Skip(f"`{shown}` exited {proc.returncode}: {tail}")
    return proc.stdout + proc.stderr


def _tool(name: str, path: str | None = None) -> str:
    found = shutil.which(name, path=path)
    if found is None:
        raise Skip(f"{name} not found on {path or 'PATH'}")
    return found


def ensure(packages: tuple[str, ...], tools: tuple[str, ...]) -> tuple[list[str], float]:
    """Install the packages not yet installed when one of the tools is missing: (installed,
    seconds). A failed install is retried once after `apt-get update`, then Skip."""
    if all(shutil.which(t) for t in tools):
        return [], 0.0
    missing = [p for p in packages
               if subprocess.run(["dpkg", "-s", p], capture_output=True).returncode != 0]
    started = time.perf_counter()
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", *missing]
    if missing:
        say(f"runtimes: apt-get install {' '.join(missing)}")
        try:
            _run(install, APT_TIMEOUT_S, env=env)
        except Skip:
            _run(["apt-get", "update"], APT_TIMEOUT_S, env=env)
            _run(install, APT_TIMEOUT_S, env=env)
    if absent := [t for t in tools if not shutil.which(t)]:
        raise Skip(f"{', '.join(absent)} still missing after installing "
                   f"{', '.join(missing) or 'nothing'}")
    return missing, time.perf_counter() - started


# --- builds: each returns (the client's command template, its runtime's version) ----------

def build_java(out: Path) -> tuple[str, str]:
    classes = out / "classes"
    shutil.rmtree(classes, ignore_errors=True)
    _run([_tool("javac"), "--release", "17", "-d", str(classes),
          str(SRC / "java" / "BackupClient.java")])
    jar = out / "backup-client.jar"
    _run([_tool("jar"), "--create", "--file", str(jar), "--main-class", "BackupClient",
          "-C", str(classes), "."])
    java = _tool("java", CLIENT_PATH)   # the sandbox shows /usr: the JVM must live there
    version = _run([java, "-version"]).strip().splitlines()[0]
    return f"{java} -jar {jar} {ARGS}", version


def build_go(out: Path) -> tuple[str, str]:
    go = _tool("go")
    env = {**os.environ, "GOCACHE": str(out / "cache"), "GOPATH": str(out / "gopath"),
           "GOTOOLCHAIN": "local", "GOPROXY": "off", "GOFLAGS": "",
           "CGO_ENABLED": "0"}   # no C compiler needed; the pure-Go resolver is enough
    binary = out / "backup-client"
    _run([go, "build", "-trimpath", "-o", str(binary), str(SRC / "go" / "main.go")],
         env=env, cwd=out)
    return f"{binary} {ARGS}", _run([go, "version"], env=env).strip()


def build_rust(out: Path) -> tuple[str, str]:
    rustc = _tool("rustc")
    binary = out / "backup-client"
    _run([rustc, "-O", "--edition", "2021", "-o", str(binary), str(SRC / "rust" / "main.rs")])
    check_sha256(binary, out / "sha-check")
    return f"{binary} {ARGS}", _run([rustc, "--version"]).strip()


def check_sha256(binary: Path, where: Path) -> None:
    """The hand-written SHA-256 against sha256sum: padding edges, chunk edges, the source."""
    where.mkdir(parents=True, exist_ok=True)
    files = []
    for size in (0, 1, 55, 56, 63, 64, 65, 119, 120, 65535, 65536, 65537, 524288, 1000003):
        path = where / f"f{size}"
        path.write_bytes(os.urandom(size))
        files.append(str(path))
    source = where / "source"
    _run([str(ROOT / ".venv" / "bin" / "python"), "-m", "sessions.lab.inputs.source", str(source)],
         cwd=ROOT)
    files.append(str(source))
    mine, truth = _run([str(binary), "--sha256", *files]), _run(["sha256sum", *files])
    if mine.split() != truth.split():
        raise Skip("the hand-written SHA-256 disagrees with sha256sum")
    shutil.rmtree(where)


def build_perl(out: Path) -> tuple[str, str]:
    perl, script = _tool("perl", CLIENT_PATH), SRC / "perl" / "backup_client.pl"
    _run([perl, "-MDigest::SHA", "-MIO::Socket::INET", "-MJSON::PP", "-c", str(script)])
    version = _run([perl, "-e", "print $^V"]).strip()
    return f"{perl} {script} {ARGS}", f"perl {version}"


def build_bash(out: Path) -> tuple[str, str]:
    bash, script = _tool("bash", CLIENT_PATH), SRC / "bash" / "backup_client.sh"
    for tool in ("sha256sum", "stat", "cat", "sleep"):
        _tool(tool, CLIENT_PATH)
    _run([bash, "-n", str(script)])
    version = _run([bash, "-c", "echo $BASH_VERSION"]).strip()
    return f"{bash} {script} {ARGS}", f"bash {version}"


# name: (Debian packages, tools that must be on PATH, build)
RUNTIMES = {
    "java": (("openjdk-17-jdk-headless",), ("javac", "jar", "java"), build_java),
    "go": (("golang-go",), ("go",), build_go),
    "rust": (("rustc",), ("rustc",), build_rust),
    "perl": (("perl",), ("perl",), build_perl),
    "bash": (("bash", "coreutils"), ("bash", "sha256sum"), build_bash),
}


def grade(name: str, command: str) -> dict:
    """One default `evlab grade` of the command: the run and what its JSON document says."""
    doc = BUILD / "results" / f"{name}.json"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.unlink(missing_ok=True)
    say(f"runtimes: evlab grade of {name}, {ATTEMPTS} attempts of each scenario")
    run = run_evlab(["grade", "--client", command, "--attempts", str(ATTEMPTS), "--headless",
                     "--json", str(doc)])
    out = {"wall_s": run["wall_s"], "exit": run["exit"], "summary": run["summary"],
           "json": str(doc.relative_to(ROOT))}
    try:
        out.update(judged(json.loads(doc.read_text())))
    except (OSError, ValueError) as e:
        out["error"] = f"no JSON document: {e}"
    return out


def judged(doc: dict) -> dict:
    """Per clause and gate: how each attempt ended, and the evidence of every failure."""
    reasons = {s["id"]: {c["id"]: c["reason"] for c in s["clauses"]} for s in doc["scenarios"]}
    statuses: dict[str, Counter] = {}
    failures: dict[str, dict] = {}
    risks: Counter = Counter()
    attempts = successes = valid = 0
    for scenario in doc["grade"]["scenarios"].values():
        for run in scenario["runs"]:
            attempts += 1
            valid += bool(run["valid"])
            successes += bool(run["success"])
            risks.update(f"{f['severity']} {f['kind']}" for f in run["risk_findings"])
            checks = {**{c: (s, reasons.get(run["id"], {}).get(c, ""))
                         for c, s in run["clauses"].items()},
                      **{g: (v["status"], v["reason"]) for g, v in run["gates"].items()}}
            for check, (status, reason) in checks.items():
                statuses.setdefault(check, Counter())[status] += 1
                if status in ("fail", "inconclusive"):
                    f = failures.setdefault(check, {"attempts": [], "evidence": []})
                    f["attempts"].append(run["id"])
                    f["evidence"].append(reason)
    for f in failures.values():
        f["known_ipv4_mapped"] = all(MAPPED in e for e in f["evidence"])
    return {"attempts": attempts, "valid": valid, "successes": successes,
            "all_passed": attempts > 0 and successes == attempts,
            "statuses": {k: dict(v) for k, v in statuses.items()},
            "failures": failures, "risks": dict(sorted(risks.items())),
            "overall": doc["grade"]["overall"]}


def one(name: str) -> dict:
    packages, tools, build = RUNTIMES[name]
    out: dict = {"packages": list(packages)}
    try:
        out["installed"], out["install_s"] = ensure(packages, tools)
        started = time.perf_counter()
        (BUILD / name).mkdir(parents=True, exist_ok=True)
        out["command"], out["version"] = build(BUILD / name)
        out["build_s"] = time.perf_counter() - started
    except Skip as e:
        say(f"runtimes: {name} skipped: {e}")
        return {**out, "skipped": str(e)}
    return {**out, "grade": grade(name, out["command"])}


def measure() -> dict:
    started = time.perf_counter()
    out = {"attempts": ATTEMPTS, "runtimes": {name: one(name) for name in RUNTIMES}}
    out["wall_s"] = time.perf_counter() - started
    return out


def passing(r: dict) -> str | None:
    """'4 of 5' runtimes graded with every attempt a success; None when none was graded."""
    graded = [v["grade"] for v in r.get("runtimes", {}).values() if "grade" in v]
    if not graded:
        return None
    return f"{sum(bool(g.get('all_passed')) for g in graded)} of {len(graded)}"


def report_lines(r: dict | None, value) -> list[str]:
    """The section's Markdown: a row per runtime, then the evidence of every failure."""
    if not r:
        return []
    lines = ["", f"## Honest clients in other runtimes (`evlab grade --attempts {r['attempts']}`"
             ", the 4 grade scenarios)", "",
             "Clients written from fixture/backup/protocol.md alone (bench/runtimes/). "
             "\"Every check passed\": every attempt a success (every clause and gate pass or "
             "n/a).", "",
             "| runtime | version | install | build | attempts (valid) | every check passed "
             "| failed (attempts) | risk findings high/medium/low | grade wall |",
             "|---|---|---|---|---|---|---|---|---|"]
    evidence = []
    for name, v in r["runtimes"].items():
        if "skipped" in v:
            lines.append(f"| {name} | — | — | — | — | skipped: {v['skipped']} | | | |")
            continue
        g = v["grade"]
        install = (f"{value(v['install_s'], 's')} ({', '.join(v['installed'])})"
                   if v["installed"] else "present")
        failed = ", ".join(f"{c} ({len(f['attempts'])})"
                           + (" [IPv4-mapped address, known]" if f["known_ipv4_mapped"] else "")
                           for c, f in g.get("failures", {}).items()) or "none"
        sev = Counter()
        for key, n in g.get("risks", {}).items():
            sev[key.split()[0]] += n
        lines.append(f"| {name} | {v['version']} | {install} | {value(v['build_s'], 's')} "
                     f"| {g.get('attempts', '—')} ({g.get('valid', '—')}) "
                     f"| {value(g.get('all_passed'))} | {failed} "
                     f"| {sev['high']}/{sev['medium']}/{sev['low']} "
                     f"| {value(g['wall_s'], 's')} |")
        if "error" in g:
            evidence.append(f"- {name}: {g['error']} (evlab exited {g['exit']})")
        for check, f in g.get("failures", {}).items():
            distinct = list(dict.fromkeys(f["evidence"]))
            evidence.append(f"- {name} `{check}` ({', '.join(f['attempts'])}): "
                            f"{distinct[0]}" + (f" (+{len(distinct) - 1} more like it)"
                                                if len(distinct) > 1 else ""))
    lines += ["", f"Section wall time {value(r['wall_s'], 's')}. Commands and every "
              "attempt's JSON document: bench/results.json, bench/runtimes/build/results/."]
    if evidence:
        lines += ["", "Evidence of each failed clause or gate (the first attempt's reason):",
                  "", *evidence]
    return lines
