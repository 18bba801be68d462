"""What the kernel says was done to the files of one folder (inotify, the kernel's fsnotify):
created, written, closed after writing, renamed, moved in or out, deleted. The lab watches the
client's outputs folder with it, so "was the output ever written in place under its final
name" is decided by the kernel's view of the client's writes and renames, never by the
client's word. Every write path the kernel has (write, pwrite, writev, sendfile, splice,
copy_file_range, io_uring, truncate) reports a modification; an inotify watch sees them
whichever process or mount namespace made them.

    watch = FolderWatch(folder)
    records = watch.drain()   # [{"event": "created", "name": "data.bin", "t_ns": ...}, ...]
    watch.close()

A record's time is when it was read (inotify carries none): the lab drains at its pump's pace.
Writes to one name are one `written` record until it is closed, renamed or deleted (the
kernel's own coalescing makes their count meaningless); `closed_write` ends a writer.
"""

import time
from pathlib import Path

from inotify_simple import INotify
from inotify_simple import flags as F

MASK = (F.CREATE | F.MODIFY | F.CLOSE_WRITE | F.MOVED_FROM | F.MOVED_TO | F.DELETE
        | F.DELETE_SELF | F.MOVE_SELF)


class FolderWatch:
    def __init__(self, folder: Path):
        self.inotify = INotify(nonblocking=True)
        self.inotify.add_watch(folder, MASK)
        self.writing: set[str] = set()        # names written since their last create or close
        self.moving: dict[int, str] = {}      # a rename's cookie -> the name it left

    def drain(self) -> list[dict]:
        now, out = time.monotonic_ns(), []

        def emit(event: str, **fields) -> None:
            out.append({"event": event, "t_ns": now, **fields})

        for e in self.inotify.read(timeout=0):
            name, mask = e.name, e.mask
            folder = {"dir": True} if mask & F.ISDIR else {}
            if mask & F.Q_OVERFLOW:
                emit("overflow")
            if mask & (F.DELETE_SELF | F.MOVE_SELF):
                emit("folder_gone")
            if mask & F.CREATE:
                self.writing.discard(name)
                emit("created", name=name, **folder)
            if mask & F.MODIFY and name not in self.writing:
                self.writing.add(name)
                emit("written", name=name)
            if mask & F.CLOSE_WRITE:
                self.writing.discard(name)
                emit("closed_write", name=name)
            if mask & F.MOVED_FROM:
                self.writing.discard(name)
                self.moving[e.cookie] = name
            if mask & F.MOVED_TO:
                self.writing.discard(name)
                old = self.moving.pop(e.cookie, None)
                if old is None:
                    emit("moved_in", name=name, **folder)
                else:
                    emit("renamed", name=name, old=old, **folder)
            if mask & F.DELETE:
                self.writing.discard(name)
                emit("deleted", name=name, **folder)
        for old in self.moving.values():   # its pair never came: it left the folder
            emit("moved_out", name=old)
        self.moving.clear()
        return out

    def close(self) -> None:
        self.inotify.close()
