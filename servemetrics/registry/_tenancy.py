"""Organizations, API keys and models."""

from __future__ import annotations

from collections.abc import Iterable

from sqlalchemy import Connection, Row, delete, insert, select, update

from servemetrics.registry import keys as k
from servemetrics.registry import tables as t
from servemetrics.registry._base import RegistryBase
from servemetrics.registry.records import InvalidValue, ModelInfo, NotFound

_KEY_COLUMNS = (t.api_keys, t.organizations.c.name.label("org_name"))
_MODEL_COLUMNS = (t.models, t.organizations.c.name.label("org_name"))


def _key_info(r: Row) -> k.KeyInfo:
    scope = frozenset(r.model_ids) if r.model_ids is not None else None
    return k.KeyInfo(r.id, r.organization_id, r.org_name, r.prefix, r.type, scope, r.name)


def _model_info(r: Row) -> ModelInfo:
    return ModelInfo(r.id, r.name, r.organization_id, r.org_name, r.created_at_ms)


class TenancyMixin(RegistryBase):
    """Organizations, API keys (hashed) and models."""

    def ensure_organization(self, name: str, at_ms: int | None = None) -> int:
        """The id of organization ``name``, creating it if missing."""
        with self._write() as conn:
            found = self.organization_id(name, conn)
            if found is not None:
                return found
            stmt = insert(t.organizations).values(name=name, created_at_ms=self._at(at_ms))
            return int(conn.execute(stmt).inserted_primary_key[0])  # type: ignore[index]

    def organization_id(self, name: str, conn: Connection | None = None) -> int | None:
        """The id of organization ``name`` or None."""
        query = select(t.organizations.c.id).where(t.organizations.c.name == name)
        if conn is not None:
            return conn.execute(query).scalar_one_or_none()
        with self.engine.connect() as c:
            return c.execute(query).scalar_one_or_none()

    def _org(self, conn: Connection, name: str) -> int:
        found = self.organization_id(name, conn)
        if found is None:
            raise NotFound(f"no organization {name!r}")
        return found

    # -- API keys -------------------------------------------------------------------------------

    def create_api_key(
        self, organization: str, key_type: str, *, model_ids: list[str] | None = None, name: str | None = None
    ) -> tuple[str, k.KeyInfo]:
        """Generate a key; return ``(plain key, info)``. The plain key is shown once and never stored."""
        raw, prefix = k.generate()
        info = self.add_api_key_digest(
            organization, k.digest(raw), key_type, model_ids=model_ids, name=name, prefix=prefix
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
    ) -> k.KeyInfo:
        """Store ``raw_key`` (hashed) for ``organization``; an existing identical key is updated."""
        return self.add_api_key_digest(
            organization,
            k.digest(raw_key),
            key_type,
            model_ids=model_ids,
            name=name,
            source=source,
            raw_key=raw_key,
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
    ) -> k.KeyInfo:
        """Like ``add_api_key`` from the key's SHA-256 ``key_digest`` (``keys.digest``)."""
        try:
            k.check_type(key_type, model_ids)
        except ValueError as err:
            raise InvalidValue(str(err)) from err
        key_hash = k.hash_digest(self._pepper, key_digest)
        values = dict(
            type=key_type,
            model_ids=sorted(model_ids) if model_ids is not None else None,
            name=name,
            source=source,
        )
        with self._write() as conn:
            org_id = self._org(conn, organization)
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
                        created_at_ms=self._clock(),
                        **values,
                    )
                )
            return self._key_where(conn, where)

    def _key_where(self, conn: Connection, where: object) -> k.KeyInfo:
        query = select(*_KEY_COLUMNS).join(t.organizations).where(where)  # type: ignore[arg-type]
        return _key_info(conn.execute(query).one())

    def prune_config_keys(self, organization: str, keep_digests: Iterable[str]) -> int:
        """Delete keys of ``organization`` that came from a config file and are not in ``keep_digests``."""
        keep = {k.hash_digest(self._pepper, d) for d in keep_digests}
        with self._write() as conn:
            org_id = self._org(conn, organization)
            rows = conn.execute(
                select(t.api_keys.c.id, t.api_keys.c.key_hash).where(
                    t.api_keys.c.organization_id == org_id, t.api_keys.c.source == "config"
                )
            )
            gone = [r.id for r in rows if r.key_hash not in keep]
            if gone:
                conn.execute(delete(t.api_keys).where(t.api_keys.c.id.in_(gone)))
            return len(gone)

    def list_api_keys(self, organization_id: int) -> list[k.KeyInfo]:
        """Metadata (never the key) of every key of the organization."""
        query = (
            select(*_KEY_COLUMNS).join(t.organizations).where(t.api_keys.c.organization_id == organization_id)
        )
        with self.engine.connect() as conn:
            return [_key_info(r) for r in conn.execute(query.order_by(t.api_keys.c.id))]

    def delete_api_key(self, organization_id: int, prefix: str) -> bool:
        """Delete the organization's keys with ``prefix``; True if any was deleted."""
        with self._write() as conn:
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
        key_hash = k.hash_key(self._pepper, raw_key)
        with self.engine.connect() as conn:
            query = select(*_KEY_COLUMNS).join(t.organizations).where(t.api_keys.c.key_hash == key_hash)
            row = conn.execute(query).first()
        if row is None or not k.verify(self._pepper, raw_key, row.key_hash):
            return None
        return _key_info(row)

    # -- models ---------------------------------------------------------------------------------

    def ensure_model(
        self, model_id: str, name: str, organization: str, at_ms: int | None = None
    ) -> ModelInfo:
        """Create model ``model_id`` or update its name and organization."""
        with self._write() as conn:
            org_id = self._org(conn, organization)
            if conn.execute(select(t.models.c.id).where(t.models.c.id == model_id)).first():
                conn.execute(
                    update(t.models)
                    .where(t.models.c.id == model_id)
                    .values(name=name, organization_id=org_id)
                )
            else:
                conn.execute(
                    insert(t.models).values(
                        id=model_id, name=name, organization_id=org_id, created_at_ms=self._at(at_ms)
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
        with self.engine.connect() as conn:
            row = conn.execute(query).first()
        return _model_info(row) if row else None

    def list_models(self, org_id: int, name: str | None = None) -> list[ModelInfo]:
        """Models of the organization (optionally only those named ``name``), by id."""
        query = select(*_MODEL_COLUMNS).join(t.organizations).where(t.models.c.organization_id == org_id)
        if name is not None:
            query = query.where(t.models.c.name == name)
        with self.engine.connect() as conn:
            return [_model_info(r) for r in conn.execute(query.order_by(t.models.c.id))]
