#!/usr/bin/env python3
"""A backup client whose every string is hostile to the outputs that show it (then it backs up
honestly): claims with markup, terminal escapes, newlines, deep nesting and over-long lines; a
child process named `[/]`; files in its working directory named with newlines, escapes and
bytes that are not UTF-8; a write outside its directory under such a name.

Usage: texts.py HOST PORT SOURCE
"""

import ctypes
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hostile import backup, claim  # noqa: E402 - beside this file

ESCAPES = "\x1b]0;pwned\x07\x1b]52;c;cHduZWQ=\x07\x1b[32m✓ success\x1b[0m"


def main() -> int:
    host, port, source = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    claim(claim="started", note="[/]" + ESCAPES, table="\n## Grade\n| a | b |\n")
    print("[" * 985 + "]" * 985, flush=True)
    print("x" * 100_000, flush=True)
    sys.stdout.buffer.write(b'{"claim": "note", "bytes": "\xff\xfe"}\n')
    sys.stdout.flush()
    for name in (b"new\nline.tmp", ESCAPES.encode() + b".tmp", b"\xff\xfe.tmp", b"[bold red]x.tmp"):
        with open(name, "wb") as f:
            f.write(b"x")
    os.makedirs("/outside", exist_ok=True)   # a folder at the root: outside its directory
    with open(b"/outside/\x1b[31m\n## Grade\xff", "wb") as f:
        f.write(b"x")
    pid = os.fork()
    if pid == 0:   # a child named [/] that runs, then exits
        ctypes.CDLL(None).prctl(15, b"[/]", 0, 0, 0)   # PR_SET_NAME
        os.execv("/bin/sleep", [b"[/]" + ESCAPES.encode(), "0.2"])
    os.waitpid(pid, 0)
    ok = backup(host, port, source)
    claim(claim="completed" if ok else "failed", detail=ESCAPES)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
