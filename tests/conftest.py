"""Shared fixtures: paths to ``shared/`` (spec, fixtures, cases) and the spec's response validator."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

pytest_plugins = ["tests.conftest_pg"]

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED = REPO_ROOT.parent / "shared"
OPENAPI = SHARED / "spec" / "metrics-api.openapi.json"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """``shared/`` beside the repository (spec, fixtures, cases); fails loudly when it is missing."""
    if not OPENAPI.exists():
        pytest.fail(f"{SHARED} must hold spec/metrics-api.openapi.json (shared/ beside the repository)")
    return SHARED


PLATFORM_UNIT_HINTS = ("CELSIUS", "WATTS")
"""Unit hints we serve beyond the spec's ``ModelMetricUnitHintV1`` enum: the platform's SDK (PyPI
``baseten`` 0.13.1) has ``CELSIUS`` (GPU temperature, issue 14) and ``WATTS`` (GPU power, issue 16),
which the spec's enum predates."""


def schema_validator(schema_name: str) -> jsonschema.Draft202012Validator:
    """A validator for ``components.schemas[schema_name]`` of the spec's OpenAPI document, its unit hint
    enum widened by ``PLATFORM_UNIT_HINTS`` (every other schema as the spec has it)."""
    doc = json.loads(OPENAPI.read_text())
    doc["components"]["schemas"]["ModelMetricUnitHintV1"]["enum"] += PLATFORM_UNIT_HINTS
    schema = {"$ref": f"#/components/schemas/{schema_name}", "components": doc["components"]}
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="session")
def metrics_response_validator(shared_dir: Path) -> jsonschema.Draft202012Validator:
    """Validates a body against ``GetModelMetricsResponseV1``."""
    return schema_validator("GetModelMetricsResponseV1")
