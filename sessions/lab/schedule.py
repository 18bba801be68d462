"""A session of scenarios: opened once (one compiled collector, one warm server spawner), the
scenarios run in order, and always closed; or, with `jobs` > 1, run several at once on a pool
of labs (sessions/lab/pool.py), their pieces of stream published in the scenarios' order."""

import time
from pathlib import Path

from sessions.lab.attempts import AttemptOrder, AttemptPiece
from sessions.lab.pool import Pool
from sessions.lab.session import Options, Session, end_reason
from sessions.spec.client_spec import ClientSpec
from sessions.spec.scenario import Scenario
from sessions.stream.codec import from_json
from sessions.stream.events import GradeStarted, SessionEnded
from sessions.stream.stream import EventStream


def run_session(stream: EventStream, scenarios: list[Scenario], out_dir: Path,
                options: Options | None = None, grade: GradeStarted | None = None,
                jobs: int = 1, spec: ClientSpec | None = None) -> None:
    """Run the scenarios; always closes the session (SessionEnded says how it ended). With
    `grade`, the scenarios are the attempts of `evlab grade` and it says who is graded (and
    `spec` is that client, which several labs at once each resolve)."""
    if jobs > 1 and len(scenarios) > 1:
        return _at_once(stream, scenarios, out_dir, options or Options(), grade, jobs, spec)
    with Session(stream, out_dir, options).opened(scenarios, grade) as session:
        for scenario in scenarios:
            session.run_scenario(scenario)


def _at_once(stream: EventStream, scenarios: list[Scenario], out_dir: Path, options: Options,
             grade: GradeStarted | None, jobs: int, spec: ClientSpec | None) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)

    def publish(piece: AttemptPiece) -> None:
        for name, data in piece.files.items():   # pcaps and records, for the archive
            (out_dir / name).write_bytes(data)
        for line in piece.lines:
            stream.publish(from_json(line))

    bases = grade.scenarios if grade is not None else ()
    orders = [AttemptOrder("", spec if grade is not None else None, {}, s, bases)
              for s in scenarios]
    error, pool = None, None
    try:
        pool = Pool(options, min(jobs, len(scenarios)))
        pool.run(orders, publish)
    except BaseException as e:
        error = e
        if pool is not None and isinstance(e, KeyboardInterrupt):
            pool.cancel()
        raise
    finally:
        if pool is not None:
            pool.close()
        reason = end_reason(error)
        stream.publish(SessionEnded(time.monotonic_ns(), partial=reason != "complete",
                                    reason=reason))
