#!/usr/bin/env python3
"""The honest client: three pings, a tenth of a second apart."""
import json
import socket
import sys
import time

with socket.create_connection((sys.argv[1], int(sys.argv[2]))) as s:
    answers = s.makefile("rb")
    for _ in range(3):
        s.sendall(b"PING\n")
        assert answers.readline() == b"PONG\n"
        time.sleep(0.1)
print(json.dumps({"claim": "completed"}))
