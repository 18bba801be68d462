"""The session archive (.tar.gz): the whole event stream and everything needed to re-judge it.

Members: manifest.json, events.jsonl, verdicts.json, report.md, verifier.jsonl,
pcap/<scenario>.pcap, records/<scenario>.<server>.jsonl, scenarios/<scenario>.toml,
tasks/<sha256>/contract.toml (the contract of each task judged, by its folder's digest: a
replay re-judges by it, wherever the task's folder is now).

Writing: ArchiveWriter is a stream consumer that appends every event to events.jsonl as it
happens (so an interrupted session still leaves a loadable, partial archive); `finish()` packs.
Reading never extracts to disk: members are checked (no absolute paths, no `..`, no links or
devices, bounded sizes, a known version) and read into memory.
"""

import io
import json
import platform
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from sessions.output import document, report
from sessions.output.grades import grade_of
from sessions.output.leaderboard import board_of
from sessions.spec.contract import Contract, ContractError, parse_contract
from sessions.spec.task import TaskError, task_of_record
from sessions.stream.codec import EventFormatError, from_json, to_dict, to_json
from sessions.stream.events import Event, SessionEnded, SessionStarted, Verdict, VerifierResult
from sessions.stream.evidence import EvidenceBook
from sessions.stream.stream import EventStream

FORMAT = "evlab-archive"
VERSION = 1
MAX_MEMBER_BYTES = 256 << 20   # and what is kept in memory: the manifest and the events
MAX_TOTAL_BYTES = 4 << 30      # every member is read (a damaged one is found) but not kept;
                               # a campaign of 2,000 attempts with pcaps is about 3 GB
KEPT = ("manifest.json", "events.jsonl")
CONTRACTS_AS_STATED = "as-stated"
MAX_MEMBERS = 10_000


class ArchiveError(ValueError):
    """An archive evlab will not read: the message says why, in one line."""


class ArchiveWriter:
    """Packs the session's EvidenceBook (and what the runner leaves in the staging directory:
    pcaps and server records, packed under pcap/ and records/) into a .tar.gz, at any time.

    Given the stream, a write during the session packs a consistent snapshot: every event up
    to one sequence number, taken under the stream's lock. Generated members (manifest,
    verdicts, report) are made fresh on each write, so exporting mid-session and again at the
    end both give complete archives. Without a book of its own to read, the writer is a stream
    consumer keeping one."""

    def __init__(self, staging: Path, book: EvidenceBook | None = None,
                 stream: EventStream | None = None):
        self.staging = Path(staging)
        self.staging.mkdir(parents=True, exist_ok=True)
        self.book = book if book is not None else EvidenceBook()
        self._own_book = book is None
        self._stream = stream
        self._closed = False

    def __call__(self, event: Event) -> None:
        if self._own_book and not self._closed:
            self.book.consume(event)

    def _snapshot(self) -> EvidenceBook:
        if self._closed or self._stream is None:
            return self.book
        with self._stream.hold():
            events = list(self.book.events)
        return EvidenceBook.of(events)

    def write(self, archive_path: Path) -> Path:
        """Pack everything recorded so far into archive_path (atomically)."""
        book = self._snapshot()
        grade, board = grade_of(book), board_of(book)   # made once: the report shows them too
        generated = {
            "manifest.json": _json_bytes(manifest(book)),
            "events.jsonl": "".join(to_json(e) + "\n" for e in book.events).encode(),
            "verdicts.json": _json_bytes([to_dict(e) for e in book.events
                                          if isinstance(e, Verdict)]),
            "verifier.jsonl": "".join(to_json(e) + "\n" for e in book.events
                                      if isinstance(e, VerifierResult)).encode(),
            "report.md": report.markdown(book, grade, board).encode(),
        }
        if grade is not None:
            generated["grade.json"] = _json_bytes(grade.to_json())
        if board is not None:
            generated["campaign.json"] = _json_bytes(board.to_json())
        archive_path = Path(archive_path)
        archive_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = archive_path.with_name(archive_path.name + ".partial-write")
        # zlib's default level: a third of level 9's CPU on the event logs, ~3% larger
        with tarfile.open(tmp, "w:gz", compresslevel=6) as tar:
            for name, data in generated.items():
                _add_bytes(tar, name, data)
            self._add_staged(tar, book)
        tmp.replace(archive_path)
        return archive_path

    def _add_staged(self, tar: tarfile.TarFile, book: EvidenceBook) -> None:
        for path in sorted(self.staging.iterdir()):
            if path.name.endswith(".pcap"):
                tar.add(path, arcname=f"pcap/{path.name}")
            elif path.name.endswith(".jsonl"):   # a server's record (sessions/lab/scenario_run)
                tar.add(path, arcname=f"records/{path.name}")
        for ev in book.scenarios.values():
            src = ev.started.scenario_file
            if src and Path(src).is_file():
                tar.add(src, arcname=f"scenarios/{ev.id}.toml")
        for sha, text in _contracts(book).items():
            _add_bytes(tar, f"tasks/{sha}/contract.toml", text.encode())

    def close(self) -> None:
        """Stop recording: later writes pack the book as it is."""
        self._closed = True

    def finish(self, archive_path: Path) -> Path:
        """The last write: stop recording and pack."""
        self.close()
        return self.write(archive_path)


def _contracts(book: EvidenceBook) -> dict[str, str]:
    """The contract text of each task the session's records name (as the session read it)."""
    out = {}
    for e in book.events:
        if isinstance(e, SessionStarted) and e.task_sha256 and e.task_sha256 not in out:
            try:
                out[e.task_sha256] = task_of_record(e.task_id, e.task_sha256).contract.text
            except TaskError:   # not loaded here: a replay will need its folder
                continue
    return out


def _json_bytes(data) -> bytes:
    return (json.dumps(data, indent=2) + "\n").encode()


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mtime = len(data), int(time.time())
    tar.addfile(info, io.BytesIO(data))


def manifest(book: EvidenceBook) -> dict:
    header = document.session_header(book)
    return {
        "format": FORMAT,
        "version": VERSION,
        **header,
        "kernel": header["kernel"] or platform.release(),  # a session that never started
        "clients": {s.id: {"path": s.started.client_path, "sha256": s.started.client_sha256}
                    for s in book.scenarios.values()},
        "scenario_files": {s.id: f"scenarios/{s.id}.toml" for s in book.scenarios.values()},
        "graded_client": ({"command": list(book.grade.command), "executable":
                           book.grade.executable, "sha256": book.grade.sha256}
                          if book.grade and not book.campaign else None),
        "campaign": ({"name": book.campaign.name, "engine": book.campaign.engine,
                      "clients": book.campaign.clients} if book.campaign else None),
        "written_wall_ns": time.time_ns(),
        # its contracts' copies mean what they state: one an earlier evlab packed left words
        # and thresholds out that it filled in (sessions/stream/compat.py)
        "contracts": CONTRACTS_AS_STATED,
    }


def parse_events(text: str, where: str) -> list[Event]:
    """Events from JSON lines; a last line cut off by an interruption is dropped."""
    events: list[Event] = []
    last = 0
    for number, line in enumerate(io.StringIO(text), 1):
        if not line.endswith("\n"):
            break
        try:
            event = from_json(line)
        except EventFormatError as e:
            raise ArchiveError(f"{where} line {number}: {e}") from None
        if event.seq and event.seq <= last:   # a stream repeated or spliced
            raise ArchiveError(f"{where} line {number}: event number {event.seq} after "
                               f"{last} (events must come in order, once)")
        last = max(last, event.seq)
        events.append(event)
    return events


@dataclass(frozen=True)
class LoadedArchive:
    manifest: dict
    events: list[Event]
    members: dict[str, bytes]

    @property
    def contracts(self) -> dict[str, Contract]:
        """The archive's copies of its tasks' contracts, by task digest (each checked)."""
        out, old = {}, self.manifest.get("contracts") != CONTRACTS_AS_STATED
        for name, data in self.members.items():
            if _is_contract(name):
                try:
                    text = data.decode(errors="replace")
                    out[PurePosixPath(name).parts[1]] = parse_contract(text, name, archived=old)
                except ContractError as e:
                    raise ArchiveError(f"the archive's {e}") from None
        return out

    @property
    def partial(self) -> bool:
        return bool(self.manifest.get("partial")) or not any(
            isinstance(e, SessionEnded) and not e.partial for e in self.events)


def _check_member(member: tarfile.TarInfo) -> None:
    name = member.name
    path = PurePosixPath(name)
    if path.is_absolute() or name.startswith(("/", "\\")):
        raise ArchiveError(f"member {name!r} has an absolute path")
    if ".." in path.parts or "\\" in name:
        raise ArchiveError(f"member {name!r} escapes the archive (..)")
    if member.issym() or member.islnk():
        raise ArchiveError(f"member {name!r} is a link")
    if not (member.isfile() or member.isdir()):
        raise ArchiveError(f"member {name!r} is not a regular file")
    if member.size > MAX_MEMBER_BYTES:
        raise ArchiveError(f"member {name!r} is {member.size:,} bytes "
                           f"(limit {MAX_MEMBER_BYTES:,})")


def _is_contract(name: str) -> bool:
    parts = PurePosixPath(name).parts
    return len(parts) == 3 and parts[0] == "tasks" and parts[2] == "contract.toml"


def load_archive(path: Path) -> LoadedArchive:
    path = Path(path)
    if not path.is_file():
        raise ArchiveError(f"{path}: no such archive")
    members: dict[str, bytes] = {}
    total = 0
    try:
        with tarfile.open(path, "r:gz") as tar:
            for count, member in enumerate(tar, 1):
                if count > MAX_MEMBERS:
                    raise ArchiveError(f"{path}: more than {MAX_MEMBERS} members")
                _check_member(member)
                if member.isdir():
                    continue
                total += member.size
                if total > MAX_TOTAL_BYTES:
                    raise ArchiveError(f"{path}: members add up to more than {MAX_TOTAL_BYTES:,} "
                                       "bytes")
                name = str(PurePosixPath(member.name))
                data = tar.extractfile(member)
                if data is None:   # not a regular file (_check_member refused links)
                    raise ArchiveError(f"{path}: {name} is not a regular file")
                # read what is judged; only check the rest (pcaps, records)
                if name in KEPT or _is_contract(name):
                    members[name] = data.read()
                else:
                    while data.read(1 << 20):
                        pass
    except (tarfile.TarError, EOFError, OSError) as e:
        raise ArchiveError(f"{path}: not a readable .tar.gz archive ({e})") from None
    for required in ("manifest.json", "events.jsonl"):
        if required not in members:
            raise ArchiveError(f"{path}: missing {required}; not an evlab archive")
    try:
        man = json.loads(members["manifest.json"])
    except RecursionError:
        raise ArchiveError(f"{path}: manifest.json is nested too deeply") from None
    except ValueError as e:
        raise ArchiveError(f"{path}: manifest.json is not JSON ({e})") from None
    if not isinstance(man, dict) or man.get("format") != FORMAT:
        raise ArchiveError(f"{path}: manifest format is not {FORMAT!r}")
    if man.get("version") != VERSION:
        raise ArchiveError(f"{path}: archive version {man.get('version')!r} is not supported "
                           f"(this evlab reads version {VERSION})")
    events = parse_events(members["events.jsonl"].decode(errors="replace"),
                          f"{path}: events.jsonl")
    return LoadedArchive(man, events, members)
