"""The built-in suites and the noise kinds: names and places only, so the command line can
offer them without loading a scenario."""

from pathlib import Path

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "scenarios"
FAULTS_DIR = BUILTIN_DIR / "faults"                    # the client under injected faults
GRADE_DIR = BUILTIN_DIR / "grade"                      # what `evlab grade` runs any client through
SUITES = {"seeded": BUILTIN_DIR, "faults": FAULTS_DIR, "grade": GRADE_DIR}
NOISE_KINDS = ("traffic", "twin", "churn", "cpu")
