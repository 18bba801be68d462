"""Judging: verdicts, lifecycle gates, risk findings and grade metrics, each a pure function of the
EvidenceBook. No lab, no observers, no fixture, no I/O (import-linter contracts in
pyproject.toml), so a replay or a re-grade judges exactly as the live run did."""
