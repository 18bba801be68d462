"""A session of scenarios: opened once (one compiled collector, one warm server spawner), the
scenarios run in order or several at once, and always closed."""

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from sessions.lab.runner import Options, Session
from sessions.spec.scenario import Scenario
from sessions.stream.events import GradeStarted
from sessions.stream.stream import EventStream


def run_session(stream: EventStream, scenarios: list[Scenario], out_dir: Path,
                options: Options | None = None, grade: GradeStarted | None = None) -> None:
    """Run the scenarios in order; always closes the session (SessionEnded says how it ended).
    With `grade`, the scenarios are the attempts of `evlab grade` and it says who is graded."""
    session = Session(stream, out_dir, options)
    reason = "complete"
    try:
        session.open(scenarios)
        if grade is not None:
            stream.publish(grade)
        if session.options.jobs > 1:
            _run_at_once(session, scenarios, session.options.jobs)
        else:
            for scenario in scenarios:
                session.run_scenario(scenario)
    except KeyboardInterrupt:
        reason = "interrupted"
        raise
    except BaseException as e:
        reason = f"error: {e}"
        raise
    finally:
        session.close(reason)


def _run_at_once(session: Session, scenarios: list[Scenario], jobs: int) -> None:
    """Up to `jobs` scenarios at once, each on a thread of its own; the first failure (or an
    interrupt in the main thread) cancels the rest, which tear down as on Ctrl-C."""
    pool = ThreadPoolExecutor(jobs, thread_name_prefix="evlab-scenario")
    futures = [pool.submit(session.run_scenario, s) for s in scenarios]
    try:
        for future in futures:
            future.result()
    except BaseException:
        session.cancel.set()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
