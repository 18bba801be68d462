"""The collector compiled once per machine (probes/bcc/cache.py): a later session loads the
kept instructions against maps of its own, and uses a kept file only when it can trust it."""

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from probes.bcc import cache
from probes.bcc.load import bpf_text, collector_cflags
from probes.collectors.choose import open_collector

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="loading BPF needs root")

# A program with what the collector's text has: a map, a ring buffer and its record, a
# helper made by a macro, a raw tracepoint loaded and attached by BCC, braces in a comment
# (here: { }), in a string and in a character.
TEXT = r"""
struct rec { u32 pid; char note[8]; };
BPF_HASH(calls, u32, u64, 64);
BPF_RINGBUF_OUTPUT(recs, 8);
#define TWICE(x) static __always_inline u64 twice_##x(u64 v) { return 2 * v; }
TWICE(n)
RAW_TRACEPOINT_PROBE(sys_exit)
{
    u32 pid = bpf_get_current_pid_tgid() >> 32;
    if (pid != PID)
        return 0;
    u64 zero = 0, *n = calls.lookup_or_try_init(&pid, &zero);
    if (n)
        *n += twice_n(1);
    struct rec *r = recs.ringbuf_reserve(sizeof(struct rec));
    if (r) {
        char brace = '}';
        r->pid = pid;
        __builtin_memcpy(r->note, "{x}", 4);
        r->note[4] = brace;
        recs.ringbuf_submit(r, 0);
    }
    return 0;
}
"""


def _exits_seen(bpf, syscalls: int) -> tuple[int, list[tuple[int, bytes]]]:
    """Make `syscalls` syscalls and read back what the program counted and recorded."""
    records = []
    bpf["recs"].open_ring_buffer(
        lambda _ctx, data, _size: records.append(
            (bpf["recs"].event(data).pid, bytes(bpf["recs"].event(data).note))))
    for _ in range(syscalls):
        os.getppid()
    bpf.ring_buffer_poll(timeout=100)
    counted = {k.value: v.value for k, v in bpf["calls"].items()}.get(os.getpid(), 0)
    return counted, records


@pytest.fixture
def kept(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "CACHE_DIR", tmp_path / "bpf")
    return [f"-DPID={os.getpid()}"]


def test_a_second_compile_loads_the_first_ones_instructions_against_its_own_maps(kept):
    from bcc import BPF
    first = cache.compiled(TEXT, kept)
    assert type(first) is BPF                      # nothing kept yet: compiled in full
    (path,) = cache.CACHE_DIR.glob("collector-*.json")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    try:
        counted, records = _exits_seen(first, 5)
    finally:
        first.cleanup()
    second = cache.compiled(TEXT, kept)
    try:
        assert type(second) is not BPF and isinstance(second, BPF)
        assert cache.describe(second) == json.loads(path.read_text())["maps"]
        again, records_again = _exits_seen(second, 5)
    finally:
        second.cleanup()
    # the kept instructions wrote into the second module's maps, as the first's did
    assert counted >= 10 and again >= 10 and counted % 2 == again % 2 == 0
    assert records and records_again
    assert {r for r in records + records_again} == {(os.getpid(), b"{x}")}


@pytest.fixture(scope="module")
def kept_file(tmp_path_factory) -> Path:
    """The file a first compile of TEXT keeps (compiled once for the spoiling tests below)."""
    folder = tmp_path_factory.mktemp("kept") / "bpf"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cache, "CACHE_DIR", folder)
        cache.compiled(TEXT, [f"-DPID={os.getpid()}"]).cleanup()
    (path,) = folder.glob("collector-*.json")
    return path


@pytest.mark.parametrize("spoil", ["writable by others", "other maps", "not json"])
def test_a_kept_file_not_to_be_trusted_is_compiled_again_in_full(kept, kept_file, spoil):
    from bcc import BPF
    cache.CACHE_DIR.mkdir(mode=0o700, parents=True)
    path = cache.CACHE_DIR / kept_file.name
    shutil.copy(kept_file, path)   # as the first compile left it (mode 0600)
    assert cache._read(path) is not None   # trusted as it is
    if spoil == "writable by others":
        path.chmod(0o666)
    elif spoil == "other maps":
        kept_text = json.loads(path.read_text())
        kept_text["maps"]["calls"][3] = 65              # max entries
        path.write_text(json.dumps(kept_text))
    else:
        path.write_text("{")
    again = cache.compiled(TEXT, kept)
    try:
        assert type(again) is BPF
    finally:
        again.cleanup()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and cache._read(path) is not None


def test_bodies_are_taken_out_and_everything_else_kept():
    text = cache.maps_only(TEXT)
    assert "lookup_or_try_init" not in text and "return 2 * v" not in text
    assert "struct rec { u32 pid; char note[8]; };" in text       # a struct is not a body
    assert "BPF_HASH(calls, u32, u64, 64);" in text
    assert "TWICE(x) static __always_inline u64 twice_##x(u64 v) ;" in text
    assert "RAW_TRACEPOINT_PROBE(sys_exit)\n;" in text
    assert "recs.ringbuf_reserve(sizeof(struct rec))" in text.split("evlab_record_types")[1]


def test_the_collector_is_kept_once_compiled_and_its_maps_compile_alone_the_same():
    collector, missing = open_collector("bcc", functions=())
    try:
        assert collector is not None, missing
    finally:
        if collector is not None:
            collector.close()
    text, flags = bpf_text(), collector_cflags()
    kept = cache._read(cache.CACHE_DIR / f"collector-{cache.cache_key(text, flags)}.json")
    assert kept is not None
    alone = cache.CachedBPF(cache.maps_only(text), flags, {})
    try:
        assert cache.describe(alone) == kept["maps"]
    finally:
        alone.cleanup()


def test_set_up_compiles_the_collector_into_an_empty_cache_once(kept, capsys):
    """`make setup` (probes/bcc/warm.py): the first session on a machine loads the collector
    instead of compiling it in full; a set-up run again compiles nothing."""
    from probes.bcc import warm
    assert not warm.kept()
    assert warm.main() == 0 and warm.kept()
    assert "compiled the BPF collector" in capsys.readouterr().err
    assert warm.main() == 0 and capsys.readouterr().err == ""
