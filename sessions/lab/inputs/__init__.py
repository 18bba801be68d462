"""The deterministic inputs the lab writes for a task: its source file and its tree."""
