"""The dashboard as `evlab`'s front end: `evlab` alone (and `make run`) opens it on the built-in
suite; `evlab run ...`, `evlab grade ...`, `evlab campaign FILE.toml` and `evlab replay ARCHIVE`
without `--headless` open it too. The command line is read by sessions/cli (entry.py), which
finds this through the `evlab.front_ends` entry point, so headless use never imports Textual.
"""

import sys
from typing import TYPE_CHECKING

from sessions.cli.campaign import open_campaign
from sessions.cli.endings import summary_line
from sessions.cli.plan import plan_of
from sessions.output.archive import load_archive

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


def _campaign(args) -> int:
    """`evlab campaign FILE.toml` in the dashboard; on the way out, how far it got and how to
    continue it."""
    from tui.feeds import CampaignFeed
    campaign, _options, engine, journal, resumed = open_campaign(args)
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
        _say(f"continue it with: evlab campaign {args.file} --dir {journal.dir} --resume")
    return code


def dashboard(args) -> int:
    """The dashboard front end (registered as `evlab.front_ends: dashboard`): parsed arguments
    of bare `evlab`, or `run`, `grade`, `campaign`, `replay` without --headless."""
    if args.command == "campaign":
        return _campaign(args)
    if args.command == "replay":
        from tui.feeds import ReplayFeed
        loaded = load_archive(args.archive)
        return _dashboard(ReplayFeed(loaded, args.archive, speed=args.speed or 1.0))
    from tui.feeds import LiveFeed
    plan = plan_of(args)
    return _dashboard(LiveFeed(plan.scenarios, plan.options, grade=plan.grade))
