"""Follow a file another process appends to: each call returns the complete lines added since
the last one; a partly written last line waits for the next call."""

from collections.abc import Iterator
from pathlib import Path

CHUNK = 1 << 22   # read 4 MiB at a time: a flooded record file never sits in memory whole


class LineTail:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._offset = 0
        self._carry = b""

    def new_lines(self) -> list[bytes]:
        return list(self.lines())

    def lines(self) -> Iterator[bytes]:
        """The complete lines added since the last call, read a chunk at a time."""
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return
        with f:
            f.seek(self._offset)
            while data := f.read(CHUNK):
                self._offset += len(data)
                lines = (self._carry + data).split(b"\n")
                self._carry = lines.pop()
                yield from lines
