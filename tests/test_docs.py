"""Docs stay complete: the catalog page is current, every catalog metric and CLI command is documented."""

from __future__ import annotations

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


def test_every_cli_command_is_in_the_readme():
    readme = (REPO_ROOT / "README.md").read_text()
    names = [c.name or c.callback.__name__ for c in app.registered_commands]
    assert names == ["serve", "import", "demo", "version", "rules"]
    assert [n for n in names if f"servemetrics {n}" not in readme] == []


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
