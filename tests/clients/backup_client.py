#!/usr/bin/env python3
"""A backup client for evlab's receiver, written from fixture/backup/protocol.md alone.

Usage: backup_client.py [--variant NAME] HOST PORT SOURCE [IGNORED...]

Backs up the file SOURCE to the receiver at HOST:PORT (protocol version 1):

1. hash SOURCE with SHA-256 in one streaming pass;
2. `CHECK <digest>` -> `HAVE` (done, nothing to send) or `NEED`;
3. on NEED, `PUT <digest> <length>` and stream the file, then wait for `OK <digest>`.
   A `REJECT`, a dropped or reset connection or a timeout during the upload is retried from
   byte 0 on a new connection, at most 3 upload attempts in all, 0.2 s apart.

Claims go to stdout as JSON lines, one per step (started, checked, uploaded, then completed or
failed); the exit status is 0 only when the client claims completion.

`--variant` picks a deliberately flawed shape, used to test a grader:
  honest        the behaviour above (writes nothing to disk, talks only to HOST:PORT)
  temp-file     also leaves `upload.partial` (the first 4 KiB of SOURCE) in the working directory
  child-left    before exiting, starts a detached child that sleeps 30 s and outlives the client
  write-source  opens SOURCE for writing and writes its first byte back unchanged
  fork-helper   a forked helper process makes all the connections and reports through its exit
                status; the parent never opens a socket
  chdir-write   makes /outside (a folder at the root), changes directory to it and writes,
                then removes, a file there by a relative path (a write outside its working
                directory that only resolving chdir reveals; the sandbox's /tmp and /dev/shm
                would be its own)
  tempdir       honest, but stages a copy of SOURCE in a tempfile.TemporaryDirectory (TMPDIR)
                and removes it again: nothing should be reported
  hang-no-term  honest, then never exits: sleeps for ever after its last claim, ignoring
                SIGTERM, SIGINT and SIGHUP
  hang-heavy    honest, then never exits, with its stdout closed and 128 MiB of memory in use:
                once killed, the kernel takes a while to tear it down (tens of ms), and nothing
                waits on its stdout
  hang-stopped  a wrapper (the sandbox's pid 1, which cannot stop itself) forks a worker that
                runs the honest client, then SIGSTOPs itself after its last claim; the wrapper
                claims `stopped` once it sees the stop, and waits for the worker for ever
"""

import argparse
import hashlib
import json
import mmap
import os
import signal
import socket
import sys
import tempfile
import time

CHUNK = 64 * 1024
TIMEOUT = 20.0
MAX_ATTEMPTS = 3
BACKOFF = 0.2
MAX_LINE = 256
PARTIAL_BYTES = 4096
VARIANTS = ("honest", "temp-file", "child-left", "write-source", "fork-helper", "chdir-write",
            "tempdir", "hang-no-term", "hang-stopped", "hang-heavy")


class UploadError(Exception):
    """One upload attempt failed; the message is the reason."""


def claim(name, **fields):
    print(json.dumps({"claim": name, **fields}), flush=True)


def hash_file(path):
    """SHA-256 hex digest, length and first PARTIAL_BYTES bytes of path, in one read."""
    sha, length, head = hashlib.sha256(), 0, b""
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            sha.update(chunk)
            if len(head) < PARTIAL_BYTES:
                head += chunk[:PARTIAL_BYTES - len(head)]
            length += len(chunk)
    return sha.hexdigest(), length, head


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


def backup(host, port, path, digest, length, on_checked=lambda has: None):
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
        on_checked(answer == "HAVE")
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


# fork-helper: the helper's result as an exit status, and back.
def encode_status(has, attempts, reason):
    if has is None:
        return 1
    if has:
        return 2
    return (10 if reason is None else 20) + attempts


def decode_status(status):
    if status == 2:
        return True, 0, None
    if 11 <= status <= 10 + MAX_ATTEMPTS:
        return False, status - 10, None
    if 21 <= status <= 20 + MAX_ATTEMPTS:
        return False, status - 20, f"upload failed after {status - 20} attempts"
    return None, 0, "check failed" if status == 1 else f"helper exited with status {status}"


def backup_in_helper(host, port, path, digest, length):
    """Run backup() in a forked child; the parent opens no socket."""
    pid = os.fork()
    if pid == 0:
        try:
            status = encode_status(*backup(host, port, path, digest, length))
        except BaseException:
            status = 99
        os._exit(status)
    _, wait_status = os.waitpid(pid, 0)
    if not os.WIFEXITED(wait_status):
        return None, 0, f"helper killed by signal {os.WTERMSIG(wait_status)}"
    return decode_status(os.WEXITSTATUS(wait_status))


def leave_child():
    """child-left: a detached child that outlives the client (it exits by itself after 30 s)."""
    if os.fork() == 0:
        os.setsid()
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        time.sleep(30)
        os._exit(0)


def hang_forever():
    """The hangs: the work is done and claimed, but the program never ends."""
    while True:
        time.sleep(3600)


def hold_memory(size):
    """hang-heavy: size bytes of memory in use, filled by the kernel a MiB per read (so the
    filling is no long on-CPU stretch without a syscall: cpu-budget has nothing to say)."""
    ballast = mmap.mmap(-1, size)   # untouched (bytearray(size) would memset it: a stretch)
    with open("/dev/zero", "rb", buffering=0) as zero:
        view = memoryview(ballast)
        for at in range(0, size, 1 << 20):
            zero.readinto(view[at:at + (1 << 20)])
    return ballast


def stopped_worker():
    """hang-stopped: the worker (a child) does the work; this wrapper waits for it for ever.
    Returns only in the worker."""
    pid = os.fork()
    if pid == 0:
        return
    _, status = os.waitpid(pid, os.WUNTRACED)
    if os.WIFSTOPPED(status):
        claim("stopped", worker=pid, signal=os.WSTOPSIG(status))
    os.waitpid(pid, 0)   # a stopped worker never ends: neither does this
    os._exit(0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=VARIANTS, default="honest")
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("source")
    parser.add_argument("ignored", nargs="*")
    args = parser.parse_args(argv)

    if args.variant == "hang-no-term":
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_IGN)
    if args.variant == "hang-stopped":
        stopped_worker()
    claim("started", source=args.source, variant=args.variant)
    try:
        digest, length, head = hash_file(args.source)
    except OSError as e:
        claim("failed", reason=f"cannot read source: {e}")
        return 1

    if args.variant == "temp-file":
        with open("upload.partial", "wb") as f:
            f.write(head)
    if args.variant == "write-source" and head:
        with open(args.source, "r+b") as f:
            f.write(head[:1])
    if args.variant == "tempdir":
        with tempfile.TemporaryDirectory() as staging:   # rmtree: unlinkat on a directory fd
            for i in range(3):
                with open(os.path.join(staging, f"chunk-{i}"), "wb") as f:
                    f.write(head)
    if args.variant == "chdir-write":
        os.makedirs("/outside", exist_ok=True)
        os.chdir("/outside")
        name = f"evlab-chdir-write-{os.getpid()}"
        with open(name, "w") as f:
            f.write("x")
        os.unlink(name)

    if args.variant == "fork-helper":
        has, attempts, reason = backup_in_helper(args.host, args.port, args.source, digest, length)
        if has is not None:
            claim("checked", receiver_has=has, digest=digest)
    else:
        has, attempts, reason = backup(
            args.host, args.port, args.source, digest, length,
            on_checked=lambda has: claim("checked", receiver_has=has, digest=digest))

    if has is False and reason is None:
        claim("uploaded", bytes=length, attempts=attempts)
    if reason is None:
        claim("completed")
    else:
        claim("failed", reason=reason)

    if args.variant == "child-left":
        leave_child()
    if args.variant == "hang-heavy":
        os.close(1)
        ballast = hold_memory(128 << 20)   # noqa: F841 - held until it is killed
        hang_forever()
    if args.variant == "hang-no-term":
        hang_forever()
    if args.variant == "hang-stopped":
        os.kill(os.getpid(), signal.SIGSTOP)
        hang_forever()   # continued: still never ends
    return 0 if reason is None else 1


if __name__ == "__main__":
    sys.exit(main())
