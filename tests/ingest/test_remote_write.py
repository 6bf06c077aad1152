from __future__ import annotations

import math

import cramjam
import pytest

from servemetrics.remote_write import (
    RemoteWriteError,
    WriteRequest,
    decode_write_request,
    encode_write_request,
)
from servemetrics.samples import Sample

T0_MS = 1767225600000
SAMPLES = [
    Sample("baseten_inference_requests_total", (("model_id", "m1"), ("status_code", "200")), 5.0, T0_MS),
    Sample(
        "baseten_inference_requests_total", (("model_id", "m1"), ("status_code", "200")), 7.0, T0_MS + 15_000
    ),
    Sample("vllm:kv_cache_usage_perc", (("model_name", "m"),), 0.4, T0_MS),
    Sample("up", (), 1.0, T0_MS),
]


def test_round_trip() -> None:
    body = encode_write_request(SAMPLES)
    assert decode_write_request(body) == SAMPLES


def test_encoding_is_the_prometheus_wire_format() -> None:
    request = WriteRequest()
    request.ParseFromString(bytes(cramjam.snappy.decompress_raw(encode_write_request(SAMPLES))))
    assert len(request.timeseries) == 3  # consecutive samples of one series share a TimeSeries
    first = request.timeseries[0]
    assert [(lb.name, lb.value) for lb in first.labels] == [
        ("__name__", "baseten_inference_requests_total"),
        ("model_id", "m1"),
        ("status_code", "200"),
    ]
    assert [(s.value, s.timestamp) for s in first.samples] == [(5.0, T0_MS), (7.0, T0_MS + 15_000)]
    # field numbers: WriteRequest.timeseries = 1, TimeSeries.labels = 1, Label.name = 1
    raw = request.SerializeToString()
    assert raw[0] == (1 << 3 | 2)


def test_nan_samples_are_dropped() -> None:
    body = encode_write_request([Sample("g", (), math.nan, 1), Sample("g", (), 2.0, 2)])
    assert decode_write_request(body) == [Sample("g", (), 2.0, 2)]


def test_bad_snappy() -> None:
    with pytest.raises(RemoteWriteError, match="not snappy block-compressed"):
        decode_write_request(b"not snappy at all")


def test_bad_protobuf() -> None:
    with pytest.raises(RemoteWriteError, match="not a prometheus.WriteRequest protobuf"):
        decode_write_request(bytes(cramjam.snappy.compress_raw(b"\x0a\xff\xff\xff")))


def test_series_without_name() -> None:
    request = WriteRequest()
    series = request.timeseries.add()
    series.labels.add(name="job", value="x")
    series.samples.add(value=1.0, timestamp=1)
    with pytest.raises(RemoteWriteError, match="time series 0 has no __name__"):
        decode_write_request(bytes(cramjam.snappy.compress_raw(request.SerializeToString())))


def test_empty_request_is_no_samples() -> None:
    assert decode_write_request(encode_write_request([])) == []
