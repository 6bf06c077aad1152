"""Refused samples on a real Prometheus: one bad sample costs only itself (the body is halved)."""

from __future__ import annotations

import time
import uuid

from servemetrics.samples import Sample, SampleBatch
from servemetrics.store.prometheus import PrometheusStore
from servemetrics.types import labels_of


def test_a_refused_sample_is_dropped_counted_and_its_neighbours_sent(prometheus_engine, tmp_path) -> None:
    model_id = f"refused-{uuid.uuid4().hex[:8]}"
    labels = labels_of({"model_id": model_id, "deployment_id": "d1"})
    now = int(time.time() * 1000) // 1000 * 1000
    good = [Sample("g", labels, float(i), now - 60_000 + i * 1000) for i in range(9)]
    # ten days back: outside the 2-day out-of-order window, Prometheus answers 400 for the whole body
    bad = Sample("g_old", labels, 1.0, now - 10 * 86_400_000)
    store = PrometheusStore(prometheus_engine.options(tmp_path / "buffer"))
    store.append(SampleBatch.from_samples([*good[:4], bad, *good[4:]]))
    assert store.flush(30)
    stats = store.remote_write_stats()
    assert (stats["sent_samples"], stats["failed_samples"]) == (9, 1)
    prometheus_engine.wait_for(model_id, 9, now - 120_000, now + 1)
    store.close()
