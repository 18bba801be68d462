"""evlab as a library: grade a program, run a task's scenarios or a campaign, and get back what
was judged (sessions/cli/api.py; docs/api.md).

    import evlab
    result = evlab.grade("python3 my_client.py {host} {port} {source}", attempts=1)
    print(result.summary, result.success_rate)

`evlab.task` is what a task folder imports (docs/tasks.md); `evlab.scorer` is the Inspect AI
scorer (the `inspect` extra). The API is loaded on first use: a task's server importing
`evlab.task` does not pay for the whole lab.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sessions.cli.api import EvlabError, Result, Verdict, campaign, grade, run

__all__ = ["EvlabError", "Result", "Verdict", "campaign", "grade", "run"]


def __getattr__(name: str):
    if name in __all__:
        from sessions.cli import api
        return getattr(api, name)
    raise AttributeError(f"module 'evlab' has no attribute {name!r}")
