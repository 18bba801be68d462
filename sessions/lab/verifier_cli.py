"""A task's verifier as a command (docs/tasks.md, "The verifier"): a `--NAME PATH` option for
each path its `verify` function takes, that function's one JSON object printed; a path it
cannot read ends it with one line and no object, which the lab reports as no result."""

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path


def verifier_main(verify: Callable[..., dict], *names: str, prog: str,
                  argv: list[str] | None = None) -> None:
    """`verifier_main(verify, "out", "remote", prog=...)` runs `verify(out=Path, remote=Path)`."""
    p = argparse.ArgumentParser(prog=prog, description=(verify.__doc__ or "").split("\n")[0])
    for name in names:
        p.add_argument(f"--{name}", type=Path, required=True)
    args = p.parse_args(argv)
    try:
        print(json.dumps(verify(**vars(args))))
    except OSError as e:
        sys.exit(f"verifier: {e}")
