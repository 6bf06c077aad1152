"""The config file's pydantic models: ``Config`` (the whole file) and one model per mapping in it.

The keys, defaults and duration syntax are in the package docstring (``servemetrics/config/__init__.py``);
the value checks are in ``config.validators``, reading and rendering errors in ``config.load``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    SecretStr,
    field_validator,
    model_validator,
)

from servemetrics.config.model_apis import ModelApiConfig, TeamConfig, check_model_apis
from servemetrics.config.operations import (
    ApiRateLimitConfig,
    AuthRateLimitConfig,
    GatewayConfig,
    HealthConfig,
    IngestConfig,
    LimitsConfig,
    MiB,
    NetworkConfig,
    ReadsConfig,
    ServerConfig,
)
from servemetrics.config.validators import (
    DeploymentId,
    Duration,
    EnvironmentName,
    HttpUrl,
    ListenAddress,
    ModelId,
    NodeId,
    ReplicaId,
    Strict,
    TargetUrl,
    bounded,
    byte_size,
    check_organization,
    check_registry_url,
    check_tenant_header,
    no_duplicates,
    parse_duration,
    rfc3339_ms,
    secret_header,
    unknown_name,
    username,
)
from servemetrics.registry import keys as k
from servemetrics.timeutil import iso_ms

MAX_SCRAPE_INTERVAL_S = 3600.0
"""``scrape_interval`` and ``scrape_timeout`` are at most 1 h."""
MAX_RETENTION_S = 3650 * 86400.0
"""``retention`` is at most 3650d (10 years)."""
MAX_GPU_RANK = 1023
"""The largest GPU rank (DCGM ``gpu`` index) a trainer node may declare."""
SCRAPE_LIMITS = (
    "body_size_limit",
    "sample_limit",
    "label_limit",
    "label_name_length_limit",
    "label_value_length_limit",
    "custom_series_limit",
)
"""The top-level keys that limit one scrape, as Prometheus names them (docs/configuration.md)."""


class ApiKeyConfig(Strict):
    """A key of an organization: the plain ``key`` (hashed before it is stored), ``type``, scope."""

    key: SecretStr = Field(min_length=1)
    type: Annotated[str, BeforeValidator(lambda v: str(v).strip().upper().replace("-", "_"))]
    model_ids: list[str] | None = None
    name: str | None = None
    team: str | None = None
    """The team of the organization's ``teams`` the key belongs to (docs/model-apis.md)."""

    @model_validator(mode="after")
    def _check(self) -> ApiKeyConfig:
        k.check_type(self.type, self.model_ids)
        return self

    @property
    def digest(self) -> str:
        """SHA-256 hex of the key (what the registry hashes again with its pepper)."""
        return k.digest(self.key.get_secret_value())


class OrganizationConfig(Strict):
    """An organization, its teams and its API keys (a key may name one of the teams)."""

    name: str = Field(min_length=1)
    teams: list[TeamConfig] = []
    api_keys: list[ApiKeyConfig] = []

    @model_validator(mode="after")
    def _check(self) -> OrganizationConfig:
        teams = [team.id for team in self.teams]
        no_duplicates(teams, f"team id in organization {self.name!r}")
        for j, key in enumerate(self.api_keys):
            if key.team is not None and key.team not in teams:
                raise unknown_name(
                    f"api_keys[{j}] of organization {self.name!r} names team {key.team!r}, which is not "
                    "under its teams",
                    "declare it there or use one of",
                    teams,
                )
        return self


class InstanceTypeConfig(Strict):
    """GPU type and count (``gpu_count: 0`` or no ``gpu_type`` = CPU); ``name`` defaults to ``1xH100``."""

    gpu_type: str | None = None
    gpu_count: int = Field(default=0, ge=0)
    name: str | None = None


class ReplicaConfig(Strict):
    """A replica and its ``/metrics`` URLs."""

    id: ReplicaId
    targets: list[TargetUrl] = []


class DeploymentConfig(Strict):
    """A deployment of a model (``production`` and ``development`` are reserved ids)."""

    id: DeploymentId
    name: str | None = None
    instance_type: InstanceTypeConfig = InstanceTypeConfig()
    replicas: list[ReplicaConfig] = []

    @model_validator(mode="after")
    def _check(self) -> DeploymentConfig:
        no_duplicates([r.id for r in self.replicas], "replica id")
        return self


class PromotionConfig(Strict):
    """One entry of an environment's history: ``deployment`` serves ``percent`` % from ``at``."""

    deployment: str
    at: Annotated[int, BeforeValidator(rfc3339_ms)]  # epoch ms
    percent: int = Field(default=100, ge=1, le=100)


class EnvironmentConfig(Strict):
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


class ModelConfig(Strict):
    """A model of an organization with its deployments and environments."""

    id: ModelId
    name: str | None = None
    organization: str
    deployments: list[DeploymentConfig] = []
    environments: list[EnvironmentConfig] = []

    @model_validator(mode="after")
    def _check(self) -> ModelConfig:
        ids = [d.id for d in self.deployments]
        no_duplicates(ids, "deployment id")
        no_duplicates([e.name for e in self.environments], "environment name")
        for env in self.environments:
            for p in env.promotions:
                if p.deployment not in ids:
                    raise unknown_name(
                        f"environment {env.name!r} promotes unknown deployment {p.deployment!r}",
                        "use one of the model's deployments",
                        ids,
                    )
        return self


class TrainerTargetConfig(Strict):
    """A trainer node's target: ``url`` and ``kind`` (dcgm, kubelet, kubelet_summary, node_exporter,
    requests; docs/loops.md)."""

    url: TargetUrl
    kind: Literal["dcgm", "kubelet", "kubelet_summary", "node_exporter", "requests"]


class TrainerNodeConfig(Strict):
    """A node of a trainer deployment: ``role`` leader or worker, its GPU ranks (distinct integers from 0
    to ``MAX_GPU_RANK``), pod and targets (each URL once)."""

    id: NodeId
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


class SamplerConfig(Strict):
    """The sampler half of a trainer deployment: a model (and deployment) declared under ``models``."""

    model: str
    deployment: str | None = None


class TrainerDeploymentConfig(Strict):
    """A trainer (Loops) deployment under ``loops``: its organization, nodes and sampler."""

    id: DeploymentId
    name: str | None = None
    organization: str
    sampler: SamplerConfig | None = None
    nodes: list[TrainerNodeConfig] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> TrainerDeploymentConfig:
        no_duplicates([n.id for n in self.nodes], "node id")
        leaders = [n.id for n in self.nodes if n.role == "leader"]
        if len(leaders) != 1:
            raise ValueError(
                f"trainer deployment {self.id!r} has {len(leaders)} leader nodes; give exactly one node "
                "`role: leader` (the others `role: worker`)"
            )
        return self


class BasicAuthConfig(Strict):
    """HTTP basic auth for the engine (reads and remote_write): printable ASCII ``username`` (no ``:``)
    and ``password``, neither empty."""

    username: Annotated[str, AfterValidator(username)]
    password: Annotated[
        SecretStr, secret_header("password", "write the engine's password in printable ASCII, on one line")
    ]


class StoreConfig(Strict):
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
            secret_header("bearer_token", "write the engine's token in printable ASCII, on one line"),
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
        check_tenant_header(self.tenant_header or {})
        return self

    def buffer_path(self, data_dir: Path) -> Path | None:
        """The remote_write buffer directory of a ``kind: prometheus`` store (``buffer_dir``, relative to
        ``data_dir``; default ``<data_dir>/remote_write_buffer``), None for the embedded store."""
        if self.kind != "prometheus":
            return None
        return Path(data_dir) / (self.buffer_dir or "remote_write_buffer")


class Config(Strict):
    """The whole file. ``registry_url`` is filled from ``data_dir`` when absent."""

    listen: ListenAddress = ListenAddress("127.0.0.1:8321")
    data_dir: Path = Path("./data")
    scrape_interval: Annotated[Duration, bounded((1.0, "1s"), (MAX_SCRAPE_INTERVAL_S, "1h"))] = 15.0
    scrape_timeout: Annotated[Duration, bounded(None, (MAX_SCRAPE_INTERVAL_S, "1h"))] = 10.0
    body_size_limit: Annotated[int, byte_size(1024, 1 << 34)] = 64 * MiB
    sample_limit: int = Field(default=1_000_000, ge=0, le=100_000_000)
    label_limit: int = Field(default=64, ge=0, le=10_000)
    label_name_length_limit: int = Field(default=1024, ge=0, le=1 << 20)
    label_value_length_limit: int = Field(default=16384, ge=0, le=1 << 24)
    custom_series_limit: int = Field(default=1000, ge=0, le=1_000_000)
    retention: Annotated[Duration, bounded((3600.0, "1h"), (MAX_RETENTION_S, "3650d (10 years)"))] = (
        15 * 86400.0
    )
    registry_url: str | None = None
    store: StoreConfig = StoreConfig()
    organizations: list[OrganizationConfig] = []
    models: list[ModelConfig] = []
    loops: list[TrainerDeploymentConfig] = []
    model_apis: list[ModelApiConfig] = []
    network: NetworkConfig = NetworkConfig()
    limits: LimitsConfig = LimitsConfig()
    auth_rate_limit: AuthRateLimitConfig = AuthRateLimitConfig()
    api_rate_limit: ApiRateLimitConfig = ApiRateLimitConfig()
    ingest: IngestConfig = IngestConfig()
    reads: ReadsConfig = ReadsConfig()
    server: ServerConfig = ServerConfig()
    health: HealthConfig = HealthConfig()
    gateway: GatewayConfig = GatewayConfig()
    key_pepper_file: Path | None = None

    @field_validator("registry_url")
    @classmethod
    def _registry_url(cls, value: str | None) -> str | None:
        return None if value is None else check_registry_url(value)

    @model_validator(mode="before")
    @classmethod
    def _default_timeout(cls, data: Any) -> Any:
        """``scrape_timeout`` left out: 10 s, or ``scrape_interval`` when that is shorter (Prometheus'
        rule for a job without its own timeout), so ``scrape_interval: 5s`` alone is a valid config."""
        if isinstance(data, dict) and "scrape_timeout" not in data and "scrape_interval" in data:
            try:
                shorter = parse_duration(data["scrape_interval"]) < 10.0
            except ValueError:
                return data  # the field's own check says what to write
            if shorter:
                return {**data, "scrape_timeout": data["scrape_interval"]}
        return data

    @model_validator(mode="after")
    def _check(self) -> Config:
        if self.registry_url is None:
            object.__setattr__(self, "registry_url", f"sqlite:///{self.data_dir / 'registry.sqlite3'}")
        buffer_dir = self.store.buffer_path(self.data_dir)
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
        no_duplicates(orgs, "organization name")
        no_duplicates([m.id for m in self.models], "model id")
        no_duplicates([d.id for m in self.models for d in m.deployments], "deployment id")
        self._check_keys()
        for model in self.models:
            check_organization(f"model {model.id!r}", model.organization, orgs)
        return self

    @model_validator(mode="after")
    def _check_loops(self) -> Config:
        """Trainer ids are unique and no model deployment's; organizations and samplers are declared."""
        orgs = [o.name for o in self.organizations]
        no_duplicates([lp.id for lp in self.loops], "trainer deployment id")
        deployments = {d.id: m for m in self.models for d in m.deployments}
        models = {m.id: m for m in self.models}
        for lp in self.loops:
            where = f"loops[{lp.id}]"
            if lp.id in deployments:
                raise ValueError(
                    f"{where}: {lp.id!r} is a model deployment's id; give the trainer another id"
                )
            check_organization(where, lp.organization, orgs)
            if lp.sampler is None:
                continue
            model = models.get(lp.sampler.model)
            if model is None or model.organization != lp.organization:
                raise ValueError(
                    f"{where}.sampler.model {lp.sampler.model!r} is not a model of organization "
                    f"{lp.organization!r} under models; declare it there"
                )
            if lp.sampler.deployment is not None and deployments.get(lp.sampler.deployment) is not model:
                raise unknown_name(
                    f"{where}.sampler.deployment {lp.sampler.deployment!r} is not a deployment of model "
                    f"{model.id!r}",
                    "use one of",
                    (d.id for d in model.deployments),
                )
        return self

    @model_validator(mode="after")
    def _check_model_apis(self) -> Config:
        """``config.model_apis.check_model_apis``: each Model API's organization, model, server, teams."""
        check_model_apis(self.model_apis, self.organizations, self.models)
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
                    raise unknown_name(
                        f"{where} is scoped to model_ids {', '.join(unknown)}, which are not under models",
                        "declare them there or use some of",
                        models,
                    )

    def scrape_limits(self) -> dict[str, int]:
        """The limits of one scrape by name (``ingest.scrape_limits.ScrapeLimits`` takes them)."""
        return {k: getattr(self, k) for k in SCRAPE_LIMITS}

    @property
    def host(self) -> str:
        """Host part of ``listen``."""
        return self.listen.host

    @property
    def port(self) -> int:
        """Port part of ``listen``."""
        return self.listen.port
