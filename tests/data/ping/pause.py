#!/usr/bin/env python3
"""A client that makes the service refuse connections for 200 ms (its own PAUSE command)."""
import json
import socket
import sys
import time

with socket.create_connection((sys.argv[1], int(sys.argv[2]))) as s:
    time.sleep(0.1)
    s.sendall(b"PAUSE 200\n")
    assert s.makefile("rb").readline() == b"OK\n"
    time.sleep(0.1)
print(json.dumps({"claim": "completed"}))
