"""docs/architecture.md names only what exists: every module path and every code name it puts in
backticks is found in ``servemetrics/`` (so a rename that forgets the page fails here)."""

from __future__ import annotations

import ast
import re

from tests.conftest import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "architecture.md"
PKG = REPO_ROOT / "servemetrics"
WORDS = {"up", "head", "le", "_created", "prometheus_client"}
"""Backticked words of the page that are series, table, label or suffix names or a library, not our code."""


def _defined_names() -> set[str]:
    """Every module, package, def, class, assigned name and ``self.x`` attribute of the package."""
    names = {p.stem for p in PKG.rglob("*.py")} | {p.name for p in PKG.rglob("*") if p.is_dir()}
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Name | ast.arg):
                names.add(node.id if isinstance(node, ast.Name) else node.arg)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                names.add(node.target.id)
    return names


def _backticked() -> list[str]:
    return re.findall(r"`([^`\s]+)`", PAGE.read_text())


def test_every_module_path_on_the_page_exists():
    files = {str(p.relative_to(PKG)) for p in PKG.rglob("*.py")} | {
        str(p.relative_to(PKG)) + "/" for p in PKG.rglob("*") if p.is_dir()
    }
    paths = [t for t in _backticked() if t.endswith((".py", "/")) and "(" not in t]
    missing = [
        p
        for p in paths
        if not (REPO_ROOT / p).exists() and not any(f == p or f.endswith("/" + p) for f in files)
    ]
    assert missing == []


def test_every_code_name_on_the_page_exists():
    names = _defined_names()
    tokens = [t for t in _backticked() if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", t)]
    parts = {part for t in tokens if not t.endswith(".py") for part in t.split(".")}
    assert sorted(parts - names - WORDS) == []
