"""One attempt of a campaign as it travels to a node, and what the node makes of it.

A Job names the client by its shipped command (sessions/spec/campaign.py): on a node the files
are laid out under a root of the node's own, the client is resolved there (so the sha256 in its
GradeStarted is of what that node runs) and the attempt is the same Scenario `evlab grade` runs.
"""

from dataclasses import dataclass, replace
from pathlib import Path

from sessions.lab.attempts import AttemptOrder
from sessions.spec.campaign import Campaign, CampaignClient, attempt_id, client_attempt
from sessions.spec.client_spec import build
from sessions.spec.scenario import Scenario


@dataclass(frozen=True)
class Job:
    client: str
    tokens: tuple[str, ...]         # the command, its files by shipped name
    env: dict[str, str]
    timeout_s: float | None
    attempts: int
    shipped: tuple[str, ...]        # the shipped names
    template: Scenario
    attempt: int
    run: int = 1                    # 2, 3...: run again after the engine lost it
    task: str = ""                  # the client's task: a built-in id or a folder

    @property
    def id(self) -> str:
        return attempt_id(self.client, self.template.id, self.attempt)

    def again(self) -> "Job":
        return replace(self, run=self.run + 1)

    def order(self, root: Path) -> AttemptOrder:
        """Resolve the client under root, where its shipped files are (may raise
        ClientSpecError: a file missing there)."""
        spec = build(list(self.tokens), root, self.env, self.timeout_s, self.attempts,
                     task=self.task)
        return AttemptOrder(self.client, spec, {n: root / n for n in self.shipped},
                            client_attempt(spec, self.template, self.attempt, self.client))


def job_of(client: CampaignClient, template: Scenario, attempt: int, run: int = 1) -> Job:
    user_env = dict(client.spec.env)
    return Job(client.name, client.tokens, user_env, client.spec.timeout_s,
               client.spec.attempts, tuple(client.ship), template, attempt, run, client.task)


def plan(campaign: Campaign) -> list[Job]:
    """Every attempt, client by client (a local campaign grades one client, then the next)."""
    return [job_of(c, t, k) for c in campaign.clients for t in c.scenarios
            for k in range(1, campaign.attempts + 1)]
