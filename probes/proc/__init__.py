"""What /proc says about the processes the lab runs: a process tree's CPU, memory and
descriptors (metrics.py), a network namespace's open TCP connections (sockets.py), and one
process's own stat and status entries (entries.py)."""
