#!/usr/bin/env python3
"""A backup client that hashes and uploads its source through one memory mapping (standard
library only): Python's `mmap`, an ordinary idiom.

Usage: mapped_client.py [--storm] HOST PORT SOURCE [IGNORED...]

The protocol as `backup_client.py` speaks it (fixture/backup/protocol.md): `CHECK`, `PUT` on
`NEED` on the same connection, a failed upload retried from byte 0 on a new connection 0.2 s
later, at most 3 upload attempts; claims as JSON lines on stdout; exit 0 only on completion.
SOURCE is mapped read-only once: its SHA-256 is computed over the mapping (one pass), and each
upload sends the payload from the mapping (its pages are mapped already: no second read).

`--storm` is the adversary: before the backup it hashes the mapping STORM_ROUNDS (40) times,
`madvise(MADV_DONTNEED)` between passes so that each pass faults the pages in again (a second
pass over the source's file, where an in-memory re-hash would not be).
"""

import hashlib
import json
import mmap
import os
import socket
import sys
import time

CHUNK = 64 * 1024
TIMEOUT = 20.0
MAX_ATTEMPTS = 3
BACKOFF = 0.2
MAX_LINE = 256
STORM_ROUNDS = 40


class UploadError(Exception):
    """One upload attempt failed; the message is the reason."""


def claim(name, **fields):
    print(json.dumps({"claim": name, **fields}), flush=True)


def recv_line(sock):
    """One answer line without its `\\n`; raises UploadError if the connection ends first."""
    line = b""
    while not line.endswith(b"\n"):
        byte = sock.recv(1)
        if not byte:
            raise UploadError("connection closed before a full answer")
        line += byte
        if len(line) > MAX_LINE:
            raise UploadError("answer line too long")
    return line[:-1].decode("ascii", errors="replace")


def put(sock, data, digest, length):
    """Send one PUT on sock, the payload from the mapping `data` from byte 0; raise UploadError
    unless `OK digest`."""
    try:
        sock.sendall(f"PUT {digest} {length}\n".encode("ascii"))
        view = memoryview(data)
        for sent in range(0, length, CHUNK):
            sock.sendall(view[sent:sent + CHUNK])
        view.release()
        answer = recv_line(sock)
    except OSError as e:  # reset, broken pipe, timeout
        raise UploadError(f"connection error during upload: {e}") from None
    if answer.lower() != f"ok {digest}".lower():
        raise UploadError(answer.removeprefix("REJECT ") if answer.startswith("REJECT ")
                          else f"unexpected answer {answer!r}")


def backup(host, port, data, digest, length):
    """CHECK, then PUT with retries. Returns (receiver_has, attempts, failure reason or None)."""
    try:
        sock = socket.create_connection((host, port), timeout=TIMEOUT)
    except OSError as e:
        return None, 0, f"cannot connect: {e}"
    try:
        try:
            sock.sendall(f"CHECK {digest}\n".encode("ascii"))
            answer = recv_line(sock)
        except (OSError, UploadError) as e:
            return None, 0, f"check failed: {e}"
        if answer not in ("HAVE", "NEED"):
            return None, 0, f"unexpected answer to CHECK: {answer!r}"
        claim("checked", receiver_has=answer == "HAVE", digest=digest)
        if answer == "HAVE":
            return True, 0, None
        reason = None
        for attempt in range(1, MAX_ATTEMPTS + 1):
            if attempt > 1:  # a retry: start over on a new connection
                sock.close()
                time.sleep(BACKOFF)
                try:
                    sock = socket.create_connection((host, port), timeout=TIMEOUT)
                except OSError as e:
                    reason = f"cannot connect: {e}"
                    continue
            try:
                put(sock, data, digest, length)
                return False, attempt, None
            except UploadError as e:
                reason = str(e)
        return False, MAX_ATTEMPTS, f"upload failed after {MAX_ATTEMPTS} attempts: {reason}"
    finally:
        sock.close()


def mapped(path):
    """A read-only mapping of path (an empty file maps nothing: b"")."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""


def storm(data):
    """The adversary's extra: STORM_ROUNDS passes over the mapping, its pages dropped between."""
    for _ in range(STORM_ROUNDS):
        if isinstance(data, mmap.mmap):
            data.madvise(mmap.MADV_DONTNEED)
        hashlib.sha256(data).digest()


def main(argv):
    adversary = argv[:1] == ["--storm"]
    argv = argv[1:] if adversary else argv
    if len(argv) < 3 or not argv[1].isdigit():
        print("usage: mapped_client.py [--storm] HOST PORT SOURCE [IGNORED...]", file=sys.stderr)
        return 2
    host, port, source = argv[0], int(argv[1]), argv[2]
    claim("started", source=source, variant="storm" if adversary else "mapped")
    try:
        data = mapped(source)
    except (OSError, ValueError) as e:
        claim("failed", reason=f"cannot map source: {e}")
        return 1
    if adversary:
        storm(data)
        claim("extra", mode="storm", ok=True, rounds=STORM_ROUNDS, bytes=len(data))
    digest = hashlib.sha256(data).hexdigest()
    has, attempts, reason = backup(host, port, data, digest, len(data))
    if has is False and reason is None:
        claim("uploaded", bytes=len(data), attempts=attempts)
    if reason is None:
        claim("completed")
    else:
        claim("failed", reason=reason)
    return 0 if reason is None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
