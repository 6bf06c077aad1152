"""Docs stay complete: the catalog page is current, every catalog metric and CLI command is documented."""

from __future__ import annotations

import typer

from servemetrics.catalog import CATALOG
from servemetrics.catalog.render import markdown_table
from servemetrics.cli import app
from tests.conftest import REPO_ROOT


def test_catalog_page_is_current():
    page = (REPO_ROOT / "docs" / "catalog.md").read_text()
    assert markdown_table() in page, (
        "run: python -m servemetrics.catalog.render and paste into docs/catalog.md"
    )


def test_every_metric_is_in_the_catalog_page():
    page = (REPO_ROOT / "docs" / "catalog.md").read_text()
    missing = [name for name in CATALOG if f"`{name}`" not in page]
    assert missing == []


def _command_paths(group: typer.Typer, prefix: str) -> list[str]:
    """``servemetrics serve``, ``servemetrics model environment metrics`` …: every command of ``group``
    and of its sub-apps, as typed."""
    paths = [f"{prefix} {c.name or c.callback.__name__}" for c in group.registered_commands]
    for g in group.registered_groups:
        assert g.typer_instance is not None and g.name
        paths += _command_paths(g.typer_instance, f"{prefix} {g.name}")
    return paths


def test_every_cli_command_is_in_the_readme_and_the_cli_page():
    readme = (REPO_ROOT / "README.md").read_text()
    cli_page = (REPO_ROOT / "docs" / "cli.md").read_text()
    paths = _command_paths(app, "servemetrics")
    assert paths == [
        "servemetrics serve",
        "servemetrics import",
        "servemetrics demo",
        "servemetrics version",
        "servemetrics rules",
        "servemetrics events",
        "servemetrics model list",
        "servemetrics model environment list",
        "servemetrics model environment metrics",
        "servemetrics model deployment metrics",
        "servemetrics loops deployment metrics",
    ]
    assert [p for p in paths if p not in readme] == []
    assert [p for p in paths[5:] if p not in cli_page] == []


def test_query_semantics_page_covers_the_contract():
    page = (REPO_ROOT / "docs" / "query-semantics.md").read_text()
    for term in (
        "CURRENT",
        "SUMMARY",
        "SERIES",
        "7 days",
        "360",
        "promotion",
        "reset",
        "histogram_quantile",
        "null",
        "+Inf",
        "2xx",
    ):
        assert term in page, term
