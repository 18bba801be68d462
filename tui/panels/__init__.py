"""The dashboard's panels: each takes its data as reactive attributes the app sets on its
refresh tick, and posts a message (tui.messages) when the user asks for something."""

from tui.panels.banner import Banner
from tui.panels.counters import CountersPanel
from tui.panels.filter import FilterBox
from tui.panels.load import LoadPanel
from tui.panels.panes import PanesPanel
from tui.panels.scenarios import ScenarioList
from tui.panels.status import StatusFacts, StatusLine
from tui.panels.verdicts import VerdictTable

__all__ = ["Banner", "CountersPanel", "FilterBox", "LoadPanel", "PanesPanel", "ScenarioList",
           "StatusFacts", "StatusLine", "VerdictTable"]
