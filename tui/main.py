"""The `evlab` console script.

`evlab` alone (and `make run`) opens the dashboard on the built-in suite; `evlab run ...`,
`evlab grade ...`, `evlab campaign FILE.toml` and `evlab replay ARCHIVE` without `--headless`
open it too. Everything else goes to sessions.cli, which never imports Textual, so headless
use costs nothing extra.
"""

import sys
from typing import TYPE_CHECKING

from sessions import cli
from sessions.cli.campaign import open_campaign, summary_line
from sessions.lab.session import Options
from sessions.output.archive import ArchiveError, load_archive
from sessions.spec.client_spec import ClientSpecError
from sessions.spec.scenario import GRADE_DIR, ScenarioError, load_dir

if TYPE_CHECKING:
    from tui.source import Source


def _say(text: str) -> None:
    try:
        print(f"evlab: {text}", file=sys.stderr, flush=True)
    except OSError:
        pass  # the terminal is gone (closed window): keep cleaning up regardless


def _dashboard(source: "Source") -> int:
    from tui.app import EvlabApp  # Textual is imported only here

    app = EvlabApp(source)
    try:
        app.run()
    finally:
        source.stop()  # whatever ended the app: quit, a crash, a closed terminal
        if source.mode in ("live", "campaign"):
            _say("stopping the lab (client, receiver, probes)…")
        if not source.wait_stopped():
            _say("the lab did not stop within its timeout")
    if app.return_code:
        return app.return_code
    return 0


def _campaign(args) -> int:
    """`evlab campaign FILE.toml` in the dashboard; on the way out, how far it got and how to
    continue it."""
    from tui.sources import CampaignSource
    campaign, _options, engine, journal, resumed = open_campaign(args)
    try:
        source = CampaignSource(campaign, engine, journal, resumed)
    except BaseException:
        engine.close()
        raise
    code = _dashboard(source)
    board = source.model.campaign_board()
    if board is None:
        _say(f"campaign {campaign.name} did not start; directory {journal.dir}")
        return code
    _say(summary_line(board, journal.dir).removeprefix("evlab: "))
    if board.progress.done < board.progress.total:
        _say(f"continue it with: evlab campaign {args.file} --dir {journal.dir} --resume")
    return code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = cli.build_parser().parse_args(argv)
    try:
        if getattr(args, "jobs", None) and args.jobs > 1 and not args.headless:
            raise cli.UsageError("--jobs runs headless only (add --headless): the dashboard "
                                 "runs one scenario at a time")
        if args.command is None:
            from tui.sources import LiveSource
            return _dashboard(LiveSource(cli.chosen_scenarios([], True), Options()))
        if args.command == "run" and not args.headless:
            from tui.sources import LiveSource
            scenarios = cli.chosen_scenarios(args.scenarios, args.all, args.suite)
            return _dashboard(LiveSource(scenarios, cli.options_of(args)))
        if args.command == "grade" and not args.headless:
            from tui.sources import LiveSource
            spec = cli.grade_spec(args)
            attempts = spec.attempt_scenarios(load_dir(GRADE_DIR))
            return _dashboard(LiveSource(attempts, cli.options_of(args, True, spec.sandbox),
                                         grade=cli.grade_started(spec, attempts)))
        if args.command == "campaign" and not args.headless:
            return _campaign(args)
        if args.command == "replay" and not args.headless:
            from tui.sources import ReplaySource
            loaded = load_archive(args.archive)
            return _dashboard(ReplaySource(loaded, args.archive, speed=args.speed or 1.0))
    except (cli.UsageError, ScenarioError, ArchiveError, ClientSpecError) as e:
        print(f"evlab: {e}", file=sys.stderr)
        return 2
    return cli.main(argv)


if __name__ == "__main__":
    sys.exit(main())
