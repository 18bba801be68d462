"""Follow a file another process appends to: each call returns the complete lines added since
the last one; a partly written last line waits for the next call."""

from pathlib import Path


class LineTail:
    def __init__(self, path: Path):
        self.path = Path(path)
        self._offset = 0
        self._carry = b""

    def new_lines(self) -> list[bytes]:
        try:
            with open(self.path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(data)
        lines = (self._carry + data).split(b"\n")
        self._carry = lines.pop()
        return lines
