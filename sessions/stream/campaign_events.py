"""The events of a campaign (`evlab campaign`): what was asked, where each attempt ran, and the
attempts the engine lost. An attempt's own evidence is the ordinary stream of a grade attempt
(sessions/stream/events.py), published when the attempt comes back from where it ran."""

from dataclasses import dataclass

from sessions.stream.events import Event


@dataclass(frozen=True)
class CampaignStarted(Event):
    """Who is compared, on what, and the identity each client must have where it runs."""

    name: str
    engine: str                     # "local", or "ray ADDRESS"
    clients: dict                   # name -> {"command", "sha256", "files", "shipped"}
    scenarios: tuple[str, ...]      # grade scenario ids
    attempts: int                   # per client and scenario
    retries: int                    # how often an attempt the engine lost is run again
    wall_ns: int


@dataclass(frozen=True)
class AttemptDispatched(Event):
    """An attempt handed to a node (its `run`: 1, then 2... after the engine lost one)."""

    client: str
    scenario: str                   # the attempt's id, e.g. alice:normal@2
    base: str
    attempt: int
    run: int
    node: str


@dataclass(frozen=True)
class AttemptLost(Event):
    """The engine, not the client, ended an attempt: invalid, never the client's doing."""

    client: str
    scenario: str
    base: str
    attempt: int
    run: int
    node: str
    reason: str                     # "node lost: ...", "node error: ...", "no evlab node left
                                    # in the cluster", "the node's record is unusable: ..."
    retried: bool                   # run again (within the campaign's retries), or given up
