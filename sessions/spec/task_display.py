"""What a task.toml says the dashboard, the reports and the timeline show of its evidence
(docs/tasks.md): its figures (counter rows), its timeline marks, and the client's functions the
collector counts entries of. evlab's own figures (connects, bytes sent, CPU, packets) are shown
for every task; these are the task's besides."""

import re
from pathlib import Path

from sessions.spec.task_lab import OWN_RECORDS, ServerSpec, TaskError

# What a server's record may mark on the timeline (sessions/output/timeline.py draws them)
RECORD_MARK_KINDS = ("start", "commit", "reject", "fault")
_EVENT = re.compile(r"^[a-z][a-z0-9_]{0,63}$")
_FIGURE_KEYS = {"label", "counter", "function", "records", "sum"}


def parse_figures(file: Path, raw, servers: tuple[ServerSpec, ...]) -> tuple[dict, ...]:
    """[[figures]]: label and one of counter = NAME (the collector's), function = NAME (entries
    of a client function), records = "SERVER.EVENT" (how many; with sum = FIELD, its total)."""
    if not isinstance(raw, list):
        raise TaskError(f"{file}: figures: expected an array of tables, [[figures]]")
    names = {s.name for s in servers}
    figures = []
    for i, fig in enumerate(raw):
        key = f"figures[{i}]"
        if not isinstance(fig, dict) or set(fig) - _FIGURE_KEYS or \
                not isinstance(fig.get("label"), str) or not fig["label"].strip():
            raise TaskError(f"{file}: {key}: expected label and one of counter, function, "
                            "records (with sum)")
        sources = [k for k in ("counter", "function", "records") if k in fig]
        if len(sources) != 1 or not all(isinstance(fig[k], str) for k in (*sources, "sum")
                                        if k in fig):
            raise TaskError(f"{file}: {key}: expected exactly one of counter, function, records")
        if "records" in fig:
            server, _, event = fig["records"].partition(".")
            # a task's server, or evlab's own records (the file watcher's, the proxy's, ...)
            if server not in (*names, *OWN_RECORDS) or not _EVENT.match(event):
                raise TaskError(f"{file}: {key}.records: expected SERVER.EVENT, a server of "
                                f"{', '.join(sorted(names)) or 'none'}")
        elif "sum" in fig:
            raise TaskError(f"{file}: {key}.sum: only with records")
        figures.append(dict(fig))
    return tuple(figures)


def parse_marks(file: Path, raw) -> dict[str, str]:
    """[marks]: EVENT = KIND, a record of the endpoint's drawn as that mark on the timeline."""
    if not isinstance(raw, dict) or not all(isinstance(k, str) and _EVENT.match(k)
                                            and v in RECORD_MARK_KINDS for k, v in raw.items()):
        raise TaskError(f"{file}: marks: expected EVENT = KIND, a kind of "
                        f"{', '.join(RECORD_MARK_KINDS)}")
    return dict(raw)


def parse_tools(file: Path, raw) -> tuple[str, ...]:
    """client.tools: the programs the task's protocol tells a client to run (names found on
    the client's PATH, or absolute paths): starting one is no risk finding."""
    if not isinstance(raw, list) or not all(isinstance(f, str) and re.fullmatch(
            r"/?[A-Za-z0-9_.+-][A-Za-z0-9_./+-]{0,255}", f) and ".." not in f.split("/")
            for f in raw):
        raise TaskError(f"{file}: client.tools: expected a list of program names or absolute "
                        "paths")
    return tuple(raw)


def parse_functions(file: Path, raw) -> tuple[str, ...]:
    if not isinstance(raw, list) or not all(isinstance(f, str) and re.fullmatch(
            r"[A-Za-z_][A-Za-z0-9_]{0,63}", f) for f in raw):
        raise TaskError(f"{file}: client.functions: expected a list of function names")
    return tuple(raw)
