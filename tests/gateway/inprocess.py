"""The config of the gateway tests that run the real service in process with nothing routed
(``test_known_settings``, ``test_token_autoscaling``): organization acme with a PERSONAL key, model m1
with deployments d1 and d2 of one replica each at an address nothing listens on."""

from __future__ import annotations

from pathlib import Path

from servemetrics.config import Config, parse_config
from tests.apptools import org

REPLICA = {"id": "r1", "targets": ["http://127.0.0.1:9/metrics"]}


def two_deployments_config(tmp_path: Path) -> Config:
    """The parsed config, its ``data_dir`` under ``tmp_path``."""
    return parse_config(
        {
            "data_dir": str(tmp_path / "data"),
            "organizations": [org("acme", {"sm-service-key": "PERSONAL"})],
            "models": [
                {
                    "id": "m1",
                    "organization": "acme",
                    "deployments": [{"id": "d1", "replicas": [REPLICA]}, {"id": "d2", "replicas": [REPLICA]}],
                }
            ],
        }
    )
