#!/usr/bin/env python3
"""A fetch client written from fixture/fetch/protocol.md alone, on urllib.request: what a user
of evlab would hand it. Usage: fetch_client.py URL OUT"""

import json
import os
import sys
import time
import urllib.error
import urllib.request


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except FileNotFoundError:
        return ""


def put(path, text):
    with open(path + ".new", "w") as f:
        f.write(text)
    os.replace(path + ".new", path)


def main(url, out):
    part, part_tag, tag = out + ".part", out + ".part.etag", out + ".etag"
    for _ in range(3):
        headers = {}
        if os.path.exists(out) and read(tag):
            headers["If-None-Match"] = read(tag)
        held = os.path.getsize(part) if os.path.exists(part) else 0
        if held and read(part_tag):
            headers["Range"] = f"bytes={held}-"
            headers["If-Range"] = read(part_tag)
        try:
            resp = urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                          timeout=30)
        except urllib.error.HTTPError as e:
            if e.code == 304:
                return True
            if e.code == 503:
                time.sleep(int(e.headers.get("Retry-After", "1")))
                continue
            print(f"HTTP {e.code}", file=sys.stderr)
            return False
        except OSError as e:
            print(e, file=sys.stderr)
            continue
        with resp:
            etag = resp.headers.get("ETag", "")
            if resp.status == 200:
                put(part_tag, etag)
                mode = "wb"
            else:
                mode = "ab"
            try:
                with open(part, mode) as f:
                    while chunk := resp.read(1 << 16):
                        f.write(chunk)
            except OSError as e:   # reset mid-body: keep what arrived, ask for the rest
                print(e, file=sys.stderr)
                continue
        total = int(resp.headers.get("Content-Range", "/0").rsplit("/", 1)[1]) \
            if resp.status == 206 else int(resp.headers.get("Content-Length", "-1"))
        if os.path.getsize(part) != total:
            continue
        os.replace(part, out)
        put(tag, read(part_tag))
        os.unlink(part_tag)
        return True
    return False


if __name__ == "__main__":
    if main(sys.argv[1], sys.argv[2]):
        print(json.dumps({"claim": "completed"}))
        sys.exit(0)
    sys.exit(1)
