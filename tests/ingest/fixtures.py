"""Paths to the real exposition fixtures in ``shared/`` beside the repository."""

from __future__ import annotations

from pathlib import Path

from servemetrics.ingest.exposition import ParseResult, parse_exposition

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT.parent / "shared" / "fixtures" / "exposition"
SCRAPE_MS = 1767225600000


def fixture_files() -> list[Path]:
    """Every ``.prom`` fixture file (sorted by name)."""
    return sorted(FIXTURES.glob("*.prom"))


def parse_fixture(name: str) -> ParseResult:
    """Parse one fixture file as a text-format scrape at ``SCRAPE_MS``."""
    return parse_exposition((FIXTURES / name).read_bytes(), "text/plain; version=0.0.4", SCRAPE_MS)


def value_of(samples, name: str, **labels: str) -> float:
    """The value of the one sample named ``name`` whose labels include ``labels``."""
    found = [s for s in samples if s.name == name and labels.items() <= dict(s.labels).items()]
    assert len(found) == 1, f"{len(found)} samples match {name} {labels}: {found}"
    return found[0].value
