"""Exactness under load: evlab's counts for the readloop client against the known truth.

Every timed evlab run is checked, not a sample: read(2) calls and bytes over all descriptors
minus what the same binary reads with zero reads (the dynamic loader: measured, not assumed),
bytes read from the source file's descriptors (no subtraction needed), and lost events.
"""

from collections import Counter


def check_readloop(result: dict) -> dict:
    truth = result["truth"]
    loader = result["loader_runs"]
    loader_pairs = Counter((r["reads"], r["read_bytes"]) for r in loader)
    (loader_reads, loader_bytes), _ = loader_pairs.most_common(1)[0]
    rows = []
    for run in result["conditions"]["evlab"]["runs"]:
        rows.append({"reads": run["reads"] - loader_reads,
                     "bytes": run["read_bytes"] - loader_bytes,
                     "source_bytes": run["source_read_bytes"],
                     "lost_events": run["lost_events"]})
    failures = [r for r in rows if r != {"reads": truth["reads"], "bytes": truth["bytes"],
                                         "source_bytes": truth["bytes"], "lost_events": 0}]
    return {"truth": truth, "loader": {"reads": loader_reads, "bytes": loader_bytes,
                                       "distinct": len(loader_pairs)},
            "observed": rows, "runs_checked": len(rows), "runs_wrong": len(failures),
            "passed": bool(rows) and not failures and len(loader_pairs) == 1}


def check_hash_storm(result: dict) -> dict:
    truth = result["truth"]
    rows = [{"hash_file": run["functions"].get("hash_file"),
             "source_read_bytes": run["source_read_bytes"], "lost_events": run["lost_events"]}
            for run in result["conditions"]["evlab"]["runs"]]
    want = {**truth, "lost_events": 0}
    wrong = [r for r in rows if r != want]
    return {"truth": truth, "observed": rows, "runs_checked": len(rows),
            "runs_wrong": len(wrong), "passed": bool(rows) and not wrong}
