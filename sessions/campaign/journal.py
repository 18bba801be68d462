"""The campaign directory: the campaign file as it started, the journal of its stream, and the
attempts' evidence files, so a stopped campaign resumes without redoing finished attempts.

    DIR/campaign.toml   the file as read when the campaign started (a resume must match it)
    DIR/journal.jsonl   every observation the campaign's stream published, appended and fsynced
                        after each attempt (a cut-off last line is dropped on resume)
    DIR/evidence/       pcaps and server records by attempt id (packed into the archive)
"""

import os
from pathlib import Path

from sessions.campaign.shipping import ShippingError
from sessions.stream.codec import EventFormatError, from_json, to_json
from sessions.stream.events import DERIVED, Event, PhaseChanged, SessionEnded, SessionStarted


class JournalError(ValueError):
    """A campaign directory evlab will not start or resume in; one line."""


class Journal:
    """A stream consumer: buffers the observations published and appends them at sync()."""

    def __init__(self, directory: Path):
        self.dir = Path(directory)
        self.evidence = self.dir / "evidence"
        self.path = self.dir / "journal.jsonl"
        self._pending: list[str] = []

    @classmethod
    def create(cls, directory: Path, text: str) -> "Journal":
        directory = Path(directory)
        if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
            raise JournalError(f"{directory}: already exists and is not empty (resume it with "
                               "--resume, or give another --dir)")
        try:
            (directory / "evidence").mkdir(parents=True, exist_ok=True)
            (directory / "campaign.toml").write_text(text)
        except OSError as e:
            raise JournalError(f"{directory}: cannot write the campaign directory "
                               f"({e.strerror or e})") from None
        return cls(directory)

    @classmethod
    def reopen(cls, directory: Path, text: str) -> tuple["Journal", list[Event]]:
        """The directory of a stopped campaign started from this same file, and its events."""
        directory = Path(directory)
        try:
            started_from = (directory / "campaign.toml").read_text()
        except OSError:
            raise JournalError(f"{directory}: not a campaign directory (no campaign.toml); "
                               "nothing to resume") from None
        if started_from != text:
            raise JournalError(f"{directory}: was started from a different campaign file "
                               "(compare with its campaign.toml)")
        journal = cls(directory)
        journal.evidence.mkdir(exist_ok=True)
        return journal, journal._read()

    def _read(self) -> list[Event]:
        try:
            text = self.path.read_text() if self.path.exists() else ""
        except (OSError, UnicodeDecodeError) as e:
            raise JournalError(f"{self.path}: cannot read ({e})") from None
        lines = text.splitlines(keepends=True)
        events = []
        for number, line in enumerate(lines, 1):
            try:
                events.append(from_json(line))
            except EventFormatError as e:
                if number == len(lines) and not line.endswith("\n"):
                    break                      # cut off by the stop: that attempt runs again
                raise JournalError(f"{self.path} line {number}: {e}") from None
        return _whole_attempts(events)

    def __call__(self, event: Event) -> None:
        if not isinstance(event, (*DERIVED, SessionEnded)):   # each run ends its own
            self._pending.append(to_json(event) + "\n")

    def keep_files(self, files: dict[str, bytes], scenario: str) -> None:
        for name, data in files.items():
            if "/" in name or not name.startswith(scenario + "."):
                raise ShippingError(f"evidence file {name!r} is not the attempt's own")
            (self.evidence / name).write_bytes(data)

    def discard(self) -> None:
        """Forget what was published since the last sync (a resume replaying the journal)."""
        self._pending.clear()

    def sync(self) -> None:
        """Append what was published since the last sync, durably."""
        if not self._pending:
            return
        with open(self.path, "a") as f:
            f.write("".join(self._pending))
            f.flush()
            os.fsync(f.fileno())
        self._pending.clear()


def _whole_attempts(events: list[Event]) -> list[Event]:
    """Drop a last attempt whose events were cut off before its `done` phase."""
    for i in range(len(events) - 1, -1, -1):
        e = events[i]
        if isinstance(e, PhaseChanged) and e.phase == "done":
            return events
        if isinstance(e, SessionStarted):
            return events[:i]
    return events
