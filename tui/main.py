"""The dashboard as `evlab`'s front end: `evlab` alone (and `make run`) opens it on the built-in
suite; `evlab run ...`, `evlab grade ...`, `evlab campaign FILE.toml` and `evlab replay ARCHIVE`
without `--headless` open it too. The command line is read by sessions/cli (entry.py), which
finds this through the `evlab.front_ends` entry point, so headless use never imports Textual;
it hands over the request (sessions/spec/request.py), and nothing here reads the command line.
"""

import sys
from typing import TYPE_CHECKING

from sessions.campaign.opening import open_campaign
from sessions.lab.plan import plan_of
from sessions.output.archive import load_archive
from sessions.output.endings import summary_line
from sessions.spec.request import CampaignRequest, ReplayRequest, Request

if TYPE_CHECKING:
    from tui.feed import Feed


def _say(text: str) -> None:
    try:
        print(f"evlab: {text}", file=sys.stderr, flush=True)
    except OSError:
        pass  # the terminal is gone (closed window): keep cleaning up regardless


def _dashboard(feed: "Feed") -> int:
    from tui.app import EvlabApp  # Textual is imported only here

    app = EvlabApp(feed)
    try:
        app.run()
    finally:
        feed.stop()  # whatever ended the app: quit, a crash, a closed terminal
        if feed.mode in ("live", "campaign"):
            _say("stopping the lab (client, servers, probes)…")
        if not feed.wait_stopped():
            _say("the lab did not stop within its timeout")
    if app.return_code:
        return app.return_code
    return 0


def _campaign(request: CampaignRequest) -> int:
    """`evlab campaign FILE.toml` in the dashboard; on the way out, how far it got and how to
    continue it."""
    from tui.feeds import CampaignFeed
    campaign, _options, engine, journal, resumed = open_campaign(request)
    try:
        feed = CampaignFeed(campaign, engine, journal, resumed)
    except BaseException:
        engine.close()
        raise
    code = _dashboard(feed)
    board = feed.model.campaign_board()
    if board is None:
        _say(f"campaign {campaign.name} did not start; directory {journal.dir}")
        return code
    _say(summary_line(board, journal.dir).removeprefix("evlab: "))
    if board.progress.done < board.progress.total:
        _say(f"continue it with: evlab campaign {request.file} --dir {journal.dir} --resume")
    return code


def dashboard(request: Request) -> int:
    """The dashboard front end (registered as `evlab.front_ends: dashboard`): the request of
    bare `evlab`, or of `run`, `grade`, `campaign`, `replay` without --headless."""
    if isinstance(request, CampaignRequest):
        return _campaign(request)
    if isinstance(request, ReplayRequest):
        from tui.feeds import ReplayFeed
        loaded = load_archive(request.archive)
        return _dashboard(ReplayFeed(loaded, request.archive, speed=request.speed or 1.0))
    from tui.feeds import LiveFeed
    plan = plan_of(request)
    return _dashboard(LiveFeed(plan.scenarios, plan.options, grade=plan.grade))
