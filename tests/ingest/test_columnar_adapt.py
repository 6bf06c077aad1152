"""``adapt_batch`` (columnar) gives exactly what ``adapt`` gives: on every exposition fixture, with custom
series, with the priority rules, across calls (its plans are cached)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from servemetrics.ingest.adapters import adapt
from servemetrics.ingest.adapters.columnar import adapt_batch, adapt_batch_by_target
from servemetrics.ingest.adapters.custom import CustomSeries
from servemetrics.ingest.exposition import parse_exposition
from servemetrics.labels import TARGET_LABELS
from servemetrics.samples import STALE_NAN, Sample, SampleBatch
from servemetrics.types import labels_of
from tests.ingest.fixtures import REPO_ROOT, SCRAPE_MS, fixture_files

TARGET = {
    "model_id": "m1",
    "model_name": "llama",
    "deployment_id": "d1",
    "replica": "r1",
    "environment": "production",
    "rollout_phase": "",
}
LOCAL_FIXTURES = sorted((REPO_ROOT / "tests" / "fixtures").glob("*.prom"))


def _parsed(path: Path) -> list[Sample]:
    return parse_exposition(path.read_bytes(), "text/plain; version=0.0.4", SCRAPE_MS).samples


def _rows(batch: SampleBatch) -> list[tuple[str, tuple[tuple[str, str], ...], int, int]]:
    """The batch's samples with each value as its bits (so NaNs compare, and -0.0 != 0.0)."""
    bits = batch.values.view(np.int64).tolist()
    columns = zip(batch.series_index.tolist(), batch.ts_ms.tolist(), bits, strict=True)
    return [(*batch.series[i], t, b) for i, t, b in columns]


def _same(got: SampleBatch, want: SampleBatch) -> None:
    assert got.series == want.series
    assert _rows(got) == _rows(want)


@pytest.mark.parametrize("path", [*fixture_files(), *LOCAL_FIXTURES], ids=lambda p: p.name)
@pytest.mark.parametrize("custom_limit", [0, 5])
def test_equals_adapt_on_every_fixture(path: Path, custom_limit: int) -> None:
    samples = _parsed(path)
    # two scrapes 15 s apart, so a series has two samples and the plans are cached from the first call
    samples += [s._replace(ts_ms=s.ts_ms + 15_000, value=s.value * 2) for s in samples]
    want = SampleBatch.from_samples(adapt(samples, TARGET, custom_limit))
    for _ in range(2):
        got = adapt_batch(SampleBatch.from_samples(samples), TARGET, custom_limit)
        assert got.series == want.series
        assert _rows(got) == _rows(want)


def test_custom_drops_are_counted_as_adapt_counts_them() -> None:
    body = "".join(f'app_thing_{i}{{k="v"}} {i}\n' for i in range(7)) + "servemetrics_x 1\n"
    samples = parse_exposition(body.encode(), None, SCRAPE_MS).samples
    custom = CustomSeries(3)
    got = adapt_batch(SampleBatch.from_samples(samples), TARGET, custom=custom)
    assert [name for name, _ in got.series] == ["app_thing_0", "app_thing_1", "app_thing_2"]
    assert got.values.tolist() == [0.0, 1.0, 2.0]
    assert custom.dropped == {"series_limit": 4, "reserved_name": 1}


def test_priority_dedup_and_divisor_by_hand() -> None:
    # the old vLLM name (priority -1) and the new one at the same ts: the new wins, at the old one's place
    # (it came first); DCGM DEV_GPU_UTIL 56 % -> 0.56 loses to PROF_GR_ENGINE_ACTIVE 0.555 at the same ts
    t = SCRAPE_MS
    rows = [
        Sample("vllm:gpu_cache_usage_perc", (("engine", "0"),), 0.25, t),
        Sample("DCGM_FI_DEV_GPU_UTIL", (("gpu", "0"),), 56.0, t),
        Sample("vllm:kv_cache_usage_perc", (("engine", "0"),), 0.5, t),
        Sample("DCGM_FI_PROF_GR_ENGINE_ACTIVE", (("gpu", "0"),), 0.555, t),
        Sample("DCGM_FI_DEV_GPU_UTIL", (("gpu", "0"),), 30.0, t + 15_000),
        # the same series and ts again, at equal priority: the first sample wins
        Sample("vllm:kv_cache_usage_perc", (("engine", "0"),), 0.75, t),
    ]
    got = adapt_batch(SampleBatch.from_samples(rows), TARGET)
    assert [(name, t_, v) for name, _, t_, v in ((*s.key, s.ts_ms, s.value) for s in got.samples())] == [
        ("vllm:kv_cache_usage_perc", t, 0.5),
        ("baseten_gpu_utilization", t, 0.555),
        ("baseten_gpu_utilization", t + 15_000, 0.3),
    ]
    _same(got, SampleBatch.from_samples(adapt(rows, TARGET)))


def test_stale_marker_keeps_its_bits() -> None:
    rows = [Sample("vllm:num_requests_running", (), STALE_NAN, SCRAPE_MS)]
    got = adapt_batch(SampleBatch.from_samples(rows), TARGET)
    # kept under its own name and as baseten_llm_num_requests{state="running"}, both bit for bit
    assert [name for name, _ in got.series] == ["vllm:num_requests_running", "baseten_llm_num_requests"]
    assert got.values.view(np.int64).tolist() == [0x7FF0000000000002] * 2


def test_by_target_equals_adapt_per_target() -> None:
    def target(replica: str) -> tuple[tuple[str, str], ...]:
        return labels_of({"model_id": "m1", "deployment_id": "d1", "replica": replica})

    rows = [
        Sample("vllm:num_requests_running", target(r), float(i), SCRAPE_MS + i)
        for i, r in enumerate(["a", "b", "a", "c"])
    ]
    rows.append(Sample("baseten_gpu_utilization", target("b"), 50.0, SCRAPE_MS))
    want: list[Sample] = []
    for r in ["a", "b", "c"]:
        mine = [s for s in rows if dict(s.labels)["replica"] == r]
        want += adapt(mine, {k: dict(mine[0].labels).get(k, "") for k in TARGET_LABELS})
    got = adapt_batch_by_target(SampleBatch.from_samples(rows), TARGET_LABELS)
    assert sorted(_rows(got)) == sorted(_rows(SampleBatch.from_samples(want)))
    assert len(got) == 9  # each vllm sample twice (its own name, baseten_llm_num_requests), the gpu one once
    assert dict(got.series[-1][1])["replica"] == "b"
    assert got.values[-1] == 0.5


def test_nothing_adapts_to_an_empty_batch() -> None:
    got = adapt_batch(SampleBatch.from_samples([Sample("unknown_thing", (), 1.0, SCRAPE_MS)]), TARGET)
    assert (got.series, len(got)) == ([], 0)
