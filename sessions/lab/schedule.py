"""A session of scenarios: opened once (one compiled collector, one warm server spawner), the
scenarios run in order, and always closed. (State is kept per scenario and invocation, so
scenarios can later run at once; the collector's per-invocation bookkeeping is not yet safe
for that: see issue "Throughput".)"""

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
        for scenario in scenarios:
            session.run_scenario(scenario)
    except KeyboardInterrupt:
        reason = "interrupted"
        raise
    except BaseException as e:
        reason = f"error: {e or type(e).__name__}"
        raise
    finally:
        session.close(reason)
