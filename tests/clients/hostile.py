#!/usr/bin/env python3
"""A hostile backup client: it tries to forge its verdict or harm the judge, one way per mode.

Usage: hostile.py MODE HOST PORT SOURCE [IGNORED...]

Each attempt is reported as a JSON claim line {"claim": "attempt", "mode": ..., ...}; then,
unless the mode says otherwise, it does an honest backup (the protocol of
fixture/backup/protocol.md, kept minimal) so that only the hostile step can change its grade.

  forge-store    look for the receiver's --store (every /proc/*/cmdline, evlab's temp dirs),
                 write the "backup" there, and claim success without speaking the protocol
  bpf-tamper     enumerate evlab's BPF maps by id (bpf(2)) to delete itself from them, then
                 spin 300 ms of its CPU and back up: a blinded observer would pass the spin
  signal-judge   SIGKILL every process it can see, SIGSTOP its parent, then back up
  ptrace-judge   PTRACE_ATTACH to every process it can see, then back up
  unshare        make a user and a network namespace (to fake the receiver), then back up
  fork-flood     fork 2,000 sleeping children, then back up and leave them running
  memory-hog     allocate 1 GiB, touching every page, then back up
  disk-fill      fill its working directory with a 1 GiB file, keep it, then back up
  event-flood    open and close files for 2 s of its CPU (tens of thousands of kernel events lost),
                 then back up
  zombie-leader  a setsid child whose main thread exits while another thread lives on and,
                 3 s later, tries to write; the client backs up and exits at once
"""

import ctypes
import glob
import hashlib
import json
import os
import signal
import socket
import sys
import threading
import time

libc = ctypes.CDLL(None, use_errno=True)


def claim(**fields) -> None:
    print(json.dumps(fields), flush=True)


def errno_name(result: int) -> str:
    return "ok" if result >= 0 else os.strerror(ctypes.get_errno())


def backup(host: str, port: int, source: str) -> bool:
    data = open(source, "rb").read()
    digest = hashlib.sha256(data).hexdigest()
    with socket.create_connection((host, port), timeout=20) as s:
        f = s.makefile("rb")
        s.sendall(f"CHECK {digest}\n".encode())
        if f.readline().strip() == b"HAVE":
            return True
        s.sendall(f"PUT {digest} {len(data)}\n".encode() + data)
        return f.readline().strip() == f"OK {digest}".encode()


def forge_store(source: str) -> None:
    found = []
    for cmdline in glob.glob("/proc/[0-9]*/cmdline"):
        try:
            words = open(cmdline, "rb").read().split(b"\0")
        except OSError:
            continue
        if b"--store" in words:
            found.append(words[words.index(b"--store") + 1].decode())
    found += glob.glob("/tmp/evlab-session-*/*/store")
    written = []
    for store in found:
        try:
            with open(os.path.join(store, "backup.bin"), "wb") as out:
                out.write(open(source, "rb").read())
            written.append(store)
        except OSError:
            pass
    claim(claim="attempt", mode="forge-store", stores_found=found, written=written)


def bpf_tamper() -> None:
    attr = ctypes.create_string_buffer(128)   # union bpf_attr: start_id = 0
    result = libc.syscall(321, 12, attr, 128)  # __NR_bpf, BPF_MAP_GET_NEXT_ID
    claim(claim="attempt", mode="bpf-tamper", bpf=errno_name(result))
    # 0.3 s of its own CPU, not of the clock: on a busy machine 0.3 s of the clock was half
    # that on the CPU, within cpu-budget (a fresh clone's suite, five workers)
    end = time.process_time() + 0.3
    while time.process_time() < end:
        pass


def visible_pids() -> list[int]:
    return [int(p) for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()]


def signal_judge() -> None:
    done = {}
    for pid in visible_pids():
        try:
            os.kill(pid, signal.SIGKILL)
            done[pid] = "killed"
        except OSError as e:
            done[pid] = e.strerror
    try:
        os.kill(os.getppid(), signal.SIGSTOP)
    except OSError:
        pass
    claim(claim="attempt", mode="signal-judge", pids=done)


def ptrace_judge() -> None:
    done = {pid: errno_name(libc.ptrace(16, pid, None, None)) for pid in visible_pids()}
    claim(claim="attempt", mode="ptrace-judge", pids=done)


def unshare() -> None:
    claim(claim="attempt", mode="unshare",
          user=errno_name(libc.unshare(0x10000000)), net=errno_name(libc.unshare(0x40000000)))


def fork_flood() -> None:
    made, error = 0, None
    for _ in range(2000):
        try:
            if os.fork() == 0:
                time.sleep(5)
                os._exit(0)
            made += 1
        except OSError as e:
            error = e.strerror
            break
    claim(claim="attempt", mode="fork-flood", children=made, error=error)


def memory_hog() -> None:
    block = bytearray(1 << 30)
    for i in range(0, len(block), 4096):
        block[i] = 1
    claim(claim="attempt", mode="memory-hog", allocated=len(block))


def disk_fill() -> None:
    written, error = 0, None
    chunk = b"\0" * (1 << 20)
    try:
        with open("filler.bin", "wb") as f:
            while written < 1 << 30:
                f.write(chunk)
                written += len(chunk)
    except OSError as e:
        error = e.strerror
    claim(claim="attempt", mode="disk-fill", written=written, error=error)


def event_flood() -> None:
    """2 s of its own CPU, however busy the machine: more than cpu-budget allows it at any pace
    up to the cap (~1.5 s at 3), and hundreds of thousands of events, far past what is kept."""
    end, n = time.process_time() + 2, 0
    while time.process_time() < end:
        for _ in range(100):
            os.close(os.open("/dev/null", os.O_RDONLY))
        n += 100
    claim(claim="attempt", mode="event-flood", opens=n)


def zombie_leader() -> None:
    if os.fork() == 0:
        os.setsid()

        def later():
            time.sleep(3)
            for path in glob.glob("/tmp/evlab-*/*.json") + ["late.txt"]:
                try:
                    open(path, "w").write('{"success": true}')
                except OSError:
                    pass

        threading.Thread(target=later).start()
        libc.syscall(60, 0)   # SYS_exit: only this (the main) thread ends
    claim(claim="attempt", mode="zombie-leader")


MODES = {"forge-store": None, "bpf-tamper": bpf_tamper, "signal-judge": signal_judge,
         "ptrace-judge": ptrace_judge, "unshare": unshare, "fork-flood": fork_flood,
         "memory-hog": memory_hog, "disk-fill": disk_fill, "event-flood": event_flood,
         "zombie-leader": zombie_leader}


def main() -> int:
    mode, host, port, source = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    if mode == "forge-store":
        forge_store(source)
        claim(claim="completed")
        return 0
    MODES[mode]()
    ok = backup(host, port, source)
    claim(claim="completed" if ok else "failed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
