"""Backfill an OpenMetrics file: through a running service (HTTP) or straight into a data directory.

Used by ``servemetrics import``; the parsing is ``ingest.backfill.iter_backfill``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import httpx

from servemetrics.config import Config, apply_config, engine_options, key_pepper
from servemetrics.ingest.backfill import BackfillError, iter_backfill
from servemetrics.registry import Registry
from servemetrics.samples import MAX_FUTURE_MS, SampleBatch
from servemetrics.timeutil import wall_clock_ms

if TYPE_CHECKING:
    from servemetrics.store.base import Store

Progress = Callable[[int, int | None], None]
CHUNK = 1 << 20
IMPORT_FLUSH_S = 600.0
"""With an engine store, how long ``into_data_dir`` waits for the engine to take every sample."""


class ImportFailed(RuntimeError):
    """The import could not run or stopped; the message says why and what to do."""


def _chunks(path: Path, progress: Progress) -> Iterator[bytes]:
    total = os.path.getsize(path)
    done = 0
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            done += len(chunk)
            progress(done, total)
            yield chunk


Replica = tuple[str, str, str] | None
"""(model id, deployment id, replica id) every sample of a file belongs to, or ``None``: each series names
its own in its ``model_id``, ``deployment_id`` and ``replica`` labels (a file of many replicas, such as
an export of a Prometheus or a whole W1 file)."""


def via_service(path: Path, url: str, api_key: str, replica: Replica, progress: Progress) -> int:
    """Upload ``path`` to ``POST {url}/v1/import`` as the samples of ``replica``; return the samples stored.

    Raises:
        ImportFailed: the service is unreachable or answered an error (its message is included).
    """
    params = (
        {} if replica is None else dict(zip(("model_id", "deployment_id", "replica"), replica, strict=True))
    )
    try:
        resp = httpx.post(
            f"{url.rstrip('/')}/v1/import",
            params=params,
            content=_chunks(path, progress),
            headers={"Authorization": f"Api-Key {api_key}"},
            timeout=None,
        )
    except httpx.HTTPError as exc:
        raise ImportFailed(f"cannot reach {url}: {exc}") from exc
    if resp.status_code != 200:
        try:
            message = resp.json().get("error", resp.text)
        except ValueError:
            message = resp.text
        raise ImportFailed(f"the service answered {resp.status_code}: {message}")
    return int(resp.json()["samples"])


def into_data_dir(config: Config, path: Path, replica: Replica, progress: Progress) -> int:
    """Import ``path`` into ``config.data_dir`` directly (no service may hold it) as the samples of
    ``replica``; return the samples stored.

    Raises:
        ImportFailed: unknown model / deployment (``replica``'s, or a series' labels naming one the
            config does not declare, or none), the data directory is in use, or the file is invalid.
    """
    Path(config.data_dir).mkdir(parents=True, exist_ok=True)
    registry = Registry.open(str(config.registry_url), pepper=key_pepper(config))
    try:
        apply_config(config, registry)
        labels = None if replica is None else _replica_labels(config, registry, *replica)
        store = _open_store(config)
        try:
            return _append_file(store, path, labels, progress, _DeclaredDeployments(config, registry))
        finally:
            flush = getattr(store, "flush", None)  # an engine store: wait for the engine to take it all
            if flush is not None:
                flush(IMPORT_FLUSH_S)  # what is left stays in the buffer; the next `serve` sends it
            store.close()
    finally:
        registry.close()


def _replica_labels(
    config: Config, registry: Registry, model_id: str, deployment_id: str, replica: str
) -> dict[str, str]:
    """The registry labels of the imported replica's samples; ImportFailed when the config declares no
    such deployment."""
    _DeclaredDeployments(config, registry).check(model_id, deployment_id)
    model_name = next((m.name or m.id for m in config.models if m.id == model_id), model_id)
    return {
        "model_id": model_id,
        "model_name": model_name,
        "deployment_id": deployment_id,
        "replica": replica,
    }


def _open_store(config: Config) -> Store:
    """The config's store; ImportFailed when it cannot be opened (e.g. a service holds the DuckDB file)."""
    from servemetrics.store import open_store

    try:
        return open_store(Path(config.data_dir), engine_options(config))
    except Exception as exc:  # DuckDB raises IOException when another process holds the file
        raise ImportFailed(
            f"cannot open the store in {config.data_dir} ({exc}); if a service is "
            "running on it, import through it with --url and --api-key"
        ) from exc


class _DeclaredDeployments:
    """Which (model id, deployment id) pairs the config declares, asked of the registry once each."""

    def __init__(self, config: Config, registry: Registry) -> None:
        self.config, self.registry = config, registry
        self.known: set[tuple[str, str]] = set()

    def check(self, model_id: str, deployment_id: str) -> None:
        """Nothing when the config declares the deployment; ImportFailed saying what to declare."""
        if (model_id, deployment_id) in self.known:
            return
        if not model_id or not deployment_id:
            raise ImportFailed(
                "a series has no model_id or deployment_id label; give --model, --deployment and "
                "--replica for a file of one replica, or label every series with them"
            )
        if self.registry.deployments.deployment(model_id, deployment_id) is None:
            raise ImportFailed(
                f"no deployment {deployment_id!r} of model {model_id!r} in {self.config.data_dir}; "
                "declare it in the config's models section"
            )
        self.known.add((model_id, deployment_id))

    def check_batch(self, batch: SampleBatch) -> None:
        """``check`` of every deployment a batch's series name in their labels."""
        for _, labels in batch.series:
            lab = dict(labels)
            self.check(lab.get("model_id", ""), lab.get("deployment_id", ""))


def _append_file(
    store: Store,
    path: Path,
    labels: dict[str, str] | None,
    progress: Progress,
    declared: _DeclaredDeployments | None = None,
) -> int:
    """Append the file's batches to ``store`` (``labels`` on every sample, or each series' own, checked
    against ``declared`` before its batch is stored); the samples stored. ImportFailed (naming how many
    were stored) for an invalid file, an undeclared deployment or a sample over 10 minutes ahead."""
    stored = 0
    try:
        for batch in iter_backfill(path, labels, progress=progress):
            if len(batch) and int(batch.ts_ms.max()) >= wall_clock_ms() + MAX_FUTURE_MS:
                raise ImportFailed(
                    f"stopped after {stored} samples: a sample is over 10 minutes in the future; "
                    "backfill timestamps are in seconds"
                )
            if labels is None:
                assert declared is not None, "a file of many replicas needs the declared deployments"
                try:
                    declared.check_batch(batch)
                except ImportFailed as exc:
                    raise ImportFailed(f"stopped after {stored} samples: {exc}") from None
            stored += store.append(batch)
    except (BackfillError, UnicodeDecodeError) as exc:
        raise ImportFailed(f"stopped after {stored} samples: {exc}") from exc
    return stored
