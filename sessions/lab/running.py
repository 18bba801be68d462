"""What one scenario has running: torn down whatever happens."""

from dataclasses import dataclass, field
from pathlib import Path

from probes.packets import PacketCapture
from sessions.lab.injector import Injector
from sessions.lab.noise import Noise
from sessions.spec.scenario import Scenario


@dataclass
class Running:
    scenario: Scenario
    workdir: Path
    source: Path
    client_home: Path | None = None  # the client's own dir: its cwds and its source copy
    home: Path | None = None         # in it, what the client may see (a tmpfs when sandboxed)
    injector: Injector | None = None
    noise: Noise | None = None
    decoy: object = None
    capture: PacketCapture | None = None
    client: object = None
    started: bool = False    # ScenarioStarted published
    invocation: int = 0      # the invocation under way (1, 2)
    client_pid: int = 0      # the latest invocation's client, and its collector invocation id
    inv_id: int = 0
    tails: dict = field(default_factory=dict)
    open_connections: int = 0
    root_exited: bool = False            # the launched process has ended (kernel view)
    kernel_events: int = 0               # kernel events published for this invocation
    left_at_exit: list = field(default_factory=list)   # "pid comm" alive when it ended
