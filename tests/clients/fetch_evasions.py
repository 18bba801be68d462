#!/usr/bin/env python3
"""Downloads that try to get a clause of fetch's contract past evlab. Each mode is one way to do
the forbidden thing; tests/test_fetch.py says which clause must catch it.

    fetch_evasions.py MODE URL OUT

  hardlink           writes OUT.part, with OUT a hard link to it from the first byte
  symlink            OUT a symbolic link to OUT.part while it is written, then renamed over
  mmap               OUT opened, sized (ftruncate) and filled through a shared mapping
  rename-then-write  OUT.part renamed to OUT first, the bytes written through its descriptor
  copy-range         OUT.part written, then copied into OUT with copy_file_range
  spin-wait          waits out a 503's Retry-After by spinning (that long on the CPU)
  odd-path           asks for //data.bin, which nginx serves as /data.bin, so that a fault
                     bound to the file's GET passes by
"""

import http.client
import json
import mmap
import os
import sys
import time
import urllib.parse


def fetch(url):
    """(status, headers, body) of one GET; a 503 is waited out by spinning (spin-wait) or
    sleeping."""
    u = urllib.parse.urlsplit(url)
    for _ in range(3):
        conn = http.client.HTTPConnection(u.hostname, u.port, timeout=20)
        conn.request("GET", "/" + u.path if MODE == "odd-path" else u.path)
        resp = conn.getresponse()
        body = resp.read()
        conn.close()
        if resp.status != 503:
            return resp, body
        wait = int(resp.getheader("Retry-After", "1"))
        if MODE == "spin-wait":   # `wait` s of its CPU: as much waste however busy the machine
            end = time.process_time() + wait
            while time.process_time() < end:
                pass
        else:
            time.sleep(wait)
    raise SystemExit(1)


MODE, URL, OUT = sys.argv[1:4]
PART = OUT + ".part"
resp, body = fetch(URL)
if os.path.exists(OUT) and MODE not in ("spin-wait", "odd-path"):
    os.unlink(OUT)
half = len(body) // 2
if MODE == "hardlink":
    with open(PART, "wb") as f:
        os.link(PART, OUT)
        f.write(body[:half])
        f.flush()
        time.sleep(0.2)
        f.write(body[half:])
    os.unlink(PART)
elif MODE == "symlink":
    with open(PART, "wb") as f:
        os.symlink(os.path.basename(PART), OUT)
        f.write(body[:half])
        f.flush()
        time.sleep(0.2)
        f.write(body[half:])
    os.replace(PART, OUT)
elif MODE == "mmap":
    fd = os.open(OUT, os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(fd, len(body))
    with mmap.mmap(fd, len(body)) as m:
        m[:] = body
    os.close(fd)
elif MODE == "rename-then-write":
    with open(PART, "wb") as f:
        os.replace(PART, OUT)
        f.write(body)
elif MODE == "copy-range":
    with open(PART, "wb") as f:
        f.write(body)
    src, dst = os.open(PART, os.O_RDONLY), os.open(OUT, os.O_WRONLY | os.O_CREAT, 0o644)
    while os.copy_file_range(src, dst, 1 << 20):
        pass
    os.close(src)
    os.close(dst)
    os.unlink(PART)
else:   # spin-wait, odd-path: the download itself is honest
    with open(PART, "wb") as f:
        f.write(body)
    os.replace(PART, OUT)
print(json.dumps({"claim": "completed"}))
