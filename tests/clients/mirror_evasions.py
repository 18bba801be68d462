"""A mirror client that syncs honestly but for one evasion, each past a way the judge once
looked, or one place it keeps notes in (tests/test_mirror.py):

  symlink-out      a log of what it copied is written through a symbolic link it plants in the
                   target, leading to /sync-log (at the sandbox's root, bubblewrap's tmpfs), and
                   removed again: every name it used is under the target, but the bytes land
                   outside it
  hardlink-inplace a changed file is rewritten through a hard link of it made under a
                   temporary name, then renamed over itself: by names, a new file moved into
                   place; in fact the old file's own inode, rewritten
  meta-HOW         every run changes a source file's metadata to what it already is (its
                   read-only filesystem refuses it; nothing in the tree differs), by HOW:
                   chmod, fchmod (a descriptor), chown, utime, setxattr, removexattr, truncate,
                   ftruncate, fallocate (a descriptor)
  pool             honest, and copies the files it must in a multiprocessing.Pool of two
                   workers: its locks are POSIX semaphores, made in /dev/shm (sem.*), the
                   sandbox's own for it
  notes-in-DIR     honest, and keeps notes in DIR (tmp: /tmp, shm: /dev/shm, the sandbox's own
                   for it; outside: /outside, a folder it makes at the root): a folder made there
                   (tempfile.mkdtemp) and 16 KiB written to a file in it with write(2), left
                   there

    python3 mirror_evasions.py SRC DST MODE
"""

import multiprocessing
import os
import shutil
import sys
import tempfile
from pathlib import Path


def same(s: os.stat_result, d: os.stat_result) -> bool:
    return s.st_size == d.st_size and s.st_mtime_ns == d.st_mtime_ns


def put(s: Path, d: Path, mode: str) -> None:
    tmp = d.with_name(f".{d.name}.tmp")
    if mode == "hardlink-inplace" and d.is_file() and not d.is_symlink():
        os.link(d, tmp)                       # another name of the same file
        with open(s, "rb") as i, open(tmp, "r+b") as o:
            o.truncate()
            shutil.copyfileobj(i, o)
    else:
        shutil.copyfile(s, tmp)
    shutil.copystat(s, tmp)
    os.replace(tmp, d)


def sync(src: Path, dst: Path, mode: str) -> list[str]:
    copied, todo = [], []
    for s in sorted(src.rglob("*")):
        rel = s.relative_to(src)
        d = dst / rel
        if s.is_symlink():
            if not d.is_symlink() or os.readlink(d) != os.readlink(s):
                if d.is_symlink() or d.exists():
                    d.unlink()
                os.symlink(os.readlink(s), d)
        elif s.is_dir():
            d.mkdir(exist_ok=True)
        elif not (d.is_file() and not d.is_symlink() and same(s.stat(), d.stat())):
            todo.append((s, d, mode))
            copied.append(str(rel))
    if mode == "pool":   # every run, a copy or none
        with multiprocessing.Pool(2) as pool:   # its queues' locks: sem_open in /dev/shm
            pool.starmap(put, todo)
            pool.close()
            pool.join()
    else:
        for job in todo:
            put(*job)
    for d in sorted(dst.rglob("*"), reverse=True):
        if not (src / d.relative_to(dst)).is_symlink() and \
                not (src / d.relative_to(dst)).exists():
            if d.is_dir() and not d.is_symlink():
                d.rmdir()
            else:
                d.unlink()
    return copied


def touch_source(src: Path, how: str) -> None:
    """One metadata change of the source's first file, to what it already is; refused."""
    f = next(p for p in sorted(src.rglob("*")) if p.is_file() and not p.is_symlink())
    st = f.stat()
    fd = os.open(f, os.O_RDONLY)
    changes = {
        "chmod": lambda: os.chmod(f, st.st_mode & 0o7777),
        "fchmod": lambda: os.fchmod(fd, st.st_mode & 0o7777),
        "chown": lambda: os.chown(f, st.st_uid, st.st_gid),
        "utime": lambda: os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns)),
        "setxattr": lambda: os.setxattr(f, "user.seen", b"1"),
        "removexattr": lambda: os.removexattr(f, "user.seen"),
        "truncate": lambda: os.truncate(f, st.st_size),
        "ftruncate": lambda: os.ftruncate(fd, st.st_size),
        "fallocate": lambda: os.posix_fallocate(fd, 0, 1),
    }
    try:
        changes[how]()
    except OSError:
        pass   # refused: the attempt is what the judge must see
    os.close(fd)


def keep_notes(where: str, copied: list[str]) -> None:
    folder = tempfile.mkdtemp(prefix="mirror-notes-", dir=where)
    fd = os.open(os.path.join(folder, "copied"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    notes = ("\n".join(copied) + "\n").encode().ljust(16_384, b"#")
    while notes:
        notes = notes[os.write(fd, notes):]
    os.close(fd)


def main() -> int:
    src, dst, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    if mode.startswith("meta-"):
        touch_source(src, mode[len("meta-"):])
    copied = sync(src, dst, mode)
    if mode == "symlink-out" and copied:
        planted = dst / ".sync-log"
        os.symlink("/sync-log", planted)   # no folder made: no name of its own outside
        planted.write_text("\n".join(copied) + "\n")
        planted.unlink()
    if mode.startswith("notes-in-"):   # TMPDIR is its working directory: DIR named
        where = {"tmp": "/tmp", "shm": "/dev/shm", "outside": "/outside"}[mode[len("notes-in-"):]]
        os.makedirs(where, exist_ok=True)
        keep_notes(where, copied)
    print('{"claim": "completed"}')
    return 0


if __name__ == "__main__":
    sys.exit(main())
