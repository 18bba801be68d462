"""evlab's command line: one parser (parser.py), read once (dispatch.py), the console entry
(entry.py). A user's mistake is one clear line and exit status 2, never a traceback.

Exit status of `run`: 0 the instrument judged every scenario as declared (all detected) — not
"every client did right"; 1 a scenario was missed; 3 nothing missed but evidence was missing
(inconclusive) or the session was cut short; 2 usage error; 130 interrupted.

The package itself imports nothing, so `entry.py` can read the command line before the rest
of evlab loads; `sessions.cli.main` (dispatch.main) is found here lazily for those who call it so.
"""


def __getattr__(name: str):
    if name == "main":
        from sessions.cli.dispatch import main
        return main
    raise AttributeError(name)
