"""The kernel collectors and their fallbacks: choosing one (choose.py: BCC, then strace, then
none), the strace fallback (strace.py), what every collector reports (records.py) and the
kinds a user may name (kinds.py, data only). The BCC collector itself is probes/bcc/."""
