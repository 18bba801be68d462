"""The dashboard's colours for statuses, and how it shows text it did not write. The words and
symbols are sessions.output.vocabulary's (the reports say the same); a colour is never the only
sign, every label has a symbol."""

from rich.text import Text

from sessions.output.escape import visible
from sessions.output.vocabulary import status_symbol, status_text

STYLE = {
    # clause and gate verdicts
    "pass": "green", "fail": "red", "inconclusive": "yellow", "not-applicable": "dim",
    # a scenario's place in the queue, its instrument check, a grading attempt's outcome
    "queued": "dim", "running": "bold cyan", "detected": "green", "missed": "bold red",
    "invalid": "magenta", "success": "green", "failed": "bold red",
}


def plain(text: str, style: str = "") -> Text:
    """Text that may hold a client's (a reason naming its files, a process name): a Rich Text,
    never parsed as markup, its control characters shown as escapes (sessions/output/escape.py).
    Every string the dashboard did not write itself goes in as one of these."""
    return Text(visible(text), style=style)


def status_label(status: str, symbol_only: bool = False) -> Text:
    """'✓ pass' in green; only '✓' where there is no room for the word."""
    return Text(status_symbol(status) if symbol_only else status_text(status),
                style=STYLE.get(status, ""))
