"""The config applied: ``apply_config(config, registry)`` syncs what the config declares into the
registry, ``open_registry(config)`` opens the registry the config names (errors say what to fix), and
``engine_options(config)`` / ``remote_write_buffer_dir(config)`` translate the ``store`` key for the store,
``egress_of(config)`` the ``network`` key and the declared targets into the network policies."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from servemetrics.config.load import ConfigError
from servemetrics.config.model import (
    Config,
    EnvironmentConfig,
    ModelConfig,
    PromotionConfig,
    TrainerDeploymentConfig,
)
from servemetrics.config.model_apis import LimitConfig, ModelApiConfig
from servemetrics.config.validators import check_registry_url
from servemetrics.netpolicy import TARGETS_ALLOW, WEBHOOKS_ALLOW, Egress, make_policy, origin
from servemetrics.registry.model_apis import DEFAULT_TEAM, RateLimits
from servemetrics.registry.pepper import KeyPepperError
from servemetrics.registry.records import RegistryError, TrainerNode, TrainerTarget
from servemetrics.registry.registry import Registry

if TYPE_CHECKING:
    from servemetrics.store.prometheus import EngineOptions


def apply_config(config: Config, registry: Registry) -> None:
    """Sync the file's organizations, teams, keys, models, deployments, replicas, targets, environments,
    trainers and Model APIs (those of an organization absent from the file are deleted).

    Idempotent: applying the same config twice changes nothing. Config-declared keys absent from the file
    are deleted (keys created through the API are kept). Promotions are the environment's history: each
    one not yet recorded is applied in time order; a promotion of the deployment whose rolling promotion
    is running is a step of it (100 completes it). Raises ConfigError when a new promotion is older than
    the environment's latest recorded one (history can only be appended), or when the registry refuses a
    change (e.g. a deployment id taken by another model). Transactional: a config that fails changes
    nothing.
    """
    try:
        with registry.transaction() as tx:
            _apply(config, tx)
    except RegistryError as err:
        raise ConfigError(f"cannot apply the config to the registry: {err}") from None


PEPPER_ENV = "SERVEMETRICS_KEY_PEPPER"
"""The environment variable that gives the API key pepper (instead of the registry's own copy)."""
MIN_PEPPER_CHARS = 32


def key_pepper(config: Config) -> str | None:
    """The API key pepper given from outside the registry: ``$SERVEMETRICS_KEY_PEPPER``, else the text of
    ``key_pepper_file`` (surrounding whitespace stripped), else None (the registry's own).

    Raises ConfigError when both are given, the file cannot be read, or the pepper has fewer than
    ``MIN_PEPPER_CHARS`` characters.
    """
    env = os.environ.get(PEPPER_ENV)
    if env is not None and config.key_pepper_file is not None:
        raise ConfigError(f"{PEPPER_ENV} and key_pepper_file both give a key pepper; give one of them")
    if env is None and config.key_pepper_file is None:
        return None
    source, pepper = PEPPER_ENV, env
    if pepper is None:
        source = f"key_pepper_file {config.key_pepper_file}"
        try:
            pepper = Path(str(config.key_pepper_file)).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise ConfigError(f"cannot read {source}: {err}; point it at a readable text file") from None
    pepper = pepper.strip()
    if len(pepper) < MIN_PEPPER_CHARS:
        raise ConfigError(
            f"{source} holds a key pepper of {len(pepper)} characters; give at least {MIN_PEPPER_CHARS} "
            "random ones (e.g. the output of: openssl rand -hex 32)"
        )
    return pepper


def open_registry(config: Config) -> Registry:
    """Create ``data_dir`` (and the store's ``buffer_dir`` for ``kind: prometheus``) and open (and
    migrate) the registry at ``registry_url``.

    Raises ConfigError when ``data_dir`` or ``store.buffer_dir`` is not a directory or cannot be created,
    the URL is not a supported SQLAlchemy URL, the database cannot be reached, or the key pepper
    (``key_pepper``) does not fit the registry.
    """
    _make_dir(Path(config.data_dir), "data_dir")
    buffer_dir = remote_write_buffer_dir(config)
    if buffer_dir is not None:
        _make_dir(buffer_dir, "store.buffer_dir")
    try:
        url = check_registry_url(str(config.registry_url))
    except ValueError as err:
        raise ConfigError(f"registry_url: {err}") from None
    shown = make_url(url).render_as_string(hide_password=True)
    pepper = key_pepper(config)
    try:
        return Registry.open(url, pepper=pepper)
    except KeyPepperError as err:
        raise ConfigError(f"registry {shown}: {err}") from None
    except OSError as err:
        raise ConfigError(f"cannot open the registry at {shown}: {err}; check the path is writable") from None
    except SQLAlchemyError as err:
        reason = str(getattr(err, "orig", None) or err).strip().splitlines()[0]
        hint = (
            "check that PostgreSQL is running there and that the URL's host, port, user, password and "
            "database are right"
            if make_url(url).get_backend_name() == "postgresql"
            else "check the path is a writable SQLite file"
        )
        raise ConfigError(f"cannot open the registry at {shown} ({reason}); {hint}") from None


def engine_options(config: Config) -> EngineOptions | None:
    """The engine the config's ``store`` names (None for the embedded DuckDB store). A relative
    ``buffer_dir`` is relative to ``data_dir``; the default is ``<data_dir>/remote_write_buffer``."""
    s = config.store
    if s.kind != "prometheus":
        return None  # before the imports: the engine store's modules cost ~0.1 s of every import call
    from servemetrics.store.prometheus import EngineOptions
    from servemetrics.store.promql import Flavor

    assert s.flavor is not None and s.query_url is not None and s.remote_write_url is not None
    headers = dict(s.tenant_header or {})
    if s.bearer_token is not None:
        headers["Authorization"] = f"Bearer {s.bearer_token.get_secret_value()}"
    auth = (s.basic_auth.username, s.basic_auth.password.get_secret_value()) if s.basic_auth else None
    buffer_dir = remote_write_buffer_dir(config)
    assert buffer_dir is not None
    return EngineOptions(Flavor(s.flavor), s.query_url, s.remote_write_url, buffer_dir, headers, auth)


def egress_of(config: Config) -> Egress:
    """The service's network policies (``netpolicy``): ``network.targets_allow`` for replica targets
    registered through the API, ``network.webhooks_allow`` for webhooks (the private ranges refused
    too), this service's ``listen`` address refused by both, and every replica and trainer target the
    file declares trusted for its deployment (blocking: resolves this host's name once)."""
    listen = (config.host, config.port)
    declared = {
        (d.id, origin(url))
        for m in config.models
        for d in m.deployments
        for r in d.replicas
        for url in r.targets
    }
    declared |= {(t.id, origin(tt.url)) for t in config.loops for n in t.nodes for tt in n.targets}
    return Egress(
        make_policy(TARGETS_ALLOW, config.network.targets_allow, listen, private_too=False),
        make_policy(WEBHOOKS_ALLOW, config.network.webhooks_allow, listen, private_too=True),
        frozenset(declared),
    )


def remote_write_buffer_dir(config: Config) -> Path | None:
    """The remote_write buffer directory of a ``kind: prometheus`` store (``store.buffer_dir``, relative to
    ``data_dir``; default ``<data_dir>/remote_write_buffer``), None for the embedded store."""
    return config.store.buffer_path(config.data_dir)


def _make_dir(path: Path, key: str) -> None:
    """Create directory ``path`` (the value of config key ``key``); ConfigError when it is a file or
    cannot be created."""
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{key} {path} exists and is not a directory; point {key} at a directory")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(
            f"cannot create {key} {path}: {err.strerror}; choose a writable directory"
        ) from None


def _apply(config: Config, registry: Registry) -> None:
    for org in config.organizations:
        registry.tenancy.ensure_organization(org.name)
        for team in org.teams:
            registry.model_apis.ensure_team(org.name, team.id, team.name)
        for key in org.api_keys:
            registry.tenancy.add_api_key_digest(
                org.name,
                key.digest,
                key.type,
                model_ids=key.model_ids,
                name=key.name,
                source="config",
                team_id=key.team,
            )
        registry.tenancy.prune_config_keys(org.name, [key.digest for key in org.api_keys])
    for model in config.models:
        _apply_model(model, registry)
    for trainer in config.loops:
        _apply_trainer(trainer, registry)
    for org in config.organizations:
        apis = [a for a in config.model_apis if a.organization == org.name]
        for api in apis:
            _apply_model_api(api, registry)
        registry.model_apis.prune_model_apis(org.name, [a.name for a in apis])


def _limits(limit: LimitConfig) -> RateLimits:
    return RateLimits(limit.requests_per_minute, limit.tokens_per_minute)


def _apply_model_api(api: ModelApiConfig, registry: Registry) -> None:
    """Create or replace the Model API (its limits: ``limits`` for every team, ``team_limits`` per team)."""
    limits = {DEFAULT_TEAM: _limits(api.limits)} | {t: _limits(v) for t, v in api.team_limits.items()}
    registry.model_apis.put_model_api(
        api.organization,
        api.name,
        model_id=api.model,
        environment=api.environment,
        deployment_id=api.deployment,
        display_name=api.display_name,
        description=api.description,
        context_length=api.context_length,
        limits=limits,
    )


def _apply_trainer(trainer: TrainerDeploymentConfig, registry: Registry) -> None:
    nodes = [
        TrainerNode(
            n.id,
            n.role,
            tuple(n.gpu_ranks),
            n.pod,
            n.namespace,
            tuple(TrainerTarget(tg.url, tg.kind) for tg in n.targets),
        )
        for n in trainer.nodes
    ]
    current = registry.trainers.trainer_deployment(trainer.id, None)
    sampler = trainer.sampler
    wanted = (
        trainer.name or trainer.id,
        sampler.model if sampler else None,
        sampler.deployment if sampler else None,
        tuple(sorted(nodes, key=lambda n: n.role != "leader")),  # as the registry returns them
    )
    if current is not None and wanted == (
        current.name,
        current.sampler_model_id,
        current.sampler_deployment_id,
        current.nodes,
    ):
        return  # unchanged: applying the same config twice changes nothing
    registry.trainers.put_trainer_deployment(
        trainer.organization,
        trainer.id,
        wanted[0],
        nodes,
        sampler_model_id=wanted[1],
        sampler_deployment_id=wanted[2],
    )


def _first_promotion_ms(model: ModelConfig, deployment: str | None = None) -> int | None:
    """The earliest promotion time in the file (of ``deployment``, or of any), so that a model, deployment
    or environment first seen now is dated no later than the history the file declares for it."""
    times = [p.at for e in model.environments for p in e.promotions if deployment in (None, p.deployment)]
    return min(times, default=None)


def _apply_model(model: ModelConfig, registry: Registry) -> None:
    registry.tenancy.ensure_model(
        model.id, model.name or model.id, model.organization, at_ms=_first_promotion_ms(model)
    )
    for dep in model.deployments:
        it = dep.instance_type
        if registry.deployments.deployment(model.id, dep.id) is None:
            registry.deployments.create_deployment(
                model.id,
                dep.id,
                dep.name or dep.id,
                gpu_type=it.gpu_type,
                gpu_count=it.gpu_count,
                instance_type=it.name,
                at_ms=_first_promotion_ms(model, dep.id),
            )
        else:
            registry.deployments.rename_deployment(model.id, dep.id, dep.name or dep.id)
            registry.deployments.set_instance_type(model.id, dep.id, it.gpu_type, it.gpu_count, it.name)
        for replica in dep.replicas:
            registry.deployments.ensure_replica(model.id, dep.id, replica.id)
            for url in replica.targets:
                registry.deployments.ensure_target(model.id, dep.id, replica.id, url)
    for env in model.environments:
        _apply_environment(model.id, env, registry)


def _apply_environment(model_id: str, env: EnvironmentConfig, registry: Registry) -> None:
    if registry.environments.environment(model_id, env.name) is None:
        first = min((p.at for p in env.promotions), default=None)
        registry.environments.create_environment(
            model_id, env.name, promotion_settings={"rolling_deploy": env.rolling_deploy}, at_ms=first
        )
    else:
        registry.environments.update_environment(
            model_id, env.name, promotion_settings={"rolling_deploy": env.rolling_deploy}
        )
    recorded: set[tuple[str, int]] = set()
    latest = None
    for rec in registry.environments.promotions(model_id, env.name):
        for at, _action, _percent in registry.environments.promotion_steps(rec.id):
            recorded.add((rec.deployment_id, at))
            latest = at if latest is None else max(latest, at)
    for p in sorted(env.promotions, key=lambda p: p.at):
        if (p.deployment, p.at) in recorded:
            continue
        if latest is not None and p.at < latest:
            raise ConfigError(
                f"models[{model_id}].environments[{env.name}]: the promotion of {p.deployment!r} at "
                f"{p.at} ms is older than the latest recorded change ({latest} ms); promotions "
                "can only be appended to the history"
            )
        _apply_promotion(registry, model_id, env.name, p)
        latest = p.at


def _apply_promotion(registry: Registry, model_id: str, env_name: str, p: PromotionConfig) -> None:
    info = registry.environments.environment(model_id, env_name)
    assert info is not None
    running = info.in_progress_promotion
    try:
        if running is not None and running.deployment_id == p.deployment:
            registry.environments.set_promotion_percent(model_id, env_name, p.percent, at_ms=p.at)
        elif running is None and info.current_deployment_id == p.deployment:
            return
        else:
            registry.environments.promote(
                model_id,
                env_name,
                p.deployment,
                percent=p.percent,
                rolling=p.percent < 100,
                at_ms=p.at,
                supersede=True,
            )
    except RegistryError as err:
        raise ConfigError(f"models[{model_id}].environments[{env_name}]: {err}") from None
