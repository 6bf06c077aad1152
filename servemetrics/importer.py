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
from servemetrics.samples import MAX_FUTURE_MS
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


def via_service(
    path: Path, url: str, api_key: str, model_id: str, deployment_id: str, replica: str, progress: Progress
) -> int:
    """Upload ``path`` to ``POST {url}/v1/import``; return the samples stored.

    Raises:
        ImportFailed: the service is unreachable or answered an error (its message is included).
    """
    params = {"model_id": model_id, "deployment_id": deployment_id, "replica": replica}
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


def into_data_dir(
    config: Config, path: Path, model_id: str, deployment_id: str, replica: str, progress: Progress
) -> int:
    """Import ``path`` into ``config.data_dir`` directly (no service may hold it); return samples stored.

    Raises:
        ImportFailed: unknown model / deployment, the data directory is in use, or the file is invalid.
    """
    Path(config.data_dir).mkdir(parents=True, exist_ok=True)
    registry = Registry.open(str(config.registry_url), pepper=key_pepper(config))
    try:
        apply_config(config, registry)
        labels = _replica_labels(config, registry, model_id, deployment_id, replica)
        store = _open_store(config)
        try:
            return _append_file(store, path, labels, progress)
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
    if registry.deployments.deployment(model_id, deployment_id) is None:
        raise ImportFailed(
            f"no deployment {deployment_id!r} of model {model_id!r} in {config.data_dir}; "
            "declare it in the config's models section"
        )
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


def _append_file(store: Store, path: Path, labels: dict[str, str], progress: Progress) -> int:
    """Append the file's batches to ``store``; the samples stored. ImportFailed (naming how many were
    stored) for an invalid file or a sample over 10 minutes in the future."""
    stored = 0
    try:
        for batch in iter_backfill(path, labels, progress=progress):
            if len(batch) and int(batch.ts_ms.max()) >= wall_clock_ms() + MAX_FUTURE_MS:
                raise ImportFailed(
                    f"stopped after {stored} samples: a sample is over 10 minutes in the future; "
                    "backfill timestamps are in seconds"
                )
            stored += store.append(batch)
    except (BackfillError, UnicodeDecodeError) as exc:
        raise ImportFailed(f"stopped after {stored} samples: {exc}") from exc
    return stored
