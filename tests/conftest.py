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


def schema_validator(schema_name: str) -> jsonschema.Draft202012Validator:
    """A validator for ``components.schemas[schema_name]`` of the spec's OpenAPI document."""
    doc = json.loads(OPENAPI.read_text())
    schema = {"$ref": f"#/components/schemas/{schema_name}", "components": doc["components"]}
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="session")
def metrics_response_validator(shared_dir: Path) -> jsonschema.Draft202012Validator:
    """Validates a body against ``GetModelMetricsResponseV1``."""
    return schema_validator("GetModelMetricsResponseV1")
