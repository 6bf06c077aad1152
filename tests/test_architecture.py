"""Imports point one way (DESIGN "Data flow"): no layer imports one above it."""

from __future__ import annotations

import ast

from tests.conftest import REPO_ROOT

PKG = REPO_ROOT / "servemetrics"
ALLOWED: dict[str, set[str]] = {
    "types": {"types"},
    "catalog": {"types", "catalog"},
    "selfmetrics": {"selfmetrics"},
    "ingest": {"types", "catalog", "ingest", "selfmetrics"},
    "store": {"types", "catalog", "ingest", "store"},
    "registry": {"types", "registry"},
    "query": {"types", "catalog", "store", "query"},
    "gateway": {"types", "catalog", "registry", "gateway"},
}
"""Layer -> the layers it may import. ``api``, ``cli``, ``config``, ``importer`` and ``demo`` sit on top."""


def _imports(path) -> set[str]:
    tree = ast.parse(path.read_text())
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("servemetrics."):
            out.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            out.update(a.name.split(".")[1] for a in node.names if a.name.startswith("servemetrics."))
    return out


def test_no_layer_imports_one_above_it():
    bad = []
    for path in PKG.rglob("*.py"):
        rel = path.relative_to(PKG)
        layer = rel.parts[0].removesuffix(".py")
        if layer not in ALLOWED:
            continue
        for target in _imports(path) - ALLOWED[layer]:
            bad.append(f"{rel} imports servemetrics.{target}")
    assert bad == []


def test_only_the_edges_read_the_config():
    readers = sorted(
        str(rel)
        for p in PKG.rglob("*.py")
        if "config" in _imports(p) and (rel := p.relative_to(PKG)).parts[0] != "config"
    )
    assert readers == ["api/app.py", "cli.py", "importer.py"]
