"""The two clients the overhead is measured on, each set up once and run many times.

hash-storm: the fixture's client-hash-storm against a running receiver that already holds the
backup (a first invocation stores it), so every timed run is the unchanged second-style
invocation: CHECK, 256 hashes of the 512 KiB source (128 MiB of 64 KiB reads), no upload.

readloop: bench/readloop.c doing READS read(2) calls of CHUNK bytes from a file of exactly
READS * CHUNK bytes; the same binary with zero reads measures what the dynamic loader reads.
"""

import contextlib
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from bench.build import build
from bench.measure import check_exit, timed
from sessions.lab.inputs.source import write_source
from tests.backup_lab import client_path, start_receiver

READS = 1_000_000
CHUNK = 16
HASH_ROUNDS = 256


@dataclass
class Workload:
    name: str
    argv: list[str]
    source: Path
    timeout_s: float
    truth: dict = field(default_factory=dict)          # what the client is known to do
    loader_argv: list[str] | None = None                # same binary, zero work

    @property
    def comm(self) -> str:
        return Path(self.argv[0]).name


@contextlib.contextmanager
def hash_storm():
    with tempfile.TemporaryDirectory(prefix="evlab-bench-hs-") as tmp:
        source = write_source(Path(tmp) / "source.bin")
        receiver = start_receiver(Path(tmp) / "store", Path(tmp) / "receiver.jsonl")
        with receiver:
            argv = [str(client_path("hash-storm")), "127.0.0.1", str(receiver.port),
                    str(source)]
            check_exit(timed(argv, 60), "hash-storm's first invocation (stores the backup)")
            yield Workload("hash-storm", argv, source, timeout_s=120,
                           truth={"hash_file": HASH_ROUNDS,
                                  "source_read_bytes": HASH_ROUNDS * source.stat().st_size})


@contextlib.contextmanager
def readloop():
    binary = build("readloop")
    with tempfile.TemporaryDirectory(prefix="evlab-bench-rl-") as tmp:
        data = Path(tmp) / "reads.bin"
        data.write_bytes(bytes(range(256)) * (READS * CHUNK // 256))
        argv = [str(binary), str(data), str(CHUNK), str(READS)]
        check_exit(timed(argv, 60), "readloop warm-up")  # the file is in the page cache
        yield Workload("readloop", argv, data, timeout_s=600,
                       truth={"reads": READS, "bytes": READS * CHUNK},
                       loader_argv=[str(binary), str(data), str(CHUNK), "0"])
