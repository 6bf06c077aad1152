"""The registry refuses a trainer node that lists one URL twice or a GPU rank out of range with its own
``InvalidValue`` (a ``RegistryError``), not a database IntegrityError."""

from __future__ import annotations

import pytest

from servemetrics.registry import InvalidValue, Registry, RegistryError, TrainerNode, TrainerTarget


@pytest.fixture
def org(registry: Registry) -> None:
    registry.tenancy.ensure_organization("acme")


@pytest.mark.parametrize(
    ("node", "message"),
    [
        (
            TrainerNode(
                "n0",
                "leader",
                (),
                targets=(
                    TrainerTarget("http://127.0.0.1:9/m", "dcgm"),
                    TrainerTarget("http://127.0.0.1:9/m", "requests"),
                ),
            ),
            "node 'n0': target http://127.0.0.1:9/m is listed more than once; list each URL once, with the "
            "one kind it serves",
        ),
        (
            TrainerNode("n0", "leader", (0, 1024)),
            "node 'n0': gpu_ranks must be distinct integers from 0 to 1023",
        ),
        (
            TrainerNode("n0", "leader", (1, 1)),
            "node 'n0': gpu_ranks must be distinct integers from 0 to 1023",
        ),
    ],
)
def test_a_bad_node_is_a_registry_error(
    registry: Registry, org: None, node: TrainerNode, message: str
) -> None:
    with pytest.raises(InvalidValue) as err:
        registry.trainers.put_trainer_deployment("acme", "t1", "t1", [node])
    assert isinstance(err.value, RegistryError)
    assert str(err.value) == message
    assert registry.trainers.trainer_deployment("t1", None) is None
