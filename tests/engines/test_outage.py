"""The engine goes down for a minute while samples keep arriving; nothing is lost.

A real VictoriaMetrics is stopped (SIGTERM) for 60 s while a counter gains one sample per second. Half
way through the outage our side restarts too: the first store is closed (what it holds goes to the
on-disk buffer) and a second one opens the same ``buffer_dir``. When the engine is back, the second
store replays the buffer in order and sends the rest; the engine then holds every sample, and the
counter's increase over the whole run is exact.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import replace

from servemetrics.samples import Sample, SampleBatch
from servemetrics.store.base import Reducer, Selection, ValueSet
from servemetrics.store.prometheus import PrometheusStore
from servemetrics.store.remote_write_client import WriterOptions
from servemetrics.types import labels_of

OUTAGE_S = 60


def _store(engine, buffer_dir) -> PrometheusStore:
    options = engine.options(buffer_dir)
    fast = WriterOptions(
        url=options.remote_write_url, buffer_dir=buffer_dir, min_backoff_s=0.2, max_backoff_s=2
    )
    return PrometheusStore(replace(options, writer=fast))


def test_an_engine_outage_of_a_minute_loses_nothing(victoriametrics_engine, tmp_path) -> None:
    engine = victoriametrics_engine
    model_id = f"outage-{uuid.uuid4().hex[:8]}"
    labels = labels_of({"model_id": model_id, "deployment_id": "d1", "replica": "r1"})
    t0 = (int(time.time() * 1000) // 1000 - 600) * 1000  # samples 1 s apart, ten minutes back
    sent = 0

    def tick(store: PrometheusStore) -> None:
        nonlocal sent
        # the counter rises by 3 per sample: 0, 3, 6, ...
        store.append(SampleBatch.from_samples([Sample("c_total", labels, 3.0 * sent, t0 + sent * 1000)]))
        sent += 1

    store = _store(engine, tmp_path / "buffer")
    for _ in range(3):
        tick(store)
    assert store.flush(10)
    engine.stop()
    try:
        started = time.monotonic()
        spilled = 0.0
        while time.monotonic() - started < OUTAGE_S:
            if sent == 30:  # our side restarts during the outage
                store.close()  # spills what it still holds
                assert any((tmp_path / "buffer").glob("*.seg"))
                store = _store(engine, tmp_path / "buffer")
            tick(store)
            stats = store.remote_write_stats()
            spilled = max(spilled, stats["buffer_bytes"])
            time.sleep(1.0)
        assert stats["queue_samples"] >= sent - 3 - 1  # all but the first three are waiting
        assert stats["failed_samples"] == 0 and stats["sent_samples"] == 0
        assert spilled > 0  # written to the disk buffer while the engine was down
    finally:
        engine.start()
    for _ in range(3):
        tick(store)
    assert store.flush(60), store.remote_write_stats()
    stats = store.remote_write_stats()
    assert stats["queue_samples"] == 0 and stats["failed_samples"] == 0 and stats["retries"] > 0
    engine.wait_for(model_id, sent, t0, t0 + sent * 1000)
    # every sample is there: the increase over the run is 3 per sample after the first
    whole = ValueSet(t0, t0 + sent * 1000, frozenset({"d1"}))
    got = store.select(Selection("c_total", Reducer.INCREASE, (whole,)))
    assert got == {(): [(3.0 * (sent - 1), 1)]}
    store.close()
