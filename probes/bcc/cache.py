"""The collector compiled once per machine, not once per session.

A BCC compile of collector.bpf.c costs ~1.75 CPU-s, nearly all of it LLVM making the programs'
code; its maps alone compile in ~0.33 (the same text with every function's body taken out).
So the first compile on a machine keeps each program's instructions in a file, the map
descriptors in them named by their map, and every later session compiles the maps alone (BCC's
tables, ring buffers and their Python types, as before) and loads those instructions with its
own maps' descriptors put in (CachedBPF).

The file's name is a digest of all that decides the instructions: the program's text, every
-D flag (the running kernel's struct offsets among them), BCC's version and the kernel's
release. It is used only if root owns it and its folder and no one else may write either (it
is loaded into the kernel), and only if the maps compiled now are described exactly as the
ones the instructions were compiled against; otherwise the program is compiled in full, as
without a file, and the file written again.

    bpf = compiled(text, cflags)      # a bcc.BPF, or a CachedBPF (a bcc.BPF subclass)

The folder is /var/cache/evlab/bpf, or $EVLAB_BPF_CACHE; removing it costs the next session
one full compile.
"""

import base64
import hashlib
import json
import os
import re
import struct
import tempfile
from pathlib import Path

from probes.bcc.prog import RAW_PREFIX, load_as

# absolute now: the compile runs where libbcc chdirs (load.py, private_cwd)
CACHE_DIR = Path(os.environ.get("EVLAB_BPF_CACHE", "/var/cache/evlab/bpf")).absolute()
KEEP = 4    # files kept: a few checkouts of evlab on one machine do not evict each other
LD_IMM64, PSEUDO_MAP_FD = 0x18, 1
# Functions BCC loads and attaches by their names' prefix (BPF._trace_autoload): the kinds the
# collector has are done here too; a text with any other kind is not kept.
AUTOLOADED = ((b"tracepoint__", "TRACEPOINT", "attach_tracepoint"),
              (RAW_PREFIX, "RAW_TRACEPOINT", "attach_raw_tracepoint"))
NOT_KEPT = (b"kprobe__", b"kretprobe__", b"kfunc__", b"kretfunc__", b"lsm__")


def compiled(text: str, cflags: list[str]):
    """The program compiled in full, or its maps compiled and its kept instructions loaded."""
    from bcc import BPF
    path = _path(text, cflags)
    kept = _read(path)
    if kept is not None:
        try:
            return CachedBPF(maps_only(text), cflags, kept["programs"], kept["maps"])
        except Exception:   # its maps not the kept ones' (StaleMaps), or a program refused:
            pass            # compiled in full below, as without a file, and kept again
    bpf = BPF(text=text, cflags=cflags)
    _write(path, bpf, text, cflags)
    return bpf


def _path(text: str, cflags: list[str]) -> Path:
    return CACHE_DIR / f"collector-{cache_key(text, cflags)}.json"


def cache_key(text: str, cflags: list[str]) -> str:
    from bcc.version import __version__ as bcc_version
    digest = hashlib.sha256(json.dumps([text, cflags, bcc_version, os.uname().release]).encode())
    return digest.hexdigest()[:32]


def maps_only(text: str) -> str:
    """The text with every function's body taken out (a declaration is left), and one small
    function reserving each ring buffer's record as the programs do: BCC learns a ring
    buffer's record type from those calls."""
    records = sorted(set(re.findall(r"(\w+)\.ringbuf_reserve\(sizeof\((struct \w+)\)\)", text)))
    stub = "".join(f"    {kind} *r{i} = {ring}.ringbuf_reserve(sizeof({kind}));\n"
                   f"    if (r{i}) {ring}.ringbuf_submit(r{i}, 0);\n"
                   for i, (ring, kind) in enumerate(records))
    return (_bodies_removed(text)
            + f"\nint evlab_record_types(void *ctx)\n{{\n{stub}    return 0;\n}}\n")


def _bodies_removed(text: str) -> str:
    """Each top-level `{...}` that follows a `)` (a function's body, a macro's too) becomes
    `;`; comments, strings and character literals are read past, not into."""
    out: list[str] = []
    depth, i, body = 0, 0, False
    while i < len(text):
        for opening, closing in (("//", "\n"), ("/*", "*/")):
            if text.startswith(opening, i):
                end = text.find(closing, i + 2)
                end = len(text) if end < 0 else end + (len(closing) if closing == "*/" else 0)
                break
        else:
            end = _literal_end(text, i) if text[i] in "\"'" else i + 1
        piece = text[i:end]
        if piece == "{":
            body = body or (depth == 0 and "".join(out[-64:]).rstrip().endswith(")"))
            depth += 1
        elif piece == "}":
            depth -= 1
            if body and depth == 0:
                body, piece = False, ";"
        if not body:
            out.append(piece)
        i = end
    return "".join(out)


def _literal_end(text: str, i: int) -> int:
    j = i + 1
    while text[j] != text[i]:
        j += 2 if text[j] == "\\" else 1
    return j + 1


def describe(bpf) -> dict:
    """Every map of a compiled module as BCC describes it to Python: key and value types,
    map type, size, flags, and a ring buffer's record fields."""
    from bcc import lib
    maps = {}
    for name in _table_names(bpf):
        i = lib.bpf_table_id(bpf.module, name)
        maps[name.decode()] = [
            lib.bpf_table_key_desc(bpf.module, name).decode(),
            lib.bpf_table_leaf_desc(bpf.module, name).decode(),
            lib.bpf_table_type_id(bpf.module, i), lib.bpf_table_max_entries_id(bpf.module, i),
            lib.bpf_table_flags_id(bpf.module, i),
            [lib.bpf_perf_event_field(bpf.module, name, j).decode()
             for j in range(lib.bpf_perf_event_fields(bpf.module, name))]]
    return maps


def _table_names(bpf) -> list[bytes]:
    import ctypes

    from bcc import lib
    lib.bpf_num_tables.restype, lib.bpf_num_tables.argtypes = ctypes.c_ulonglong, [ctypes.c_void_p]
    lib.bpf_table_name.restype = ctypes.c_char_p
    lib.bpf_table_name.argtypes = [ctypes.c_void_p, ctypes.c_ulonglong]
    return [lib.bpf_table_name(bpf.module, i) for i in range(lib.bpf_num_tables(bpf.module))]


def programs_of(bpf) -> dict[str, dict]:
    """Each function's instructions, with the map descriptors in them zeroed and named:
    {name: {"insns": base64, "maps": [[instruction index, map name], ...]}}."""
    from bcc import lib
    names = {lib.bpf_table_fd(bpf.module, n): n.decode() for n in _table_names(bpf)}
    programs = {}
    for i in range(lib.bpf_num_functions(bpf.module)):
        name = lib.bpf_function_name(bpf.module, i)
        if name.startswith(NOT_KEPT):
            raise ValueError(f"{name.decode()}: BCC attaches it by its name, this file does not")
        insns = bytearray(bpf.dump_func(name))
        maps = []
        for k in range(0, len(insns) // 8):
            code, regs, _off, imm = struct.unpack_from("<BBhi", insns, 8 * k)
            if code == LD_IMM64 and regs >> 4 == PSEUDO_MAP_FD:
                maps.append([k, names[imm]])
                struct.pack_into("<i", insns, 8 * k + 4, 0)
            elif code == LD_IMM64 and regs >> 4:
                raise ValueError(f"{name.decode()}: a 64-bit load of kind {regs >> 4}")
        programs[name.decode()] = {"insns": base64.b64encode(insns).decode(), "maps": maps}
    return programs


class StaleMaps(Exception):
    """The maps compiled now are not the ones the kept instructions were compiled against."""


def CachedBPF(text: str, cflags: list[str], programs: dict[str, dict], maps=None):
    """A bcc.BPF of the maps alone (text: maps_only's) whose functions are the kept
    instructions; StaleMaps, before any is loaded, if `maps` does not describe its maps."""
    from bcc import BPF

    class Cached(BPF):
        def __init__(self):
            self._programs = programs
            try:
                super().__init__(text=text, cflags=[*cflags, "-w"])   # declarations left warn
            except BaseException:
                self.cleanup()   # what was loaded and attached before the failure
                raise

        def dump_func(self, func_name):
            from bcc import lib
            name = func_name.decode() if isinstance(func_name, bytes) else func_name
            program = self._programs[name]
            insns = bytearray(base64.b64decode(program["insns"]))
            for k, map_name in program["maps"]:
                fd = lib.bpf_table_fd(self.module, map_name.encode())
                struct.pack_into("<i", insns, 8 * k + 4, fd)
            return bytes(insns)

        def load_func(self, func_name, prog_type, device=None, attach_type=-1):
            func_name = func_name.encode() if isinstance(func_name, str) else func_name
            if func_name not in self.funcs:
                fd = load_as(self, func_name.decode(), prog_type, max(attach_type, 0))
                self.funcs[func_name] = BPF.Function(self, func_name, fd)
            return self.funcs[func_name]

        def _trace_autoload(self):
            # BCC's own (run at the end of its __init__), for the kinds the collector has
            if maps is not None and describe(self) != maps:
                raise StaleMaps()
            for name in map(str.encode, self._programs):
                for prefix, kind, attach in AUTOLOADED:
                    if name.startswith(prefix):
                        fn = self.load_func(name, getattr(BPF, kind))
                        point = name[len(prefix):]
                        if kind == "TRACEPOINT":   # category__event
                            point = point.replace(b"__", b":")
                        getattr(self, attach)(tp=point, fn_name=fn.name)

    return Cached()


def kept(text: str, cflags: list[str]) -> bool:
    """Whether a file a session compiling this text would load is there (probes/bcc/warm.py)."""
    return _read(_path(text, cflags)) is not None


def _read(path: Path) -> dict | None:
    try:
        if not (_trusted(path.parent) and _trusted(path)):
            return None
        kept = json.loads(path.read_text())
        return kept if isinstance(kept, dict) and {"maps", "programs"} <= kept.keys() else None
    except (OSError, ValueError):
        return None


def _trusted(path: Path) -> bool:
    st = path.stat()
    return st.st_uid == 0 and not st.st_mode & 0o022


def _write(path: Path, bpf, text: str, cflags: list[str]) -> None:
    """Keep the compiled program's instructions, if its maps compiled alone are the same maps
    (else a later session could not use them) and the folder can be root's alone."""
    try:
        maps = describe(bpf)
        CachedBPF(maps_only(text), cflags, {}, maps).cleanup()   # StaleMaps if they differ
        programs = programs_of(bpf)
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _trusted(path.parent):
            return
        fd, staged = tempfile.mkstemp(dir=path.parent, prefix=".collector-")
        try:
            with os.fdopen(fd, "w") as f:
                json.dump({"maps": maps, "programs": programs}, f)
            os.replace(staged, path)
        finally:
            Path(staged).unlink(missing_ok=True)
        for old in sorted(path.parent.glob("collector-*.json"),
                          key=lambda p: p.stat().st_mtime)[:-KEEP]:
            old.unlink(missing_ok=True)
    except Exception:   # StaleMaps, the maps' compile failing, a full disk: keeping is a saving,
        pass            # never the session's failure; the next session compiles in full again
