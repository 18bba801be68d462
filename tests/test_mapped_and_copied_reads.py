"""The collector's view of reads that are not read(2) of the source: pages of it mapped by the
tree's page faults (one pass through a mapping is one pass), and bytes read back from places
of the client's own (copies on a tmpfs, memfds, pipes) — exact, against tests/programs/
exerciser.c, whose every mapping, copy and read the test controls."""

import itertools
import os
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.root(reason="loading BPF and mounting a tmpfs need root")
_ids = itertools.count(1)
SIZE = 524_288   # tests.conftest source_file: whole pages, so a mapped pass is exactly SIZE


@pytest.fixture(scope="module")
def collector():
    # the collector a session of this worker kept, or a new one (compiled once per worker)
    from probes.collectors.choose import open_collector
    launcher, _ = open_collector("bcc", ("hash_file",))
    yield launcher.bcc
    launcher.close()


@pytest.fixture
def shm(tmp_path):
    """A tmpfs of its own (what every writable place of the sandbox is)."""
    where = tmp_path / "shm"
    where.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "evlab-test", str(where)],
                   check=True)
    yield where
    subprocess.run(["umount", str(where)], check=True)


def counted(collector, exerciser, source, *steps):
    inv = next(_ids)
    with collector.launching(inv, exerciser, source):
        proc = subprocess.Popen([str(exerciser), *map(str, steps)])
    assert proc.wait() == 0
    c = collector.finish(inv).counters
    return {k: c.get(k) for k in ("source_read_bytes", "source_mapped_bytes", "own_read_bytes",
                                  "source_mmaps")}


@pytest.mark.parametrize("steps, passes", [
    (["mmap:{s}:1"], 1), (["mmap:{s}:5"], 5), (["mmapcow:{s}:3"], 3),
    (["mmap:{s}:1", "mmap:{s}:2"], 3),   # a second mapping reads again
], ids=["one-pass", "five-passes-dontneed", "copy-on-write", "remapped"])
def test_a_pass_through_a_mapping_is_one_pass(collector, exerciser, source_file, steps, passes):
    assert source_file.stat().st_size == SIZE
    c = counted(collector, exerciser, source_file, *(s.format(s=source_file) for s in steps))
    assert c["source_mapped_bytes"] == passes * SIZE
    assert c["source_read_bytes"] == 0 and c["own_read_bytes"] == 0
    assert c["source_mmaps"] == len(steps)


@pytest.mark.parametrize("how", ["rw", "sendfile"])
def test_a_copy_read_back_is_counted_whatever_made_it(collector, exerciser, source_file, shm,
                                                      how):
    copy = shm / "copy"
    c = counted(collector, exerciser, source_file, f"copy:{source_file}:{copy}:{how}",
                f"read:{copy}:{SIZE}", f"read:{copy}:{SIZE}", f"mmap:{copy}:2")
    assert c["source_read_bytes"] == SIZE      # made once from the source
    assert c["own_read_bytes"] == 4 * SIZE     # read back twice, mapped twice
    assert c["source_mapped_bytes"] == 0


def test_copy_file_range_from_a_copy_is_a_read_back(collector, exerciser, source_file, shm):
    first, second = shm / "a", shm / "b"
    c = counted(collector, exerciser, source_file, f"copy:{source_file}:{first}:rw",
                f"copy:{first}:{second}:cfr", f"read:{second}:{SIZE}")
    assert (c["source_read_bytes"], c["own_read_bytes"]) == (SIZE, 2 * SIZE)


@pytest.mark.parametrize("steps, back", [
    (["memfd:{s}:5"], 5), (["memfdmap:{s}:3"], 3), (["pipe:{s}:4"], 4),
], ids=["memfd-pread", "memfd-mapped", "pipe-fed-by-a-child"])
def test_memfds_and_pipes_are_places_of_its_own(collector, exerciser, source_file, steps, back):
    c = counted(collector, exerciser, source_file, *(s.format(s=source_file) for s in steps))
    assert c["source_read_bytes"] == SIZE
    assert c["own_read_bytes"] == back * SIZE


def test_files_elsewhere_are_neither(collector, exerciser, source_file):
    """A file of the system (on its disk, not a tmpfs), read and mapped: neither the source
    nor a place of the client's own."""
    system = Path(os.path.realpath("/bin/sh"))
    c = counted(collector, exerciser, source_file, f"read:{system}:4096", f"mmap:{system}:2")
    assert c == {"source_read_bytes": 0, "source_mapped_bytes": 0, "own_read_bytes": 0,
                 "source_mmaps": 0}
