"""Campaigns (`evlab campaign`): many clients graded on the same scenarios, here or on a Ray
cluster, merged into one stream that is judged, reported and archived like any session.

jobs.py (one attempt to run, and how a node turns it into an order), journal.py (the campaign
directory: what finished, for --resume), local.py and ray_engine.py (where attempts run),
driver.py (the campaign's stream: plan, dispatch, merge), progress.py (done, running, queued).
"""
