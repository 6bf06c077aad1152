"""Push ingest: Prometheus remote_write 1.0 (``POST /api/v1/write``) and OpenMetrics backfill upload
(``POST /v1/import``, used by ``servemetrics import --url``).

Both need a key that may manage the organization's models (``WORKSPACE_MANAGE_ALL`` or ``PERSONAL``).
Every sample must belong to a model of the caller's organization; nothing of a rejected request is
stored.
"""

from __future__ import annotations

import tempfile
from typing import Annotated

import numpy as np
from fastapi import APIRouter, Query, Request, Response

from servemetrics.api.deps import (
    DEPLOYMENT_ALIASES,
    ManageAuth,
    RegistryDep,
    ServiceDep,
    resolve_deployment,
    resolve_model,
)
from servemetrics.api.errors import ApiError, bad_request
from servemetrics.api.ingest_limits import check_sample_count, count_sample_lines
from servemetrics.api.service import IMPORT_SPOOL, Service
from servemetrics.ingest.adapters.columnar import adapt_batch_by_target
from servemetrics.ingest.backfill import BackfillError, iter_backfill
from servemetrics.ingest.exposition import normalise_le
from servemetrics.labels import TARGET_LABELS
from servemetrics.registry import KeyInfo, Registry
from servemetrics.remote_write import RemoteWriteError, RemoteWriteTooLarge, decode_write_batch
from servemetrics.samples import MAX_FUTURE_MS, SampleBatch
from servemetrics.types import Labels, SeriesKey, labels_of

router = APIRouter(tags=["ingest"])


def _series_text(name: str, labels: dict[str, str]) -> str:
    quoted = (v.replace("\\", "\\\\").replace('"', '\\"') for v in labels.values())
    return name + "{" + ",".join(f'{k}="{v}"' for k, v in zip(labels, quoted, strict=True)) + "}"


def _checked_buckets(batch: SampleBatch) -> SampleBatch:
    """``batch`` with every ``le`` written by ``exposition.normalise_le``, the scraper's and the importer's
    normaliser (``1`` -> ``1.0``, ``+inf`` -> ``+Inf``); once per series, and series that become one
    (``le="1"`` and ``le="1.0"``) are merged.

    Raises:
        RemoteWriteError: a ``_bucket`` series without ``le``, or an ``le`` that is not a number
            (``series NAME{…}: bucket bound le='…' is not a number``).
    """
    keys = [(name, _canonical_le(name, labels)) for name, labels in batch.series]
    if all(new[1] is old[1] for new, old in zip(keys, batch.series, strict=True)):
        return batch
    index: dict[SeriesKey, int] = {}
    remap = np.array([index.setdefault(k, len(index)) for k in keys], dtype=np.uint32)
    return SampleBatch(list(index), remap[batch.series_index], batch.ts_ms, batch.values)


def _canonical_le(name: str, labels: Labels) -> Labels:
    lab = dict(labels)
    if "le" not in lab:
        if name.endswith("_bucket"):
            raise RemoteWriteError(
                f"series {_series_text(name, lab)} needs an le label holding a number or +Inf"
            )
        return labels
    try:
        le = normalise_le(lab["le"])
    except ValueError as exc:
        raise RemoteWriteError(f"series {_series_text(name, lab)}: {exc}") from None
    return labels if le == lab["le"] else labels_of({**lab, "le": le})


def _not_ahead(batch: SampleBatch, now_ms: int) -> SampleBatch:
    """``batch``, or a 400 when a sample is over 10 minutes ahead of the service's clock."""
    if len(batch) and int(batch.ts_ms.max()) >= now_ms + MAX_FUTURE_MS:
        raise bad_request(
            f"a sample is timestamped {int(batch.ts_ms.max()) - now_ms} ms ahead of this service's clock; "
            "samples over 10 minutes in the future are refused (check the sender's clock and timestamp unit)"
        )
    return batch


REMOTE_WRITE_HINT = "set them as external_labels of the sender or with write_relabel_configs"
IMPORT_HINT = (
    "label every series with them, or give model_id, deployment_id and replica for a file of one replica"
)


def _check_owner(
    registry: Registry, key: KeyInfo, series: list[SeriesKey], hint: str = REMOTE_WRITE_HINT
) -> None:
    """400 unless every series names a deployment (not an alias) of a model of the caller's organization
    (404 for one it cannot see, as ``resolve_deployment``); ``hint`` says how to label a series without."""
    ids = set()
    for _, labels in series:
        lab = dict(labels)
        ids.add((lab.get("model_id", ""), lab.get("deployment_id", "")))
    for model_id, deployment_id in sorted(ids):
        if not model_id or not deployment_id:
            raise bad_request(f"every series needs model_id and deployment_id labels; {hint}")
        if deployment_id in DEPLOYMENT_ALIASES:
            raise bad_request(
                f"deployment_id {deployment_id!r} is an alias; label series with the deployment's id "
                f"(GET /v1/models/{model_id}/deployments lists them)"
            )
        resolve_deployment(registry, resolve_model(registry, key, model_id), deployment_id)


def _store_write(service: Service, registry: Registry, key: KeyInfo, body: bytes) -> int:
    """Decode, check, adapt and store one remote_write body (in an ingest worker thread); the samples
    stored. Raises ``ApiError`` 413 / 400 as the route documents."""
    limit = service.config.limits.remote_write_body_bytes
    try:
        batch = _checked_buckets(decode_write_batch(body, limit))
    except RemoteWriteTooLarge as exc:
        raise ApiError(413, str(exc)) from exc
    except RemoteWriteError as exc:
        raise bad_request(f"not a usable remote_write 1.0 body: {exc}") from exc
    check_sample_count(len(batch), service.config.limits.remote_write_samples, "limits.remote_write_samples")
    _check_owner(registry, key, batch.series)
    return service.append(_not_ahead(adapt_batch_by_target(batch, TARGET_LABELS), service.clock()))


@router.post("/api/v1/write", status_code=204)
async def remote_write(
    request: Request, service: ServiceDep, registry: RegistryDep, key: ManageAuth
) -> Response:
    """Store a remote_write 1.0 request (snappy-compressed protobuf ``WriteRequest``).

    Every series needs ``model_id`` and ``deployment_id`` labels naming a deployment of the caller's
    organization (set them as the sender's ``external_labels`` or with relabelling). Samples with a
    NaN or infinite value are dropped. 413 when the body, or the size its snappy header declares
    decompressed, is over ``limits.remote_write_body_bytes``, or its samples over
    ``limits.remote_write_samples``. Series new to an organization at ``limits.series_per_organization``
    active series are left out (``api/series_limit.py``). 503 with ``Retry-After`` (before the body is
    read) when every ingest worker and queue place is taken (config ``ingest``); the work runs in an
    ingest worker thread, off the event loop.
    """
    async with service.ingest.slot():
        body = await request.body()
        stored = await service.ingest.run(_store_write, service, registry, key, body)
    service.metrics.samples_appended.labels("remote_write").inc(stored)
    return Response(status_code=204)


@router.post("/v1/import")
async def import_openmetrics(
    request: Request,
    service: ServiceDep,
    registry: RegistryDep,
    key: ManageAuth,
    model_id: Annotated[str | None, Query()] = None,
    deployment_id: Annotated[str | None, Query()] = None,
    replica: Annotated[str | None, Query()] = None,
) -> dict[str, int]:
    """Backfill an OpenMetrics body (timestamps in seconds) as samples of one replica (``model_id``,
    ``deployment_id``, ``replica``), or, without all three, of the replicas its series name in their own
    ``model_id``, ``deployment_id`` and ``replica`` labels (each checked as remote_write checks a body's:
    a deployment of a model of the caller's organization, before its batch is stored).

    Returns ``{"samples": stored, "batches": n}``; 400 naming the bad line for invalid input, or a series
    without the labels; 404 for a model or deployment the caller cannot see. Batches before a bad line
    or series are stored (the file is streamed), as with ``promtool tsdb create-blocks``. 400 when only
    some of the three parameters are given. 413, nothing stored, when the file has over
    ``limits.import_samples`` sample lines. 503 with ``Retry-After`` before the body is read when every
    ingest worker and queue place is taken.
    """
    labels = _import_labels(registry, key, model_id, deployment_id, replica)
    async with service.ingest.slot():
        prefix, suffix = IMPORT_SPOOL
        with tempfile.NamedTemporaryFile(dir=service.config.data_dir, prefix=prefix, suffix=suffix) as tmp:
            async for chunk in request.stream():
                tmp.write(chunk)
            tmp.flush()
            stored, batches = await service.ingest.run(
                _store_import, service, tmp.name, labels, registry, key
            )
    service.metrics.samples_appended.labels("import").inc(stored)
    return {"samples": stored, "batches": batches}


def _import_labels(
    registry: Registry, key: KeyInfo, model_id: str | None, deployment_id: str | None, replica: str | None
) -> dict[str, str] | None:
    """The labels of every imported sample, or ``None`` (none of the three given: each series' own).
    400 when only some are given; 404 as ``resolve_deployment`` for one the caller cannot see."""
    given = [v for v in (model_id, deployment_id, replica) if v is not None]
    if not given:
        return None
    if model_id is None or deployment_id is None or replica is None:
        raise bad_request(
            "give model_id, deployment_id and replica together (a file of one replica), or none of "
            "them (every series names its own in model_id, deployment_id and replica labels)"
        )
    model = resolve_model(registry, key, model_id)
    dep = resolve_deployment(registry, model, deployment_id)
    return {"model_id": model.id, "model_name": model.name, "deployment_id": dep.id, "replica": replica}


def _store_import(
    service: Service, path: str, labels: dict[str, str] | None, registry: Registry, key: KeyInfo
) -> tuple[int, int]:
    """Parse, adapt and store the OpenMetrics file at ``path`` (in an ingest worker thread) with
    ``labels`` (``None``: each series' own, each batch checked by ``_check_owner`` before it is stored):
    ``(samples stored, batches)``. Raises ``ApiError`` 413 over ``limits.import_samples`` sample lines
    (nothing stored), 400 at a bad line or series, 404 at a series of a model or deployment the caller
    cannot see (batches before either stay)."""
    limit = service.config.limits.import_samples
    check_sample_count(count_sample_lines(path, limit), limit, "limits.import_samples")
    stored = batches = 0
    try:
        for batch in iter_backfill(path, labels, workers=1):
            if labels is None:
                _check_owner_after(registry, key, batch.series, stored)
            stored += service.append(_not_ahead(batch, service.clock()))
            batches += 1
    except (BackfillError, UnicodeDecodeError) as exc:
        raise bad_request(f"import stopped after {stored} samples: {exc}") from exc
    return stored, batches


def _check_owner_after(registry: Registry, key: KeyInfo, series: list[SeriesKey], stored: int) -> None:
    """``_check_owner``, its error saying how many samples were stored before the series it names."""
    try:
        _check_owner(registry, key, series, IMPORT_HINT)
    except ApiError as exc:
        raise ApiError(exc.status, f"import stopped after {stored} samples: {exc.message}") from None
