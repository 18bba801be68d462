"""The noise kinds: names only, so the command line can offer them without loading a task."""

NOISE_KINDS = ("traffic", "twin", "churn", "cpu")
