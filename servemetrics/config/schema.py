"""The config file's schema: the pydantic models of every key, ``parse_config`` and ``load_config``.

The keys, defaults and duration syntax are in the package docstring (``servemetrics/config/__init__.py``).
"""

from __future__ import annotations

import difflib
import math
import os
import re
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from servemetrics.registry import keys as k
from servemetrics.registry.ids import check_deployment_id, check_id, check_port, check_target_url
from servemetrics.timeutil import iso_ms
from servemetrics.types import redact_url

if TYPE_CHECKING:
    from servemetrics.store.prometheus import EngineOptions

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


class ConfigError(ValueError):
    """The config file is missing, not YAML, or has a bad key or value; the message says what to write."""


def parse_duration(value: Any) -> float:
    """Seconds from ``15``, ``2.5``, ``"15s"``, ``"500ms"``, ``"1m"``, ``"2h"`` or ``"15d"``."""
    if isinstance(value, bool):
        raise ValueError("write a duration such as 15s, 1m or 15d")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise ValueError(
                f"{value!r} is not a duration; write a number of seconds or e.g. 15s, 1m, 2h, 15d"
            )
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if not math.isfinite(seconds):
        raise ValueError(f"{value!r} is not a finite duration; write e.g. 15s, 1m, 2h, 15d")
    if seconds <= 0:
        raise ValueError("a duration must be greater than 0")
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]


def _bounded(at_least: tuple[float, str] | None, at_most: tuple[float, str]) -> Any:
    """A validator of seconds: at least ``at_least`` (None: any positive) and at most ``at_most``, each
    ``(seconds, as written in the error)``, e.g. ``(3600.0, "1h")``; ValueError naming the limit."""

    def check(seconds: float) -> float:
        if at_least is not None and seconds < at_least[0]:
            raise ValueError(f"must be at least {at_least[1]} (got {seconds:g}s)")
        if seconds > at_most[0]:
            raise ValueError(f"must be at most {at_most[1]} (got {seconds:g}s)")
        return seconds

    return AfterValidator(check)


MAX_SCRAPE_INTERVAL_S = 3600.0
"""``scrape_interval`` and ``scrape_timeout`` are at most 1 h."""
MAX_RETENTION_S = 3650 * 86400.0
"""``retention`` is at most 3650d (10 years)."""


ModelId = Annotated[str, AfterValidator(lambda v: check_id(v, "model id"))]
DeploymentId = Annotated[str, AfterValidator(check_deployment_id)]
ReplicaId = Annotated[str, AfterValidator(lambda v: check_id(v, "replica id"))]
EnvironmentName = Annotated[str, AfterValidator(lambda v: check_id(v, "environment name"))]
TargetUrl = Annotated[str, AfterValidator(check_target_url)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ApiKeyConfig(_Strict):
    """A key of an organization: the plain ``key`` (hashed before it is stored), ``type``, scope."""

    key: SecretStr = Field(min_length=1)
    type: Annotated[str, BeforeValidator(lambda v: str(v).strip().upper().replace("-", "_"))]
    model_ids: list[str] | None = None
    name: str | None = None

    @model_validator(mode="after")
    def _check(self) -> ApiKeyConfig:
        k.check_type(self.type, self.model_ids)
        return self

    @property
    def digest(self) -> str:
        """SHA-256 hex of the key (what the registry hashes again with its pepper)."""
        return k.digest(self.key.get_secret_value())


class OrganizationConfig(_Strict):
    """An organization and its API keys."""

    name: str = Field(min_length=1)
    api_keys: list[ApiKeyConfig] = []


class InstanceTypeConfig(_Strict):
    """GPU type and count (``gpu_count: 0`` or no ``gpu_type`` = CPU); ``name`` defaults to ``1xH100``."""

    gpu_type: str | None = None
    gpu_count: int = Field(default=0, ge=0)
    name: str | None = None


class ReplicaConfig(_Strict):
    """A replica and its ``/metrics`` URLs."""

    id: ReplicaId
    targets: list[TargetUrl] = []


class DeploymentConfig(_Strict):
    """A deployment of a model (``production`` and ``development`` are reserved ids)."""

    id: DeploymentId
    name: str | None = None
    instance_type: InstanceTypeConfig = InstanceTypeConfig()
    replicas: list[ReplicaConfig] = []

    @model_validator(mode="after")
    def _check(self) -> DeploymentConfig:
        _no_duplicates([r.id for r in self.replicas], "replica id")
        return self


def check_registry_url(url: str) -> str:
    """``url`` when it is ``sqlite:///path`` or ``postgresql+psycopg://…``; a driverless
    ``postgresql://…`` (or ``postgres://…``, as libpq and Heroku write it) is returned as
    ``postgresql+psycopg://…``, the one PostgreSQL driver we ship. Else (also for a port outside 1-65535)
    ValueError saying what to write."""
    example = "write sqlite:///path/registry.sqlite3 or postgresql://user:pass@host:5432/db"
    for plain in ("postgresql://", "postgres://"):
        if url.startswith(plain):
            url = "postgresql+psycopg://" + url[len(plain) :]
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise ValueError(f"{redact_url(url)!r} is not a SQLAlchemy URL; {example}") from None
    if parsed.get_backend_name() == "postgresql" and parsed.drivername != "postgresql+psycopg":
        raise ValueError(f"{parsed.drivername!r} is not a supported driver; write postgresql+psycopg://…")
    if parsed.drivername not in ("sqlite", "sqlite+pysqlite", "postgresql+psycopg"):
        raise ValueError(f"{parsed.drivername!r} is not a supported registry database; {example}")
    if parsed.port is not None and not 1 <= parsed.port <= 65535:
        shown = parsed.render_as_string(hide_password=True)
        raise ValueError(f"{shown!r} has port {parsed.port}, not a number from 1 to 65535; {example}")
    return url


def _rfc3339_ms(value: Any) -> int:
    if isinstance(value, datetime):
        when = value
    else:
        try:
            when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError as err:
            raise ValueError(f"{value!r} is not an RFC 3339 time; write e.g. 2026-03-01T12:00:00Z") from err
    if when.tzinfo is None:
        raise ValueError(f"{value!r} has no time zone; write e.g. 2026-03-01T12:00:00Z")
    return int(when.timestamp() * 1000)


class PromotionConfig(_Strict):
    """One entry of an environment's history: ``deployment`` serves ``percent`` % from ``at``."""

    deployment: str
    at: Annotated[int, BeforeValidator(_rfc3339_ms)]  # epoch ms
    percent: int = Field(default=100, ge=1, le=100)


class EnvironmentConfig(_Strict):
    """An environment and its promotion history (any order in the file; applied by time)."""

    name: EnvironmentName
    rolling_deploy: bool = False
    promotions: list[PromotionConfig] = []

    @model_validator(mode="after")
    def _check(self) -> EnvironmentConfig:
        times = [p.at for p in self.promotions]
        same = sorted({at for at in times if times.count(at) > 1})
        if same:
            when = ", ".join(iso_ms(at, always_millis=False) for at in same)
            raise ValueError(
                f"environment {self.name!r} has two promotions at {when}; give each promotion its own `at`"
            )
        return self


class ModelConfig(_Strict):
    """A model of an organization with its deployments and environments."""

    id: ModelId
    name: str | None = None
    organization: str
    deployments: list[DeploymentConfig] = []
    environments: list[EnvironmentConfig] = []

    @model_validator(mode="after")
    def _check(self) -> ModelConfig:
        ids = [d.id for d in self.deployments]
        _no_duplicates(ids, "deployment id")
        _no_duplicates([e.name for e in self.environments], "environment name")
        for env in self.environments:
            for p in env.promotions:
                if p.deployment not in ids:
                    raise ValueError(
                        f"environment {env.name!r} promotes unknown deployment {p.deployment!r}; "
                        f"use one of the model's deployments: {', '.join(ids) or '(none)'}"
                    )
        return self


class TrainerTargetConfig(_Strict):
    """A trainer node's target: ``url`` and ``kind`` (dcgm, kubelet, kubelet_summary, node_exporter,
    requests; docs/loops.md)."""

    url: TargetUrl
    kind: Literal["dcgm", "kubelet", "kubelet_summary", "node_exporter", "requests"]


MAX_GPU_RANK = 1023
"""The largest GPU rank (DCGM ``gpu`` index) a trainer node may declare."""


class TrainerNodeConfig(_Strict):
    """A node of a trainer deployment: ``role`` leader or worker, its GPU ranks (distinct integers from 0
    to ``MAX_GPU_RANK``), pod and targets (each URL once)."""

    id: Annotated[str, AfterValidator(lambda v: check_id(v, "node id"))]
    role: Literal["leader", "worker"] = "worker"
    gpu_ranks: list[int] = []
    pod: str | None = None
    namespace: str | None = None
    targets: list[TrainerTargetConfig] = []

    @field_validator("gpu_ranks", mode="before")
    @classmethod
    def _ranks(cls, value: Any) -> Any:
        if not isinstance(value, list):
            raise ValueError("must be a list of GPU ranks, e.g. [0, 1]")
        for rank in value:
            if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank <= MAX_GPU_RANK:
                raise ValueError(
                    f"{rank!r} is not a GPU rank; write integers from 0 to {MAX_GPU_RANK}, e.g. [0, 1]"
                )
        dupes = sorted({r for r in value if value.count(r) > 1})
        if dupes:
            raise ValueError(
                f"GPU rank {', '.join(map(str, dupes))} is listed more than once; "
                "list each rank of the node once"
            )
        return value

    @field_validator("targets")
    @classmethod
    def _targets(cls, value: list[TrainerTargetConfig]) -> list[TrainerTargetConfig]:
        kinds: dict[str, list[str]] = {}
        for target in value:
            kinds.setdefault(target.url, []).append(target.kind)
        for url, listed in kinds.items():
            if len(listed) > 1:
                raise ValueError(
                    f"target {url} is listed {len(listed)} times (kinds {', '.join(listed)}); list each URL "
                    "once, with the one kind it serves"
                )
        return value


class SamplerConfig(_Strict):
    """The sampler half of a trainer deployment: a model (and deployment) declared under ``models``."""

    model: str
    deployment: str | None = None


class TrainerDeploymentConfig(_Strict):
    """A trainer (Loops) deployment under ``loops``: its organization, nodes and sampler."""

    id: DeploymentId
    name: str | None = None
    organization: str
    sampler: SamplerConfig | None = None
    nodes: list[TrainerNodeConfig] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> TrainerDeploymentConfig:
        _no_duplicates([n.id for n in self.nodes], "node id")
        leaders = [n.id for n in self.nodes if n.role == "leader"]
        if len(leaders) != 1:
            raise ValueError(
                f"trainer deployment {self.id!r} has {len(leaders)} leader nodes; give exactly one node "
                "`role: leader` (the others `role: worker`)"
            )
        return self


def _no_duplicates(values: list[str], what: str) -> None:
    dupes = sorted({v for v in values if values.count(v) > 1})
    if dupes:
        raise ValueError(f"duplicate {what} {', '.join(dupes)}; each must be unique")


def _http_url(value: str) -> str:
    """``value`` when it is an ``http(s)://host[:port][/path]`` URL with a port (if any) in 1-65535; else
    ValueError saying what to write."""
    example = "write e.g. http://127.0.0.1:8428"
    parsed = urlsplit(value)
    if parsed.scheme not in ("http", "https") or not parsed.hostname or any(c.isspace() for c in value):
        raise ValueError(f"{value!r} is not an http(s) URL; {example}")
    check_port(value, example)
    return value


HttpUrl = Annotated[str, AfterValidator(_http_url)]


def _header_problem(value: str) -> str | None:
    """Why ``value`` cannot be sent as an HTTP header value (empty, spaces at an end, a control or
    non-ASCII character), or None when it can."""
    if not value:
        return "is empty"
    if value != value.strip(" \t"):
        return "starts or ends with a space"
    bad = next((c for c in value if not (c == "\t" or " " <= c <= "~")), None)
    if bad is not None:
        return f"contains the character {bad!r}, which an HTTP header cannot carry"
    return None


def _secret_header(what: str, fix: str) -> Any:
    """A validator of a ``SecretStr`` sent in an HTTP header: ValueError naming ``what`` and ``fix``,
    never the secret itself."""

    def check(value: SecretStr) -> SecretStr:
        problem = _header_problem(value.get_secret_value())
        if problem is not None:
            raise ValueError(f"the {what} {problem}; {fix}")
        return value

    return AfterValidator(check)


_TCHAR = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""An HTTP header name (RFC 9110 ``token``)."""


def _username(value: str) -> str:
    problem = _header_problem(value)
    if problem is None and ":" in value:
        problem = "contains ':', which basic auth cannot carry in a username"
    if problem is not None:
        raise ValueError(f"the username {problem}; write the engine's user name, e.g. username: sm")
    return value


class BasicAuthConfig(_Strict):
    """HTTP basic auth for the engine (reads and remote_write): printable ASCII ``username`` (no ``:``)
    and ``password``, neither empty."""

    username: Annotated[str, AfterValidator(_username)]
    password: Annotated[
        SecretStr, _secret_header("password", "write the engine's password in printable ASCII, on one line")
    ]


class StoreConfig(_Strict):
    """The sample store: ``kind: duckdb`` (the embedded default) or ``kind: prometheus`` (a
    Prometheus-compatible engine: ``flavor``, ``query_url``, ``remote_write_url``, optional
    ``basic_auth`` or ``bearer_token``, ``tenant_header`` and ``buffer_dir``; docs/store.md). Credentials
    and tenant headers must be non-empty printable ASCII (they are sent as HTTP headers)."""

    kind: Literal["duckdb", "prometheus"] = "duckdb"
    flavor: Literal["prometheus", "victoriametrics"] | None = None
    query_url: HttpUrl | None = None
    remote_write_url: HttpUrl | None = None
    basic_auth: BasicAuthConfig | None = None
    bearer_token: (
        Annotated[
            SecretStr,
            _secret_header("bearer_token", "write the engine's token in printable ASCII, on one line"),
        ]
        | None
    ) = None
    tenant_header: dict[str, str] | None = None
    buffer_dir: Path | None = None

    @field_validator("buffer_dir", mode="before")
    @classmethod
    def _buffer_dir(cls, value: Any) -> Any:
        if isinstance(value, str) and not value.strip():
            raise ValueError(
                "must not be empty; omit it (the default is remote_write_buffer in data_dir) "
                "or name a directory"
            )
        return value

    @model_validator(mode="after")
    def _check(self) -> StoreConfig:
        engine_keys = ("flavor", "query_url", "remote_write_url", "basic_auth", "bearer_token")
        if self.kind == "duckdb":
            extra = [k for k in (*engine_keys, "tenant_header", "buffer_dir") if getattr(self, k) is not None]
            if extra:
                verb, them = ("applies", "it") if len(extra) == 1 else ("apply", "them")
                raise ValueError(
                    f"{', '.join(extra)} only {verb} to kind: prometheus; "
                    f"remove {them} or set kind: prometheus"
                )
            return self
        missing = [k for k in ("flavor", "query_url", "remote_write_url") if getattr(self, k) is None]
        if missing:
            raise ValueError(
                f"kind: prometheus needs {', '.join(missing)}; e.g. flavor: victoriametrics, "
                "query_url: http://127.0.0.1:8428, remote_write_url: http://127.0.0.1:8428/api/v1/write"
            )
        if self.basic_auth is not None and self.bearer_token is not None:
            raise ValueError("give basic_auth or bearer_token, not both")
        for name, value in (self.tenant_header or {}).items():
            if not _TCHAR.fullmatch(name):
                raise ValueError(
                    f"tenant_header {name!r} is not an HTTP header name; use letters, digits and '-', "
                    "e.g. X-Scope-OrgID: team-a"
                )
            if (problem := _header_problem(value)) is not None:
                raise ValueError(
                    f"the tenant_header {name} value {problem}; write the tenant in printable ASCII, "
                    "e.g. X-Scope-OrgID: team-a"
                )
        return self


class Config(_Strict):
    """The whole file. ``registry_url`` is filled from ``data_dir`` when absent."""

    listen: str = "127.0.0.1:8321"
    data_dir: Path = Path("./data")
    scrape_interval: Annotated[Duration, _bounded((1.0, "1s"), (MAX_SCRAPE_INTERVAL_S, "1h"))] = 15.0
    scrape_timeout: Annotated[Duration, _bounded(None, (MAX_SCRAPE_INTERVAL_S, "1h"))] = 10.0
    retention: Annotated[Duration, _bounded((3600.0, "1h"), (MAX_RETENTION_S, "3650d (10 years)"))] = (
        15 * 86400.0
    )
    registry_url: str | None = None
    store: StoreConfig = StoreConfig()
    organizations: list[OrganizationConfig] = []
    models: list[ModelConfig] = []
    loops: list[TrainerDeploymentConfig] = []

    @field_validator("listen", mode="before")
    @classmethod
    def _listen(cls, value: Any) -> str:
        value = str(value)
        host, _, port = value.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{value!r} is not host:port; write e.g. 127.0.0.1:8321 or 0.0.0.0:8321")
        return value

    @field_validator("registry_url")
    @classmethod
    def _registry_url(cls, value: str | None) -> str | None:
        return None if value is None else check_registry_url(value)

    @model_validator(mode="after")
    def _check(self) -> Config:
        if self.registry_url is None:
            object.__setattr__(self, "registry_url", f"sqlite:///{self.data_dir / 'registry.sqlite3'}")
        buffer_dir = remote_write_buffer_dir(self)
        if buffer_dir is not None and os.path.normpath(buffer_dir) == os.path.normpath(self.data_dir):
            raise ValueError(
                f"store.buffer_dir {self.store.buffer_dir} is data_dir itself; the buffer needs its own "
                "directory: omit buffer_dir (remote_write_buffer in data_dir) or name another one"
            )
        if self.scrape_timeout > self.scrape_interval:
            raise ValueError(
                f"scrape_timeout ({self.scrape_timeout:g}s) must not exceed scrape_interval "
                f"({self.scrape_interval:g}s)"
            )
        orgs = [o.name for o in self.organizations]
        _no_duplicates(orgs, "organization name")
        _no_duplicates([m.id for m in self.models], "model id")
        _no_duplicates([d.id for m in self.models for d in m.deployments], "deployment id")
        self._check_keys()
        for model in self.models:
            if model.organization not in orgs:
                raise ValueError(
                    f"model {model.id!r} names organization {model.organization!r}, which is not "
                    f"under organizations; declare it there or use one of: {', '.join(orgs) or '(none)'}"
                )
        return self

    @model_validator(mode="after")
    def _check_loops(self) -> Config:
        """Trainer ids are unique and no model deployment's; organizations and samplers are declared."""
        orgs = [o.name for o in self.organizations]
        _no_duplicates([lp.id for lp in self.loops], "trainer deployment id")
        deployments = {d.id: m for m in self.models for d in m.deployments}
        models = {m.id: m for m in self.models}
        for lp in self.loops:
            where = f"loops[{lp.id}]"
            if lp.id in deployments:
                raise ValueError(
                    f"{where}: {lp.id!r} is a model deployment's id; give the trainer another id"
                )
            if lp.organization not in orgs:
                raise ValueError(
                    f"{where} names organization {lp.organization!r}, which is not under organizations; "
                    f"declare it there or use one of: {', '.join(orgs) or '(none)'}"
                )
            if lp.sampler is None:
                continue
            model = models.get(lp.sampler.model)
            if model is None or model.organization != lp.organization:
                raise ValueError(
                    f"{where}.sampler.model {lp.sampler.model!r} is not a model of organization "
                    f"{lp.organization!r} under models; declare it there"
                )
            if lp.sampler.deployment is not None and deployments.get(lp.sampler.deployment) is not model:
                raise ValueError(
                    f"{where}.sampler.deployment {lp.sampler.deployment!r} is not a deployment of model "
                    f"{model.id!r}; use one of: {', '.join(d.id for d in model.deployments) or '(none)'}"
                )
        return self

    def _check_keys(self) -> None:
        """Each plain key appears once; a key's ``model_ids`` name models declared under ``models``."""
        seen: dict[str, str] = {}
        models = [m.id for m in self.models]
        for i, org in enumerate(self.organizations):
            for j, key in enumerate(org.api_keys):
                where = f"organizations[{i}].api_keys[{j}] (organization {org.name!r})"
                if key.digest in seen:
                    raise ValueError(
                        f"the same API key is listed at {seen[key.digest]} and at {where}; a key belongs "
                        "to one organization and is listed once: give each entry its own key"
                    )
                seen[key.digest] = where
                unknown = [m for m in key.model_ids or () if m not in models]
                if unknown:
                    raise ValueError(
                        f"{where} is scoped to model_ids {', '.join(unknown)}, which are not under models; "
                        f"declare them there or use some of: {', '.join(models) or '(none)'}"
                    )

    @property
    def host(self) -> str:
        """Host part of ``listen``."""
        return self.listen.rpartition(":")[0]

    @property
    def port(self) -> int:
        """Port part of ``listen``."""
        return int(self.listen.rpartition(":")[2])


def engine_options(config: Config) -> EngineOptions | None:
    """The engine the config's ``store`` names (None for the embedded DuckDB store). A relative
    ``buffer_dir`` is relative to ``data_dir``; the default is ``<data_dir>/remote_write_buffer``."""
    from servemetrics.store.prometheus import EngineOptions
    from servemetrics.store.promql import Flavor

    s = config.store
    if s.kind != "prometheus":
        return None
    assert s.flavor is not None and s.query_url is not None and s.remote_write_url is not None
    headers = dict(s.tenant_header or {})
    if s.bearer_token is not None:
        headers["Authorization"] = f"Bearer {s.bearer_token.get_secret_value()}"
    auth = (s.basic_auth.username, s.basic_auth.password.get_secret_value()) if s.basic_auth else None
    buffer_dir = remote_write_buffer_dir(config)
    assert buffer_dir is not None
    return EngineOptions(Flavor(s.flavor), s.query_url, s.remote_write_url, buffer_dir, headers, auth)


def remote_write_buffer_dir(config: Config) -> Path | None:
    """The remote_write buffer directory of a ``kind: prometheus`` store (``store.buffer_dir``, relative to
    ``data_dir``; default ``<data_dir>/remote_write_buffer``), None for the embedded store."""
    if config.store.kind != "prometheus":
        return None
    return Path(config.data_dir) / (config.store.buffer_dir or "remote_write_buffer")


def _where(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(top level)"


def _allowed_keys(loc: tuple[int | str, ...]) -> list[str]:
    model: type[BaseModel] = Config
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        if field is None:
            break
        model = _model_of(field.annotation) or model
    return list(model.model_fields)


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model class in a field's annotation (``X``, ``X | None``, ``list[X]``), or None."""
    for candidate in (annotation, *getattr(annotation, "__args__", ())):
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _model_at(loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class expected at ``loc`` (None when ``loc`` is not a model-typed key)."""
    model: type[BaseModel] | None = Config
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part)) if model is not None else None
        if field is None:
            return None
        model = _model_of(field.annotation)
    return model


def _and(words: list[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def _mapping_hint(model: type[BaseModel]) -> str:
    """``with username and password`` / ``of gpu_type, gpu_count, name``: the keys a mapping takes."""
    required = [name for name, f in model.model_fields.items() if f.is_required()]
    optional = [name for name, f in model.model_fields.items() if not f.is_required()]
    if not required:
        return f"with any of {', '.join(optional)}"
    more = f" (and optionally {', '.join(optional)})" if optional else ""
    return f"with {_and(required)}{more}"


def _describe(err: dict[str, Any]) -> str:
    loc = tuple(err.get("loc", ()))
    if err["type"] == "extra_forbidden":
        allowed = _allowed_keys(loc[:-1])
        close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
        hint = f"did you mean `{close[0]}`? " if close else ""
        return f"unknown key `{_where(loc)}`: {hint}allowed keys here are {', '.join(allowed)}"
    if err["type"] == "missing":
        return f"missing key `{_where(loc)}`: add it"
    if err["type"] == "model_type" and (model := _model_at(loc)) is not None:
        return f"`{_where(loc)}` must be a mapping {_mapping_hint(model)}"
    kinds = {"dict_type": "a mapping of names to values", "list_type": "a list", "string_type": "a string"}
    if err["type"] in kinds and loc:
        return f"`{_where(loc)}` must be {kinds[err['type']]}"
    message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
    return f"`{_where(loc)}`: {message}" if loc else message


def parse_config(data: Any, source: str = "config") -> Config:
    """Validate an already-parsed YAML document; raises ConfigError listing every problem."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"{source}: the top level must be a mapping of keys such as listen, data_dir, models"
        )
    try:
        return Config.model_validate(data)
    except ValidationError as err:
        lines = [_describe(e) for e in err.errors()]  # type: ignore[arg-type]
        raise ConfigError(f"{source}: " + "; ".join(lines)) from None


def load_config(path: str | Path) -> Config:
    """Read and validate the YAML file at ``path``; raises ConfigError (one line: a syntax error or a
    ``!!python`` tag names the line and column; too deep a nesting is refused, not a RecursionError).

    A relative ``data_dir`` (also the default ``data``) is taken relative to the file's directory.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(
            f"cannot read config file {path}: {err.strerror}; pass an existing YAML file"
        ) from None
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{path} is not a UTF-8 text file (byte {err.start} cannot be decoded); pass a YAML file"
        ) from None
    too_deep = (
        f"{path} nests lists or mappings too deeply to read; a config needs only a few levels: "
        "check the file's brackets and indentation"
    )
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise ConfigError(_yaml_error(path, err)) from None
    except RecursionError:
        raise ConfigError(too_deep) from None
    if isinstance(data, dict) and isinstance(data.get("data_dir", "data"), str):
        # a relative data_dir is relative to the config file, whatever the working directory
        data = {**data, "data_dir": str(path.parent / data.get("data_dir", "data"))}
    try:
        return parse_config(data, str(path))
    except RecursionError:
        raise ConfigError(too_deep) from None


def _yaml_error(path: Path, err: yaml.YAMLError) -> str:
    """One line: the file, line and column (1-based) and the problem; a tag such as ``!!python/object``
    is named as not allowed."""
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    where = f"{path} line {mark.line + 1}, column {mark.column + 1}" if mark is not None else str(path)
    problem = " ".join(str(getattr(err, "problem", None) or err).split())
    tag = re.search(r"constructor for the tag '([^']*)'", problem)
    if isinstance(err, yaml.constructor.ConstructorError) and tag:
        shown = tag.group(1).replace("tag:yaml.org,2002:", "!!")
        return (
            f"{where}: the tag {shown} is not allowed; a config holds plain mappings, lists, strings and "
            "numbers: remove the tag"
        )
    context, context_mark = getattr(err, "context", None), getattr(err, "context_mark", None)
    if context and context_mark is not None and context_mark is not mark:
        at = f"line {context_mark.line + 1}, column {context_mark.column + 1}"
        problem += f" ({' '.join(str(context).split())} at {at})"
    elif context:
        problem += f" ({' '.join(str(context).split())})"
    return f"{where} is not valid YAML: {problem}; fix the file there"
