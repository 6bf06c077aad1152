"""The tenancy part of the registry: organizations, API keys (stored hashed) and models."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sqlalchemy import Connection, Row, delete, insert, select, update

from servemetrics.registry import keys as k
from servemetrics.registry import rows
from servemetrics.registry import tables as t
from servemetrics.registry._base import RegistryCore
from servemetrics.registry.records import InvalidValue, ModelInfo

_KEY_COLUMNS = (t.api_keys, t.organizations.c.name.label("org_name"))
_MODEL_COLUMNS = (t.models, t.organizations.c.name.label("org_name"))


def _key_info(r: Row[Any]) -> k.KeyInfo:
    scope = frozenset(r.model_ids) if r.model_ids is not None else None
    return k.KeyInfo(r.id, r.organization_id, r.org_name, r.prefix, r.type, scope, r.name, r.team_id)


def _model_info(r: Row[Any]) -> ModelInfo:
    return ModelInfo(r.id, r.name, r.organization_id, r.org_name, r.created_at_ms)


def _check_team(conn: Connection, org_id: int, organization: str, team_id: str) -> None:
    """InvalidValue (naming the organization's teams) unless it has team ``team_id``."""
    teams = rows.team_ids(conn, org_id)
    if team_id not in teams:
        raise InvalidValue(
            f"organization {organization!r} has no team {team_id!r}; "
            f"use one of: {', '.join(teams) or '(none)'}"
        )


class Tenancy:
    """Organizations, API keys (hashed with the core's pepper) and models, over a ``RegistryCore``."""

    def __init__(self, core: RegistryCore) -> None:
        self._core = core

    def ensure_organization(self, name: str, at_ms: int | None = None) -> int:
        """The id of organization ``name``, creating it (``created_at_ms``: ``at_ms``, default now) if
        missing."""
        with self._core.write() as conn:
            found = rows.organization_id(conn, name)
            if found is not None:
                return found
            stmt = insert(t.organizations).values(name=name, created_at_ms=self._core.at(at_ms))
            return int(conn.execute(stmt).inserted_primary_key[0])  # type: ignore[index]

    def organization_id(self, name: str, conn: Connection | None = None) -> int | None:
        """The id of organization ``name`` or None (read on ``conn`` when given)."""
        if conn is not None:
            return rows.organization_id(conn, name)
        with self._core.read() as c:
            return rows.organization_id(c, name)

    # -- API keys -------------------------------------------------------------------------------

    def create_api_key(
        self,
        organization: str,
        key_type: str,
        *,
        model_ids: list[str] | None = None,
        name: str | None = None,
        team_id: str | None = None,
    ) -> tuple[str, k.KeyInfo]:
        """Generate a key (of team ``team_id`` when given); return ``(plain key, info)``. The plain key is
        shown once and never stored.

        Raises NotFound (no such organization) or InvalidValue (unknown key type, a scope on a type
        that takes none, or a team the organization does not have).
        """
        raw, prefix = k.generate()
        info = self.add_api_key_digest(
            organization,
            k.digest(raw),
            key_type,
            model_ids=model_ids,
            name=name,
            prefix=prefix,
            team_id=team_id,
        )
        return raw, info

    def add_api_key(
        self,
        organization: str,
        raw_key: str,
        key_type: str,
        *,
        model_ids: list[str] | None = None,
        name: str | None = None,
        source: str = "api",
        team_id: str | None = None,
    ) -> k.KeyInfo:
        """Store ``raw_key`` (hashed) for ``organization`` (in team ``team_id`` when given); an existing
        identical key is updated.

        Raises NotFound (no such organization) or InvalidValue (bad key type or scope, unknown team).
        """
        return self.add_api_key_digest(
            organization,
            k.digest(raw_key),
            key_type,
            model_ids=model_ids,
            name=name,
            source=source,
            raw_key=raw_key,
            team_id=team_id,
        )

    def add_api_key_digest(
        self,
        organization: str,
        key_digest: str,
        key_type: str,
        *,
        model_ids: list[str] | None = None,
        name: str | None = None,
        source: str = "api",
        prefix: str | None = None,
        raw_key: str = "",
        team_id: str | None = None,
    ) -> k.KeyInfo:
        """Like ``add_api_key`` from the key's SHA-256 ``key_digest`` (``keys.digest``)."""
        try:
            k.check_type(key_type, model_ids)
        except ValueError as err:
            raise InvalidValue(str(err)) from err
        key_hash = k.hash_digest(self._core.pepper, key_digest)
        values = dict(
            type=key_type,
            model_ids=sorted(model_ids) if model_ids is not None else None,
            name=name,
            source=source,
            team_id=team_id,
        )
        with self._core.write() as conn:
            org_id = rows.must_organization(conn, organization)
            if team_id is not None:
                _check_team(conn, org_id, organization, team_id)
            where = t.api_keys.c.key_hash == key_hash
            if conn.execute(select(t.api_keys.c.id).where(where)).first():
                conn.execute(update(t.api_keys).where(where).values(organization_id=org_id, **values))
            else:
                prefix = prefix or k.prefix_of(raw_key, key_hash)
                conn.execute(
                    insert(t.api_keys).values(
                        organization_id=org_id,
                        key_hash=key_hash,
                        prefix=prefix,
                        created_at_ms=self._core.clock(),
                        **values,
                    )
                )
            return self._key_where(conn, where)

    @staticmethod
    def _key_where(conn: Connection, where: object) -> k.KeyInfo:
        query = select(*_KEY_COLUMNS).join(t.organizations).where(where)  # type: ignore[arg-type]
        return _key_info(conn.execute(query).one())

    def prune_config_keys(self, organization: str, keep_digests: Iterable[str]) -> int:
        """Delete keys of ``organization`` that came from a config file and are not in ``keep_digests``;
        returns how many were deleted. NotFound if there is no such organization."""
        keep = {k.hash_digest(self._core.pepper, d) for d in keep_digests}
        with self._core.write() as conn:
            org_id = rows.must_organization(conn, organization)
            found = conn.execute(
                select(t.api_keys.c.id, t.api_keys.c.key_hash).where(
                    t.api_keys.c.organization_id == org_id, t.api_keys.c.source == "config"
                )
            )
            gone = [r.id for r in found if r.key_hash not in keep]
            if gone:
                conn.execute(delete(t.api_keys).where(t.api_keys.c.id.in_(gone)))
            return len(gone)

    def list_api_keys(self, organization_id: int) -> list[k.KeyInfo]:
        """Metadata (never the key) of every key of the organization."""
        query = (
            select(*_KEY_COLUMNS).join(t.organizations).where(t.api_keys.c.organization_id == organization_id)
        )
        with self._core.read() as conn:
            return [_key_info(r) for r in conn.execute(query.order_by(t.api_keys.c.id))]

    def delete_api_key(self, organization_id: int, prefix: str) -> bool:
        """Delete the organization's keys with ``prefix``; True if any was deleted."""
        with self._core.write() as conn:
            res = conn.execute(
                delete(t.api_keys).where(
                    t.api_keys.c.organization_id == organization_id, t.api_keys.c.prefix == prefix
                )
            )
            return res.rowcount > 0

    def authenticate(self, raw_key: str) -> k.KeyInfo | None:
        """The key's info when ``raw_key`` is a stored key, else None."""
        if not raw_key:
            return None
        key_hash = k.hash_key(self._core.pepper, raw_key)
        with self._core.read() as conn:
            query = select(*_KEY_COLUMNS).join(t.organizations).where(t.api_keys.c.key_hash == key_hash)
            row = conn.execute(query).first()
        if row is None or not k.verify(self._core.pepper, raw_key, row.key_hash):
            return None
        return _key_info(row)

    # -- models ---------------------------------------------------------------------------------

    def ensure_model(
        self, model_id: str, name: str, organization: str, at_ms: int | None = None
    ) -> ModelInfo:
        """Create model ``model_id`` or update its name and organization; NotFound if there is no such
        organization."""
        with self._core.write() as conn:
            org_id = rows.must_organization(conn, organization)
            if conn.execute(select(t.models.c.id).where(t.models.c.id == model_id)).first():
                conn.execute(
                    update(t.models)
                    .where(t.models.c.id == model_id)
                    .values(name=name, organization_id=org_id)
                )
            else:
                conn.execute(
                    insert(t.models).values(
                        id=model_id, name=name, organization_id=org_id, created_at_ms=self._core.at(at_ms)
                    )
                )
        found = self.model(model_id, None)
        assert found is not None
        return found

    def model(self, model_id: str, org_id: int | None) -> ModelInfo | None:
        """Model ``model_id`` of organization ``org_id`` (None = any); None if missing or another org's."""
        query = select(*_MODEL_COLUMNS).join(t.organizations).where(t.models.c.id == model_id)
        if org_id is not None:
            query = query.where(t.models.c.organization_id == org_id)
        with self._core.read() as conn:
            row = conn.execute(query).first()
        return _model_info(row) if row else None

    def list_models(self, org_id: int, name: str | None = None) -> list[ModelInfo]:
        """Models of the organization (optionally only those named ``name``), by id."""
        query = select(*_MODEL_COLUMNS).join(t.organizations).where(t.models.c.organization_id == org_id)
        if name is not None:
            query = query.where(t.models.c.name == name)
        with self._core.read() as conn:
            return [_model_info(r) for r in conn.execute(query.order_by(t.models.c.id))]
