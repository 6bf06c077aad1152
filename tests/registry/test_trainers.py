"""Trainer (Loops) deployments in the registry and in the YAML config: nodes, targets, sampler link,
validation, idempotent apply, the scrape targets they add (SQLite and, marked, PostgreSQL)."""

from __future__ import annotations

import pytest
import yaml

from servemetrics.config import ConfigError, apply_config, parse_config
from servemetrics.registry import (
    Conflict,
    InvalidValue,
    NotFound,
    Registry,
    TrainerNode,
    TrainerTarget,
    TrainerTargetInfo,
)
from servemetrics.registry.migrations import MIGRATIONS

DCGM = TrainerTarget("http://10.0.0.1:9400/metrics", "dcgm")
REQS = TrainerTarget("http://10.0.0.1:9091/metrics", "requests")
NODES = [
    TrainerNode("w1", "worker", (0, 1), targets=(TrainerTarget("http://10.0.0.2:9400/metrics", "dcgm"),)),
    TrainerNode("l0", "leader", (0, 1), "trainer-0", "loops", (DCGM, REQS)),
]


@pytest.fixture
def org(registry: Registry) -> int:
    org_id = registry.tenancy.ensure_organization("acme")
    registry.tenancy.ensure_organization("other")
    registry.tenancy.ensure_model("m1", "sampler", "acme")
    registry.deployments.create_deployment("m1", "d1", "v1")
    return org_id


def test_put_and_read_back_with_the_leader_first(registry: Registry, org: int, clock) -> None:
    clock.now_ms = 5_000
    info = registry.trainers.put_trainer_deployment(
        "acme", "t1", "trainer", NODES, sampler_model_id="m1", sampler_deployment_id="d1"
    )
    assert (info.id, info.name, info.organization_id, info.created_at_ms) == ("t1", "trainer", org, 5_000)
    assert (info.sampler_model_id, info.sampler_deployment_id) == ("m1", "d1")
    assert [n.node_id for n in info.nodes] == ["l0", "w1"] and info.leader == NODES[1]
    assert registry.trainers.trainer_deployment("t1", org) == info
    assert registry.trainers.trainer_deployment("t1", None) == info
    assert registry.trainers.trainer_deployment("t1", org + 1) is None  # another organization's: invisible
    assert registry.trainers.list_trainer_deployments(org) == [info]
    assert registry.trainers.list_trainer_deployments(org, "m1") == [info]
    assert registry.trainers.list_trainer_deployments(org, "m2") == []


def test_replacing_nodes_and_the_scrape_targets(registry: Registry, org: int) -> None:
    registry.trainers.put_trainer_deployment("acme", "t1", "trainer", NODES)
    assert registry.trainers.list_trainer_targets() == [
        TrainerTargetInfo("http://10.0.0.2:9400/metrics", "dcgm", "t1", "w1", "worker"),  # declared order
        TrainerTargetInfo(DCGM.url, "dcgm", "t1", "l0", "leader"),
        TrainerTargetInfo(REQS.url, "requests", "t1", "l0", "leader"),
    ]
    info = registry.trainers.put_trainer_deployment("acme", "t1", "renamed", [NODES[1]])
    assert info.name == "renamed" and [n.node_id for n in info.nodes] == ["l0"]
    assert [t.node_id for t in registry.trainers.list_trainer_targets()] == ["l0", "l0"]
    registry.trainers.delete_trainer_deployment("t1")
    assert (
        registry.trainers.trainer_deployment("t1", None) is None
        and registry.trainers.list_trainer_targets() == []
    )
    with pytest.raises(NotFound):
        registry.trainers.delete_trainer_deployment("t1")


@pytest.mark.parametrize(
    ("nodes", "error", "message"),
    [
        ([], InvalidValue, "one or more nodes"),
        ([NODES[0]], InvalidValue, "has 0 leader nodes"),
        ([NODES[1], TrainerNode("l1", "leader")], InvalidValue, "has 2 leader nodes"),
        ([NODES[1], NODES[1]], InvalidValue, "distinct ids"),
        ([TrainerNode("x", "boss")], InvalidValue, "role must be leader or worker"),
        ([TrainerNode("x", "leader", (0, 0))], InvalidValue, "gpu_ranks must be distinct"),
        ([TrainerNode("x", "leader", targets=(TrainerTarget("http://a/", "snmp"),))], InvalidValue, "kind"),
    ],
)
def test_invalid_nodes(registry: Registry, org: int, nodes, error, message) -> None:
    with pytest.raises(error, match=message):
        registry.trainers.put_trainer_deployment("acme", "t1", "trainer", nodes)


def test_ids_and_samplers_are_checked(registry: Registry, org: int) -> None:
    taken = "trainer deployment id {!r} is taken; choose another id"
    with pytest.raises(Conflict) as err:  # a model deployment's id: the same words as any taken id
        registry.trainers.put_trainer_deployment("acme", "d1", "trainer", NODES)
    assert str(err.value) == taken.format("d1")
    registry.trainers.put_trainer_deployment("other", "tx", "trainer", NODES)
    with pytest.raises(Conflict) as err:
        registry.trainers.put_trainer_deployment("acme", "tx", "trainer", NODES)
    assert str(err.value) == taken.format("tx")
    with pytest.raises(NotFound, match="no organization"):
        registry.trainers.put_trainer_deployment("nobody", "t9", "trainer", NODES)
    with pytest.raises(NotFound, match="no model 'm1' in the trainer's organization"):
        registry.trainers.put_trainer_deployment("other", "t9", "trainer", NODES, sampler_model_id="m1")
    with pytest.raises(NotFound, match="has no deployment 'd9'"):
        registry.trainers.put_trainer_deployment(
            "acme", "t9", "t", NODES, sampler_model_id="m1", sampler_deployment_id="d9"
        )
    with pytest.raises(InvalidValue, match="needs its model"):
        registry.trainers.put_trainer_deployment("acme", "t9", "t", NODES, sampler_deployment_id="d1")


def test_migration_is_named_and_last() -> None:
    assert "0004_trainer_deployments" in [name for name, _ in MIGRATIONS]


CONFIG = """
organizations:
  - name: acme
models:
  - id: m1
    organization: acme
    deployments: [{id: d1}]
loops:
  - id: t1
    name: my trainer
    organization: acme
    sampler: {model: m1, deployment: d1}
    nodes:
      - id: node-0
        role: leader
        gpu_ranks: [0, 1]
        pod: trainer-0
        namespace: loops
        targets:
          - {url: "http://10.0.0.1:9400/metrics", kind: dcgm}
          - {url: "http://10.0.0.1:10250/stats/summary", kind: kubelet_summary}
      - id: node-1
        gpu_ranks: [0, 1]
        targets: [{url: "http://10.0.0.2:9100/metrics", kind: node_exporter}]
"""


def test_config_loops_section_applies_idempotently(registry: Registry) -> None:
    config = parse_config(yaml.safe_load(CONFIG))
    apply_config(config, registry)
    org = registry.tenancy.organization_id("acme")
    assert org is not None
    first = registry.trainers.trainer_deployment("t1", org)
    assert first is not None and first.name == "my trainer" and first.sampler_deployment_id == "d1"
    assert [(n.node_id, n.role, n.gpu_ranks, n.pod) for n in first.nodes] == [
        ("node-0", "leader", (0, 1), "trainer-0"),
        ("node-1", "worker", (0, 1), None),  # role defaults to worker
    ]
    apply_config(config, registry)
    assert registry.trainers.trainer_deployment("t1", org) == first
    assert [t.kind for t in registry.trainers.list_trainer_targets()] == [
        "dcgm",
        "kubelet_summary",
        "node_exporter",
    ]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["loops"][0]["nodes"][0].update(role="worker"), "has 0 leader nodes"),
        (lambda d: d["loops"][0].update(id="d1"), "is a model deployment's id"),
        (lambda d: d["loops"][0].update(organization="nope"), "names organization 'nope'"),
        (lambda d: d["loops"][0]["sampler"].update(model="m9"), "sampler.model 'm9' is not a model"),
        (lambda d: d["loops"][0]["sampler"].update(deployment="d9"), "sampler.deployment 'd9'"),
        (lambda d: d["loops"][0]["nodes"][0]["targets"][0].update(kind="snmp"), "kind"),
        (lambda d: d["loops"][0]["nodes"][1].update(id="node-0"), "duplicate node id node-0"),
        (lambda d: d["loops"][0].update(nodez=[]), "did you mean `nodes`?"),
        (lambda d: d["loops"].append(dict(d["loops"][0])), "duplicate trainer deployment id t1"),
    ],
)
def test_config_mistakes_name_the_fix(edit, message) -> None:
    doc = yaml.safe_load(CONFIG)
    edit(doc)
    with pytest.raises(ConfigError, match=message):
        parse_config(doc)
