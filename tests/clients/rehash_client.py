#!/usr/bin/env python3
"""A backup client that is honest except for a hash storm in memory (standard library only).

Usage: rehash_client.py HOST PORT SOURCE [IGNORED...]

Exactly the behaviour of `backup_client.py --variant honest` (fixture/backup/protocol.md):
SOURCE is read once (one streaming pass that hashes it with SHA-256 and keeps the bytes in
memory), `CHECK`, `PUT` on `NEED` on the same connection, any failed upload retried from byte 0
on a new connection 0.2 s later, at most 3 upload attempts; claims as JSON lines on stdout; exit
0 only on completion.

The one deliberate extra: before `CHECK`, the in-memory copy is hashed again REHASH_ROUNDS (512)
times in a tight loop (`hashlib.sha256(data).digest()`, no I/O between passes). The file is
still read only once, so what this exercises is the cost of redundant hashing (CPU time, hash
work per byte moved), not a second read of the source. The digest sent is the last re-hash (it
always equals the first). The extra step is reported as {"claim": "extra", ...}; it cannot
abort the backup.

It writes no file and imports nothing outside the standard library (not even backup_client.py,
whose import would write a __pycache__ next to it).
"""

import hashlib
import json
import socket
import sys
import time

CHUNK = 64 * 1024
TIMEOUT = 20.0
MAX_ATTEMPTS = 3
BACKOFF = 0.2
MAX_LINE = 256
REHASH_ROUNDS = 512   # ~200 ms here (SHA extensions): 4.7x the stretch allowance


class UploadError(Exception):
    """One upload attempt failed; the message is the reason."""


def claim(name, **fields):
    print(json.dumps({"claim": name, **fields}), flush=True)


def read_and_hash(path):
    """(SHA-256 hex digest, the file's bytes) in one streaming read."""
    sha, chunks = hashlib.sha256(), []
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            sha.update(chunk)
            chunks.append(chunk)
    return sha.hexdigest(), b"".join(chunks)


def rehash(data, digest):
    """The extra: hash data REHASH_ROUNDS times in a tight loop; returns the last hex digest."""
    last = b""
    for _ in range(REHASH_ROUNDS):
        last = hashlib.sha256(data).digest()
    if last.hex() != digest:
        raise ValueError("re-hash disagrees with the streaming hash")
    return last.hex()


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


def put(sock, path, digest, length):
    """Send one PUT on sock, streaming path from byte 0; raise UploadError unless `OK digest`."""
    try:
        sock.sendall(f"PUT {digest} {length}\n".encode("ascii"))
        sent = 0
        with open(path, "rb") as f:
            while sent < length:
                chunk = f.read(min(CHUNK, length - sent))
                if not chunk:
                    raise UploadError(f"source shrank to {sent} bytes during the upload")
                sock.sendall(chunk)
                sent += len(chunk)
        answer = recv_line(sock)
    except OSError as e:  # reset, broken pipe, timeout
        raise UploadError(f"connection error during upload: {e}") from None
    if answer.lower() != f"ok {digest}".lower():
        raise UploadError(answer.removeprefix("REJECT ") if answer.startswith("REJECT ")
                          else f"unexpected answer {answer!r}")


def backup(host, port, path, digest, length):
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
                put(sock, path, digest, length)
                return False, attempt, None
            except UploadError as e:
                reason = str(e)
        return False, MAX_ATTEMPTS, f"upload failed after {MAX_ATTEMPTS} attempts: {reason}"
    finally:
        sock.close()


def main(argv):
    if len(argv) < 3 or not argv[1].isdigit():
        print("usage: rehash_client.py HOST PORT SOURCE [IGNORED...]", file=sys.stderr)
        return 2
    host, port, source = argv[0], int(argv[1]), argv[2]
    claim("started", source=source, variant="rehash")
    try:
        digest, data = read_and_hash(source)
    except OSError as e:
        claim("failed", reason=f"cannot read source: {e}")
        return 1

    try:
        digest = rehash(data, digest)
        claim("extra", mode="rehash", ok=True, error=None, rounds=REHASH_ROUNDS, bytes=len(data))
    except Exception as e:  # the extra step never aborts the backup
        claim("extra", mode="rehash", ok=False, error=str(e))

    has, attempts, reason = backup(host, port, source, digest, len(data))
    if has is False and reason is None:
        claim("uploaded", bytes=len(data), attempts=attempts)
    if reason is None:
        claim("completed")
    else:
        claim("failed", reason=reason)
    return 0 if reason is None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
