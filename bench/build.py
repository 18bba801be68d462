"""Build the bench's C helpers (bench/*.c) into bench/build/, only when a source changed."""

import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUILD = HERE / "build"
CFLAGS = ["-std=c11", "-O2", "-g", "-Wall", "-Wextra", "-Werror"]


def build(stem: str) -> Path:
    """bench/<stem>.c -> bench/build/bench-<stem> (underscores become dashes)."""
    source = HERE / f"{stem}.c"
    out = BUILD / f"bench-{stem.replace('_', '-')}"
    if not out.exists() or out.stat().st_mtime < source.stat().st_mtime:
        BUILD.mkdir(exist_ok=True)
        subprocess.run(["gcc", *CFLAGS, "-o", str(out), str(source)], check=True)
    return out
