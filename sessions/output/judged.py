"""A session's stream as every front end wires it (headless, the dashboard, a replay, a
campaign's driver): its evidence book first, the verdict engine, then the front end's own
consumers."""

from sessions.judging.judge import VerdictEngine
from sessions.spec.contract import Contract
from sessions.stream.evidence import EvidenceBook
from sessions.stream.stream import Consumer, EventStream


class JudgedStream(EventStream):
    """The book's one owner: it is fed first, so every consumer after it reads a book that has
    seen the event; the verdict engine judges from it. A reader on another thread holds
    `hold()` to see the book between two events."""

    def __init__(self, *consumers: Consumer, book: EvidenceBook | None = None,
                 contracts: dict[str, Contract] | None = None):
        """contracts: an archive's copies of its tasks' contracts, by the task's digest (a
        replay judges by them, not by the task folder as it is now)."""
        self.book = book if book is not None else EvidenceBook()
        super().__init__([self.book, VerdictEngine(self.book, recorded=contracts), *consumers])
