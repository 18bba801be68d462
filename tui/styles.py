"""The dashboard's colours for statuses. The words and symbols are sessions.output.vocabulary's
(the reports say the same); a colour is never the only sign, every label has a symbol."""

from rich.text import Text

from sessions.output.vocabulary import status_symbol, status_text

STYLE = {
    # clause and gate verdicts
    "pass": "green", "fail": "red", "inconclusive": "yellow", "not-applicable": "dim",
    # a scenario's place in the queue, its instrument check, a grading attempt's outcome
    "queued": "dim", "running": "bold cyan", "detected": "green", "missed": "bold red",
    "invalid": "magenta", "success": "green", "failed": "bold red",
}


def status_label(status: str, symbol_only: bool = False) -> Text:
    """'✓ pass' in green; only '✓' where there is no room for the word."""
    return Text(status_symbol(status) if symbol_only else status_text(status),
                style=STYLE.get(status, ""))
