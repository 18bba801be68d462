"""A long-lived lab for an interactive front end: one Session on one thread, so the BPF program
is compiled once however many runs are asked for; runs are queued and executed in order.

    lab = Lab(stream, out_dir, options, known_scenarios)
    threading.Thread(target=lab.serve).start()   # or a Textual thread worker
    lab.submit([scenario, ...])                   # from any thread
    lab.close()                                   # stops the current run; serve() tears down
"""

import queue
from pathlib import Path

from sessions.lab.session import Cancelled, Options, Session
from sessions.spec.scenario import Scenario
from sessions.stream.events import GradeStarted
from sessions.stream.stream import EventStream


class Lab:
    def __init__(self, stream: EventStream, out_dir: Path, options: Options,
                 known: list[Scenario], grade: GradeStarted | None = None):
        self.session = Session(stream, out_dir, options)
        self.known = known
        self.grade = grade  # `evlab grade`: published once the session is open
        self.error: BaseException | None = None
        self._jobs: queue.Queue[list[Scenario] | None] = queue.Queue()
        self._closing = False

    def submit(self, scenarios: list[Scenario]) -> None:
        if not self._closing:
            self._jobs.put(list(scenarios))

    def pending(self) -> int:
        return self._jobs.qsize()

    def close(self) -> None:
        self._closing = True
        self.session.cancel.set()
        self._jobs.put(None)

    def serve(self) -> None:
        """Open the session, run queued jobs until close(); always tears the session down."""
        try:
            with self.session.opened(self.known, self.grade) as session:
                while (job := self._jobs.get()) is not None:
                    for scenario in job:
                        if self._closing:
                            break
                        session.run_scenario(scenario)
        except Cancelled:
            pass   # the dashboard quit: SessionEnded says interrupted
        except BaseException as e:  # shown by the front end; never a silent stop
            self.error = e
