"""A client cannot swamp the judge (issue #24, item 4): one `evlab grade` attempt (the normal
scenario, two invocations, --timeout 20) of a client that floods evlab's view before it backs
up, per kind of flood: pipelined CHECKs, one-byte segments, kernel events, claims, connections
(tests/clients/flood.py, tests/clients/hostile.py event-flood). Per flood: the evlab tree's
peak summed RSS (bench/suite.py's sampler), the command's wall time (start-up included), what
was capped, and the attempt's outcome. Bounds: at most 400 MB, at most the invocations'
timeouts + 10 s, and the attempt valid and failed (the flood is held against the client)."""

import json
import tempfile
from pathlib import Path

from bench.measure import say
from bench.suite import run_evlab

ROOT = Path(__file__).resolve().parent.parent
CLIENTS = ROOT / "tests" / "clients"
TIMEOUT_S = 20
INVOCATIONS = 2
MEMORY_MB = 400
FLOODS = {   # name: the client's command ({host} {port} {source} filled in by evlab)
    "checks": f"/usr/bin/python3 {CLIENTS / 'flood.py'} checks {{host}} {{port}} {{source}} 200000",
    "segments": f"/usr/bin/python3 {CLIENTS / 'flood.py'} segments {{host}} {{port}} {{source}} "
                "200000",
    "events": f"/usr/bin/python3 {CLIENTS / 'hostile.py'} event-flood {{host}} {{port}} {{source}}",
    "claims": f"/usr/bin/python3 {CLIENTS / 'flood.py'} claims {{host}} {{port}} {{source}} 200000",
    "connections": f"/usr/bin/python3 {CLIENTS / 'flood.py'} connections {{host}} {{port}} "
                   "{source} 20000",
}


def bound_s() -> float:
    return INVOCATIONS * TIMEOUT_S + 10


def measure() -> dict:
    out: dict = {"bound_mb": MEMORY_MB, "bound_s": bound_s(), "floods": {}}
    with tempfile.TemporaryDirectory(prefix="evlab-bench-floods-") as tmp:
        for name, command in FLOODS.items():
            say(f"floods: {name}")
            doc_path = Path(tmp) / f"{name}.json"
            run = run_evlab(["grade", "--client", command, "--attempts", "1", "--scenario",
                             "normal", "--timeout", str(TIMEOUT_S), "--headless",
                             "--json", str(doc_path)])
            result = {"wall_s": run["wall_s"], "peak_tree_rss_mb": run["peak_tree_rss_mb"],
                      "peak_tree_pss_mb": run["peak_tree_pss_mb"], "exit": run["exit"]}
            try:
                doc = json.loads(doc_path.read_text())
                attempt = doc["grade"]["scenarios"]["normal"]["runs"][0]
                result.update(valid=attempt["valid"], success=attempt["success"],
                              reason=attempt["reason"], capped=_capped(doc))
            except (OSError, ValueError, KeyError, IndexError) as e:
                result["error"] = f"no judged attempt: {type(e).__name__}: {e}"
            out["floods"][name] = result
            say(f"floods: {name}: {result}")
    return out


def _capped(doc: dict) -> dict:
    """Per invocation, what the receiver's records and claims show of the flood."""
    return {f"invocation {i['n']}": {"receiver_connections": i["servers"]["receiver"]["records"]
                                     .get("connection_opened", 0),
                                     "packets": i["packets"]["count"]}
            for s in doc["scenarios"] for i in s["invocations"]}


def held(result: dict) -> bool:
    """Within every bound, and judged against the client (valid, failed)."""
    return (result.get("valid") is True and result.get("success") is False
            and result["peak_tree_rss_mb"] <= MEMORY_MB and result["wall_s"] <= bound_s())


def report_lines(floods: dict | None, value) -> list[str]:
    if not floods:
        return []
    lines = ["", "## Floods: a client cannot swamp the judge", "",
             f"One `evlab grade` attempt (normal scenario, 2 invocations, --timeout {TIMEOUT_S})"
             f" per flood; bounds {MEMORY_MB} MB of the evlab tree (summed RSS, an upper bound)"
             f" and {bound_s():.0f} s for the whole command, start-up included.", "",
             "| flood | peak tree RSS | PSS | wall | valid | outcome | within bounds |",
             "|---|---|---|---|---|---|---|"]
    for name, r in floods["floods"].items():
        lines.append(f"| {name} | {value(r['peak_tree_rss_mb'], 'MB')} | "
                     f"{value(r['peak_tree_pss_mb'], 'MB')} | {value(r['wall_s'], 's')} | "
                     f"{r.get('valid')} | {r.get('reason', r.get('error', ''))[:90]} | "
                     f"{'yes' if held(r) else '**no**'} |")
    return lines
