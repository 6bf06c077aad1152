"""The house stays small (issue 10, STYLE "small modules with one job"): no module over 500 lines, no
function over 50 lines, and the median function at most 10 lines, in ``servemetrics/``."""

from __future__ import annotations

import ast
import statistics

from tests.conftest import REPO_ROOT

PKG = REPO_ROOT / "servemetrics"
MAX_MODULE_LINES = 500
MAX_FUNCTION_LINES = 50
MAX_MEDIAN_FUNCTION_LINES = 10


def _functions() -> list[tuple[str, int]]:
    """``(path:line name, lines)`` of every function and method, lines from ``def`` to its last line."""
    out = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                assert node.end_lineno is not None
                where = f"{path.relative_to(REPO_ROOT)}:{node.lineno} {node.name}"
                out.append((where, node.end_lineno - node.lineno + 1))
    return out


def test_no_module_over_500_lines():
    long = {
        str(p.relative_to(REPO_ROOT)): n
        for p in PKG.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES
    }
    assert long == {}


def test_no_function_over_50_lines():
    assert [f"{where} ({n} lines)" for where, n in _functions() if n > MAX_FUNCTION_LINES] == []


def test_the_median_function_is_short():
    assert statistics.median(n for _, n in _functions()) <= MAX_MEDIAN_FUNCTION_LINES
