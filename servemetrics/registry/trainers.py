"""The trainers part of the registry: trainer (Loops) deployments, their nodes (one leader, workers),
the nodes' scrape targets and GPU ranks, and the link to the sampler's model deployment (docs/loops.md).

A trainer deployment belongs to an organization. Its series carry ``deployment_id = <trainer id>`` and
``node_id`` (attached at scrape time), so trainer ids must not be model deployment ids: both kinds
share one id space, checked here and in ``Deployments.create_deployment``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Connection, Row, delete, insert, select, update

from servemetrics.registry import rows
from servemetrics.registry import tables as t
from servemetrics.registry._base import RegistryCore
from servemetrics.registry.records import (
    InvalidValue,
    NotFound,
    TrainerDeploymentInfo,
    TrainerNode,
    TrainerTarget,
    TrainerTargetInfo,
)

MAX_GPU_RANK = 1023
"""The largest GPU rank (DCGM ``gpu`` index) a node may have."""


def check_nodes(trainer_id: str, nodes: Sequence[TrainerNode]) -> None:
    """Raise InvalidValue unless node ids are unique, roles valid, exactly one node is the leader,
    GPU ranks are distinct ints from 0 to ``MAX_GPU_RANK``, target kinds are known and no URL is listed
    twice in one node."""
    ids = [n.node_id for n in nodes]
    if not nodes or len(set(ids)) != len(ids):
        raise InvalidValue(f"trainer deployment {trainer_id!r} needs one or more nodes with distinct ids")
    for n in nodes:
        if n.role not in t.TRAINER_NODE_ROLES:
            raise InvalidValue(f"node {n.node_id!r}: role must be leader or worker, not {n.role!r}")
        if len(set(n.gpu_ranks)) != len(n.gpu_ranks) or any(
            isinstance(r, bool) or not isinstance(r, int) or not 0 <= r <= MAX_GPU_RANK for r in n.gpu_ranks
        ):
            raise InvalidValue(
                f"node {n.node_id!r}: gpu_ranks must be distinct integers from 0 to {MAX_GPU_RANK}"
            )
        urls = [target.url for target in n.targets]
        twice = sorted({u for u in urls if urls.count(u) > 1})
        if twice:
            raise InvalidValue(
                f"node {n.node_id!r}: target {', '.join(twice)} is listed more than once; list each URL "
                "once, with the one kind it serves"
            )
        for target in n.targets:
            if target.kind not in t.TRAINER_TARGET_KINDS:
                raise InvalidValue(
                    f"node {n.node_id!r}: unknown target kind {target.kind!r}; use one of "
                    + ", ".join(t.TRAINER_TARGET_KINDS)
                )
    leaders = [n.node_id for n in nodes if n.role == "leader"]
    if len(leaders) != 1:
        raise InvalidValue(
            f"trainer deployment {trainer_id!r} has {len(leaders)} leader nodes; mark exactly one node "
            "`role: leader` and the others `role: worker`"
        )


class Trainers:
    """Trainer deployments, their nodes and targets, over a ``RegistryCore``."""

    def __init__(self, core: RegistryCore) -> None:
        self._core = core

    def put_trainer_deployment(
        self,
        organization: str,
        trainer_id: str,
        name: str,
        nodes: Sequence[TrainerNode],
        *,
        sampler_model_id: str | None = None,
        sampler_deployment_id: str | None = None,
        at_ms: int | None = None,
    ) -> TrainerDeploymentInfo:
        """Create or replace trainer deployment ``trainer_id`` of ``organization`` with ``nodes``.

        Raises:
            NotFound: no such organization, sampler model or sampler deployment.
            Conflict: the id is another organization's trainer or any model deployment's id
                (``rows.id_taken``: the same words in each case).
            InvalidValue: see ``check_nodes``; a sampler deployment without its model.
        """
        check_nodes(trainer_id, nodes)
        with self._core.write() as conn:
            org_id = rows.must_organization(conn, organization)
            self._check_sampler(conn, org_id, sampler_model_id, sampler_deployment_id)
            if rows.deployment_exists(conn, trainer_id):
                raise rows.id_taken("trainer deployment", trainer_id)
            td = t.trainer_deployments
            row = conn.execute(select(td).where(td.c.id == trainer_id)).first()
            values = dict(
                name=name, sampler_model_id=sampler_model_id, sampler_deployment_id=sampler_deployment_id
            )
            if row is None:
                conn.execute(
                    insert(td).values(
                        id=trainer_id, organization_id=org_id, created_at_ms=self._core.at(at_ms), **values
                    )
                )
            elif row.organization_id != org_id:
                raise rows.id_taken("trainer deployment", trainer_id)
            else:
                conn.execute(update(td).where(td.c.id == trainer_id).values(**values))
            self._replace_nodes(conn, trainer_id, nodes)
            info = self._trainer(conn, trainer_id)
        assert info is not None
        return info

    @staticmethod
    def _check_sampler(
        conn: Connection, org_id: int, model_id: str | None, deployment_id: str | None
    ) -> None:
        if model_id is None:
            if deployment_id is not None:
                raise InvalidValue("a sampler deployment needs its model: give sampler model and deployment")
            return
        m = t.models
        model = conn.execute(select(m.c.organization_id).where(m.c.id == model_id)).first()
        if model is None or model.organization_id != org_id:
            raise NotFound(f"no model {model_id!r} in the trainer's organization for its sampler")
        if deployment_id is not None and rows.deployment_of(conn, model_id, deployment_id) is None:
            raise NotFound(f"model {model_id!r} has no deployment {deployment_id!r} for the sampler")

    @staticmethod
    def _replace_nodes(conn: Connection, trainer_id: str, nodes: Sequence[TrainerNode]) -> None:
        tn, tt = t.trainer_nodes, t.trainer_targets
        old = [r.id for r in conn.execute(select(tn.c.id).where(tn.c.trainer_deployment_id == trainer_id))]
        if old:
            conn.execute(delete(tt).where(tt.c.node_pk.in_(old)))
            conn.execute(delete(tn).where(tn.c.id.in_(old)))
        for position, n in enumerate(nodes):
            pk = conn.execute(
                insert(tn)
                .values(
                    trainer_deployment_id=trainer_id,
                    node_id=n.node_id,
                    position=position,
                    role=n.role,
                    gpu_ranks=list(n.gpu_ranks),
                    pod=n.pod,
                    namespace=n.namespace,
                )
                .returning(tn.c.id)
            ).scalar_one()
            for target in dict.fromkeys(n.targets):
                conn.execute(insert(tt).values(node_pk=pk, url=target.url, kind=target.kind))

    @staticmethod
    def _trainer(conn: Connection, trainer_id: str) -> TrainerDeploymentInfo | None:
        td, tn, tt = t.trainer_deployments, t.trainer_nodes, t.trainer_targets
        row = conn.execute(select(td).where(td.c.id == trainer_id)).first()
        if row is None:
            return None
        node_rows = conn.execute(
            select(tn).where(tn.c.trainer_deployment_id == trainer_id).order_by(tn.c.position)
        ).all()
        targets: dict[int, list[TrainerTarget]] = {}
        if node_rows:
            query = select(tt).where(tt.c.node_pk.in_([n.id for n in node_rows])).order_by(tt.c.id)
            for tr in conn.execute(query):
                targets.setdefault(tr.node_pk, []).append(TrainerTarget(tr.url, tr.kind))
        nodes = tuple(_node(n, targets.get(n.id, [])) for n in node_rows)
        nodes = tuple(sorted(nodes, key=lambda n: n.role != "leader"))  # leader first, then as declared
        return TrainerDeploymentInfo(
            row.id,
            row.organization_id,
            row.name,
            row.created_at_ms,
            row.sampler_model_id,
            row.sampler_deployment_id,
            nodes,
        )

    def trainer_deployment(self, trainer_id: str, org_id: int | None) -> TrainerDeploymentInfo | None:
        """Trainer deployment ``trainer_id`` (of organization ``org_id`` unless None); None if missing."""
        with self._core.read() as conn:
            info = self._trainer(conn, trainer_id)
        if info is None or (org_id is not None and info.organization_id != org_id):
            return None
        return info

    def shares_deployment_id(self, trainer_id: str) -> bool:
        """Whether a model deployment (of any organization) has the id ``trainer_id``: possible only in a
        registry written before ids were checked across kinds; such a trainer's series cannot be told
        apart from that deployment's."""
        with self._core.read() as conn:
            return rows.deployment_exists(conn, trainer_id)

    def list_trainer_deployments(
        self, org_id: int, sampler_model_id: str | None = None
    ) -> list[TrainerDeploymentInfo]:
        """The organization's trainer deployments by id (only those whose sampler is that model, if given)."""
        td = t.trainer_deployments
        query = select(td.c.id).where(td.c.organization_id == org_id).order_by(td.c.id)
        if sampler_model_id is not None:
            query = query.where(td.c.sampler_model_id == sampler_model_id)
        with self._core.read() as conn:
            ids = [r.id for r in conn.execute(query)]
            found = [self._trainer(conn, i) for i in ids]
        return [f for f in found if f is not None]

    def delete_trainer_deployment(self, trainer_id: str) -> None:
        """Delete a trainer deployment with its nodes and targets; NotFound if there is none."""
        with self._core.write() as conn:
            td, tn, tt = t.trainer_deployments, t.trainer_nodes, t.trainer_targets
            if conn.execute(select(td.c.id).where(td.c.id == trainer_id)).first() is None:
                raise NotFound(f"no trainer deployment {trainer_id!r}")
            pks = select(tn.c.id).where(tn.c.trainer_deployment_id == trainer_id)
            conn.execute(delete(tt).where(tt.c.node_pk.in_(pks)))
            conn.execute(delete(tn).where(tn.c.trainer_deployment_id == trainer_id))
            conn.execute(delete(td).where(td.c.id == trainer_id))

    def list_trainer_targets(self) -> list[TrainerTargetInfo]:
        """Every target of every trainer node, with the labels the scraper attaches."""
        td, tn, tt = t.trainer_deployments, t.trainer_nodes, t.trainer_targets
        query = (
            select(tt.c.url, tt.c.kind, td.c.id.label("trainer"), tn.c.node_id, tn.c.role)
            .join(tn, tt.c.node_pk == tn.c.id)
            .join(td, tn.c.trainer_deployment_id == td.c.id)
            .order_by(td.c.id, tn.c.position, tt.c.id)
        )
        with self._core.read() as conn:
            rows = conn.execute(query).all()
        return [TrainerTargetInfo(r.url, r.kind, r.trainer, r.node_id, r.role) for r in rows]


def _node(row: Row[Any], targets: list[TrainerTarget]) -> TrainerNode:
    ranks = tuple(int(r) for r in (row.gpu_ranks or ()))
    return TrainerNode(row.node_id, row.role, ranks, row.pod, row.namespace, tuple(targets))
