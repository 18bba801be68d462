"""`python -m probes.bcc.warm` (`make setup`, as root): the collector compiled into this
machine's cache (probes/bcc/cache.py) now, when it is not there yet. Without it the first
sessions on a machine compile it in full, ~1.8 CPU-s each, and every lab opening before the
first compile is written does so too (a test run's five workers at its start). Never fails
the set-up: a machine where the collector cannot compile is said so, and evlab then falls
back as it always does (`evlab doctor` says why)."""

import sys

from probes.bcc import cache
from probes.bcc.load import CollectorUnavailable, bpf_text, collector_cflags, load_bpf


def kept() -> bool:
    """Whether this machine's cache already holds the collector as this checkout compiles it."""
    try:
        return cache.kept(bpf_text(), collector_cflags())
    except OSError:
        return False


def main() -> int:
    if kept():
        return 0
    try:
        load_bpf().cleanup()
    except CollectorUnavailable as e:
        print(f"setup: the BPF collector was not compiled ahead: {e.capability.detail}",
              file=sys.stderr)
        return 0
    print("setup: compiled the BPF collector into this machine's cache", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
