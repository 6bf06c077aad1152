"""A real `servemetrics serve` for the reliability tests, remote_write bodies of any size, and the exact
count of stored samples read from the store's files after the service stopped."""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import cramjam
import httpx
import numpy as np
from prometheus_client.parser import text_string_to_metric_families

from servemetrics.remote_write import encode_batch
from servemetrics.samples import SampleBatch
from servemetrics.store import STORE_FILE
from servemetrics.store.duckdb_schema import HEAD_DB
from servemetrics.store.duckdb_writer import connect
from servemetrics.types import labels_of
from tests.processes import free_port, promoted, start_service, stop, wait_http, write_service_config

KEY = "sm-acme-reliability-key-0123"
OTHER_KEY = "sm-other-reliability-key-0123"
GPU = "baseten_gpu_utilization"
WRITE_HEADERS = {"Authorization": f"Bearer {KEY}", "Content-Type": "application/x-protobuf"}


@contextlib.contextmanager
def service(tmp: Path, **more: Any) -> Iterator[str]:
    """`servemetrics serve` over ``configure(tmp, **more)``; yields its base URL and stops it at the end."""
    base = configure(tmp, **more)
    proc = start_service(tmp)
    try:
        wait_http(f"{base}/healthz")
        yield base
    finally:
        stop(proc)


def configure(tmp: Path, **more: Any) -> str:
    """``tmp / "servemetrics.yaml"`` for `servemetrics serve` (``start_service``) on a free port, data in
    ``tmp / "data"``: model m1 (deployment d1) of acme and m2 (x1) of other, both promoted to production,
    remote_write bodies up to 512 MiB, and ``more`` config sections. Returns the service's base URL."""
    port = free_port()
    orgs = [
        {"name": "acme", "api_keys": [{"key": KEY, "type": "WORKSPACE_MANAGE_ALL"}]},
        {"name": "other", "api_keys": [{"key": OTHER_KEY, "type": "WORKSPACE_MANAGE_ALL"}]},
    ]
    models = [
        {"id": m, "organization": o, "deployments": [{"id": d}], "environments": [promoted("production", d)]}
        for m, o, d in (("m1", "acme", "d1"), ("m2", "other", "x1"))
    ]
    limits = {"remote_write_body_bytes": "512MiB", **more.pop("limits", {})}
    write_service_config(tmp, port, orgs, models, limits=limits, **more)
    return f"http://127.0.0.1:{port}"


def gpu_body(series: int, per_series: int, prefix: str, model: str = "m1", dep: str = "d1") -> bytes:
    """A snappy remote_write body of ``series`` x ``per_series`` samples of ``GPU`` (gpu labels
    ``<prefix>0`` …), one every 10 s up to a second ago."""
    now = int(time.time() * 1000) - 1000
    keys = [
        (GPU, labels_of({"model_id": model, "deployment_id": dep, "replica": "r1", "gpu": f"{prefix}{i}"}))
        for i in range(series)
    ]
    offsets = np.arange(per_series, dtype=np.int64) * 10_000
    batch = SampleBatch(
        series=keys,
        series_index=np.repeat(np.arange(series, dtype=np.uint32), per_series),
        ts_ms=np.tile(now - offsets[::-1], series),
        values=np.full(series * per_series, 50.0),
    )
    raw, n = encode_batch(batch)
    assert n == series * per_series
    return bytes(cramjam.snappy.compress_raw(raw))


def own_metric(base: str, name: str) -> float:
    """The value of the service's own sample ``name`` (no labels) on its ``/service/metrics``."""
    text = httpx.get(f"{base}/service/metrics", timeout=10).text
    found = [s.value for f in text_string_to_metric_families(text) for s in f.samples if s.name == name]
    assert len(found) == 1, name
    return found[0]


def stored_samples(tmp: Path, name: str, model_id: str) -> int:
    """Samples of series ``name`` of ``model_id`` in the stopped service's store (head and sealed)."""
    path = tmp / "data" / STORE_FILE
    con = connect(path, path.with_name(f"{path.stem}.head{path.suffix}"))
    try:
        where = "s.name = ? AND s.model_id = ?"
        head = con.execute(
            f"SELECT count(*) FROM {HEAD_DB}.head h JOIN series s ON h.series_id = s.id WHERE {where}",
            [name, model_id],
        ).fetchone()
        sealed = con.execute(
            f"SELECT coalesce(sum(c.n), 0) FROM chunks c JOIN series s ON c.series_id = s.id WHERE {where}",
            [name, model_id],
        ).fetchone()
    finally:
        con.close()
    assert head is not None and sealed is not None
    return int(head[0]) + int(sealed[0])


def head_values(tmp: Path, name: str, model_id: str) -> tuple[dict[tuple[str, int], float], int]:
    """The samples of series ``name`` of ``model_id`` in the stopped (or killed) service's ``head``, as
    {(value of the ``gpu`` label, ts ms): value}, and how many of its samples are sealed in ``chunks``."""
    path = tmp / "data" / STORE_FILE
    con = connect(path, path.with_name(f"{path.stem}.head{path.suffix}"))
    try:
        where = "s.name = ? AND s.model_id = ?"
        rows = con.execute(
            f"SELECT s.labels, h.ts, h.value FROM {HEAD_DB}.head h JOIN series s ON h.series_id = s.id "
            f"WHERE {where} AND h.ts >= coalesce((SELECT value FROM meta WHERE key = 'sealed_until'), 0)",
            [name, model_id],
        ).fetchall()
        sealed = con.execute(
            f"SELECT coalesce(sum(c.n), 0) FROM chunks c JOIN series s ON c.series_id = s.id WHERE {where}",
            [name, model_id],
        ).fetchone()
    finally:
        con.close()
    assert sealed is not None
    return {(dict(json.loads(labels))["gpu"], int(ts)): float(v) for labels, ts, v in rows}, int(sealed[0])
