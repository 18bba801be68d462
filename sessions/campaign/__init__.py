"""Campaigns (`evlab campaign`): many clients graded on the same scenarios, here or on a Ray
cluster, merged into one stream that is judged, reported and archived like any session.

jobs.py (one attempt to run, and how a node turns it into an order), shipping.py (a client's
files as bytes, laid out on a node), node.py (one node's lab), local.py and ray_engine.py
(where attempts run), journal.py (the campaign directory: what finished, for --resume),
driver.py (the campaign's stream: plan, dispatch, merge). Progress and the leaderboard are
projections of the book: sessions/output/leaderboard.py.
"""
