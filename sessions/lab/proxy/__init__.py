"""The lab's fault proxy: it stands between a client and a server and breaks the wire as a
scenario declares (server.py runs it, relay.py moves the bytes, rules.py arms the faults)."""
