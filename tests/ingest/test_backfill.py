from __future__ import annotations

import io

import numpy as np
import pytest

from servemetrics.ingest import backfill, backfill_units
from servemetrics.ingest.backfill import BackfillError, iter_backfill
from servemetrics.samples import Sample
from tests.ingest.openmetrics_gen import BUCKETS, T0, openmetrics_lines, samples_per_point

T0_MS = T0 * 1000
TARGET = {"model_id": "m1", "deployment_id": "d1", "replica": "r1"}


def run(text: str, **kwargs) -> list[Sample]:
    return [
        s for batch in iter_backfill(io.BytesIO(text.encode()), TARGET, **kwargs) for s in batch.samples()
    ]


def c11_text(points: int) -> str:
    lines = [
        "# HELP baseten_end_to_end_response_time_seconds End to end.\n",
        "# TYPE baseten_end_to_end_response_time_seconds histogram\n",
    ]
    for i in range(points):
        ts = f"{T0 + 15 * i}.000"
        lines += [
            f'baseten_end_to_end_response_time_seconds_bucket{{le="{le}",status_code="200"}} {c * i} {ts}\n'
            for le, c in (("0.5", 1), ("1.0", 2), ("+Inf", 3))
        ]
        lines.append(f'baseten_end_to_end_response_time_seconds_sum{{status_code="200"}} {i * 2.5} {ts}\n')
        lines.append(f'baseten_end_to_end_response_time_seconds_count{{status_code="200"}} {3 * i} {ts}\n')
    return "".join(lines) + "# EOF\n"


def test_c11_histogram_series_with_a_point_every_15s_imports_every_point() -> None:
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    text = c11_text(4)
    with pytest.raises(ValueError, match=r"\+Inf bucket missing"):  # the library alone rejects the file
        list(text_string_to_metric_families(text))
    out = run(text)
    assert len(out) == 4 * 5
    inf = [(s.ts_ms - T0_MS, s.value) for s in out if dict(s.labels).get("le") == "+Inf"]
    assert inf == [(0, 0.0), (15_000, 3.0), (30_000, 6.0), (45_000, 9.0)]
    sums = [s.value for s in out if s.name.endswith("_sum")]
    assert sums == [0.0, 2.5, 5.0, 7.5]
    assert dict(out[0].labels) == {"le": "0.5", "status_code": "200", **TARGET}


def test_generated_file_all_points_and_values() -> None:
    points = 50
    out = run("".join(openmetrics_lines(points, gpus=2)))
    assert len(out) == points * samples_per_point(gpus=2)
    util = [
        (s.ts_ms, s.value)
        for s in out
        if s.name == "baseten_gpu_utilization" and dict(s.labels)["gpu"] == "1"
    ]
    assert util == [(T0_MS + 15_000 * i, ((i + 1) % 101) / 100) for i in range(points)]
    req = [
        s.value
        for s in out
        if s.name == "baseten_inference_requests_total" and dict(s.labels)["status_code"] == "429"
    ]
    assert req == [3.0 * i for i in range(points)]
    assert {dict(s.labels)["le"] for s in out if s.name.endswith("_bucket")} == set(BUCKETS)


def test_interleaved_series_and_repeated_families_concatenated_scrapes() -> None:
    scrape = (
        "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
        'DCGM_FI_DEV_FB_USED{{gpu="0"}} {a} {t}\nDCGM_FI_DEV_FB_USED{{gpu="1"}} {b} {t}\n'
        "# TYPE process_cpu_seconds counter\nprocess_cpu_seconds_total {a} {t}\n# EOF\n"
    )
    text = "".join(scrape.format(a=i, b=10 * i, t=T0 + 15 * i) for i in range(3))
    interleaved = (
        "# TYPE DCGM_FI_DEV_FB_USED gauge\n"
        + "".join(f'DCGM_FI_DEV_FB_USED{{gpu="{g}"}} {g} {T0 + 15 * i}\n' for i in range(3) for g in "01")
        + "# EOF\n"
    )
    out = run(text)
    gpu1 = [
        (s.ts_ms - T0_MS, s.value)
        for s in out
        if s.name == "baseten_gpu_memory_used" and dict(s.labels)["gpu"] == "1"
    ]
    assert gpu1 == [(0, 0.0), (15_000, 10.0), (30_000, 20.0)]
    assert [s.value for s in out if s.name == "baseten_container_cpu_usage_seconds_total"] == [0.0, 1.0, 2.0]
    assert len(run(interleaved)) == 6


def test_labels_with_escapes_and_exemplars_survive() -> None:
    text = (
        "# TYPE vllm:e2e_request_latency_seconds histogram\n"
        'vllm:e2e_request_latency_seconds_bucket{model_name="a \\"b\\" c,}",le="1.0"} 1 1767225600'
        ' # {trace_id="x"} 0.5 1767225600\n'
        'vllm:e2e_request_latency_seconds_bucket{model_name="a \\"b\\" c,}",le="+Inf"} 2 1767225600\n'
        'vllm:e2e_request_latency_seconds_sum{model_name="a \\"b\\" c,}"} 1.5 1767225600\n'
        'vllm:e2e_request_latency_seconds_count{model_name="a \\"b\\" c,}"} 2 1767225600\n# EOF\n'
    )
    out = run(text)
    assert [(s.name, dict(s.labels).get("le"), s.value) for s in out] == [
        ("vllm:e2e_request_latency_seconds_bucket", "1.0", 1.0),
        ("vllm:e2e_request_latency_seconds_bucket", "+Inf", 2.0),
        ("vllm:e2e_request_latency_seconds_sum", None, 1.5),
        ("vllm:e2e_request_latency_seconds_count", None, 2.0),
    ]
    assert {dict(s.labels)["model_name"] for s in out} == {'a "b" c,}'}


def test_invalid_line_names_its_line() -> None:
    text = c11_text(2).replace(
        'le="1.0",status_code="200"} 2 1767225615.000', 'le="1.0",status_code="200"} x 1767225615.000'
    )
    with pytest.raises(BackfillError, match=r"^line 9: invalid OpenMetrics"):
        run(text)


def test_an_invalid_line_is_quoted_as_the_file_has_it_not_as_the_parser_saw_it() -> None:
    """The library parser reads shortened text (``f_total{a_="4"}``); its message quotes the file's line."""
    line = 'baseten_inference_requests_total{status_code="200"} 0 1767225600.000'
    text = (
        "# TYPE baseten_inference_requests counter\n"
        'baseten_inference_requests_total{status_code="200"} 3 1767225615.000\n'
        f"{line}\n# EOF\n"
    )
    with pytest.raises(BackfillError) as err:
        run(text)
    assert str(err.value) == f"line 3: invalid OpenMetrics: Timestamps went backwards within a group: {line}"


def test_histogram_error_names_a_line_of_the_family() -> None:
    text = c11_text(2).replace(
        'baseten_end_to_end_response_time_seconds_bucket{le="+Inf",status_code="200"} 3 1767225615.000\n', ""
    )
    with pytest.raises(BackfillError, match=r"^line \d+: invalid OpenMetrics: \+Inf bucket missing"):
        run(text)


def test_c15_bounds_of_a_family_with_a_unit_line_are_normalised_too() -> None:
    """A ``# UNIT`` line keeps the family's text unshortened; its ``+inf`` still reaches the parser as
    ``+Inf`` (exposition.openmetrics_bounds, the scraper's rewrite)."""
    text = (
        "# TYPE vllm:e2e_request_latency_seconds histogram\n# UNIT vllm:e2e_request_latency_seconds seconds\n"
        'vllm:e2e_request_latency_seconds_bucket{le="1"} 1 1767225600\n'
        'vllm:e2e_request_latency_seconds_bucket{le="+inf"} 2 1767225600\n'
        "vllm:e2e_request_latency_seconds_sum 1.5 1767225600\n"
        "vllm:e2e_request_latency_seconds_count 2 1767225600\n# EOF\n"
    )
    buckets = [dict(s.labels)["le"] for s in run(text) if s.name.endswith("_bucket")]
    assert buckets == ["1.0", "+Inf"]


def test_c15_a_gauge_whose_le_is_not_a_number_names_its_line() -> None:
    """The parser checks ``le`` of buckets only; the normaliser refuses it on any sample, naming the line."""
    text = '# TYPE vllm:g gauge\nvllm:g{le="1"} 1 1767225600\nvllm:g{le="x"} 1 1767225615\n# EOF\n'
    with pytest.raises(BackfillError, match=r"^line 3: sample vllm:g: bucket bound le='x' is not a number$"):
        run(text)


def test_samples_need_timestamps() -> None:
    with pytest.raises(BackfillError, match="has no timestamp"):
        run("# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes 5\n# EOF\n")


def test_streams_in_bounded_reads_with_progress(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(backfill, "_READ_BYTES", 4096)
    monkeypatch.setattr(backfill, "_CHUNK_LINES", 500)
    monkeypatch.setattr(backfill_units, "MAX_UNIT_LINES", 100)  # histogram units are cut at timestamp changes
    path = tmp_path / "b.om"
    path.write_text("".join(openmetrics_lines(200, gpus=2)))
    reads: list[int] = []

    class Stream(io.FileIO):
        def read(self, size: int = -1) -> bytes:
            assert 0 < size <= 4096
            reads.append(size)
            return super().read(size)

    seen: list[tuple[int, int | None]] = []
    with Stream(str(path)) as stream:
        batches = list(
            iter_backfill(stream, TARGET, batch_size=1000, progress=lambda d, t: seen.append((d, t)))
        )
    assert sum(len(b) for b in batches) == 200 * samples_per_point(gpus=2)
    assert all(len(b) >= 1000 for b in batches[:-1]) and len(batches) > 2
    assert len(reads) > 10
    assert seen[-1] == (path.stat().st_size, None)
    via_path = []
    list(iter_backfill(path, TARGET, progress=lambda d, t: via_path.append((d, t))))
    assert via_path[-1] == (path.stat().st_size, path.stat().st_size)


def test_batches_are_columnar_and_index_their_series(tmp_path) -> None:
    path = tmp_path / "b.om"
    path.write_text("".join(openmetrics_lines(30, gpus=1)))
    (batch,) = list(iter_backfill(path, TARGET, workers=1))
    assert batch.ts_ms.dtype == np.int64 and batch.values.dtype == np.float64
    assert len(batch.series) == 1 + 3 + len(BUCKETS) + 2
    assert int(batch.series_index.max()) == len(batch.series) - 1


def test_worker_processes_give_the_same_samples(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(backfill, "_CHUNK_LINES", 200)
    monkeypatch.setattr(backfill, "_READ_BYTES", 8192)
    path = tmp_path / "b.om"
    path.write_text("".join(openmetrics_lines(100, gpus=2)))
    one = [s for b in iter_backfill(path, TARGET, workers=1) for s in b.samples()]
    two = [s for b in iter_backfill(path, TARGET, workers=2) for s in b.samples()]
    assert one == two and len(one) == 100 * samples_per_point(gpus=2)
