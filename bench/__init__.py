"""evlab's benchmark: observer overhead, exactness under load, suite time, memory, dashboard cost.

Run with `make bench` or `.venv/bin/python -m bench`; see bench/__main__.py.
"""
