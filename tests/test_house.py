"""The house rules a maintainer can rely on: small modules and functions in the product code
(the import rules between layers are import-linter contracts, checked by `make test`)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PRODUCT = ("fixture", "probes", "sessions", "tui")
MODULE_MAX, FUNCTION_MAX = 400, 60


def _modules():
    return sorted(p for top in PRODUCT for p in (ROOT / top).rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_modules_and_functions_are_small(path):
    source = path.read_text()
    assert len(source.splitlines()) <= MODULE_MAX, f"{path.name}: over {MODULE_MAX} lines"
    long = [f"{node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
            and node.end_lineno - node.lineno + 1 > FUNCTION_MAX]
    assert not long, f"{path.name}: functions over {FUNCTION_MAX} lines: {', '.join(long)}"
