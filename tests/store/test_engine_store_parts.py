"""The engine store's parts without an engine: encoder, disk buffer, PromQL compiler, config, 503."""

from __future__ import annotations

import struct

import cramjam
import numpy as np
import pytest
from fastapi.testclient import TestClient

from servemetrics.api.app import create_app
from servemetrics.config import ConfigError, engine_options, parse_config
from servemetrics.remote_write import decode_write_request, encode_batch
from servemetrics.samples import STALE_NAN, Sample, SampleBatch
from servemetrics.store.base import Reducer, Selection, ValueSet
from servemetrics.store.errors import BufferLockedError
from servemetrics.store.prometheus import EngineOptions, PrometheusStore
from servemetrics.store.promql import Flavor, compile_segment, segments
from servemetrics.store.spill import SegmentBuffer
from tests.processes import free_port

LAB = (("deployment_id", "d1"), ("model_id", "m1"))


def test_encoder_round_trips_sorted_deduplicated_and_finite() -> None:
    batch = SampleBatch(
        [("a_total", LAB), ("b", LAB)],
        np.array([1, 0, 0, 0, 1], dtype=np.uint32),
        np.array([5, 2, 1, 2, -3], dtype=np.int64),
        np.array([9.5, 2.0, 1.0, 7.0, np.inf]),
    )
    raw, n = encode_batch(batch)
    got = decode_write_request(bytes(cramjam.snappy.compress_raw(raw)))
    # a_total: ts 1 -> 1.0, ts 2 -> 2.0 (the first of the two at ts 2); b: ts 5 -> 9.5 (inf at -3 dropped)
    assert n == 3
    assert got == [Sample("a_total", LAB, 1.0, 1), Sample("a_total", LAB, 2.0, 2), Sample("b", LAB, 9.5, 5)]
    # a stale marker is sent bit for bit (engines end the series there as the stores do)
    stale = SampleBatch([("b", LAB)], np.zeros(1, np.uint32), np.array([6]), np.array([STALE_NAN]))
    raw, n = encode_batch(stale)
    (marker,) = decode_write_request(bytes(cramjam.snappy.compress_raw(raw)))
    assert n == 1 and struct.pack("<d", marker.value) == struct.pack("<Q", 0x7FF0000000000002)


def test_buffer_replays_in_order_across_reopen_and_skips_a_torn_record(tmp_path) -> None:
    buf = SegmentBuffer(tmp_path, segment_bytes=40)
    buf.write([(2, b"first-body"), (3, b"second-body")])
    buf.write([(4, b"third-body")])
    assert (buf.samples, buf.bytes) == (9, 3 * 12 + 10 + 11 + 10)  # 12-byte headers + bodies
    assert buf.peek() == (2, b"first-body")
    buf.ack()
    with pytest.raises(BufferLockedError, match="in use by another process"):
        SegmentBuffer(tmp_path)
    buf.close()
    again = SegmentBuffer(tmp_path)
    assert again.samples == 7  # the acknowledged record is not counted again
    assert again.peek() == (3, b"second-body")
    again.ack()
    # a crash while writing: half a record at the end of the newest segment
    newest = max(tmp_path.glob("*.seg"))
    with open(newest, "ab") as f:
        f.write(b"\x10\x00")
    assert again.peek() == (4, b"third-body")
    again.ack()
    assert again.peek() is None
    again.close()


def _vs(lo: int, hi: int, deps: tuple[str, ...] = ("d1",)) -> ValueSet:
    return ValueSet(lo, hi, frozenset(deps))


def test_segments_split_ragged_edges_and_promotions() -> None:
    sets = [
        _vs(10, 30),
        _vs(30, 60),
        _vs(60, 90),
        _vs(90, 100),
        _vs(100, 120, ("d2",)),
        _vs(120, 150, ("d2",)),
    ]
    got = [(s.first, s.count, s.width_ms, s.first_eval_ms) for s in segments(sets)]
    # [10,30) ragged; [30,60) [60,90) one run evaluated at 59 and 89 ms; [90,100) ragged; d2's sets
    assert got == [(0, 1, 20, 29), (1, 2, 30, 59), (3, 1, 10, 99), (4, 1, 20, 119), (5, 1, 30, 149)]
    assert segments([_vs(0, 10, ())]) == []


def test_compiled_promql_per_flavor() -> None:
    sel = Selection(
        "x_total", Reducer.INCREASE, (_vs(0, 30_000, ("d.1", "d2")),), ("le",), (("model_id", "m"),)
    )
    seg = segments(sel.value_sets)[0]
    vm = compile_segment(sel, seg, Flavor.VICTORIAMETRICS)
    x = '{__name__="x_total",model_id="m",deployment_id=~"d\\\\.1|d2"}'
    assert f"increase_prometheus({x}[630000ms] offset -1ms)" in vm  # the pair gap 10 min + 30 s
    assert f"increase_prometheus({x}[600000ms] offset 29999ms)" in vm
    assert "label_replace(count by (le) (count_over_time(" in vm
    assert f"increase({x}[30000ms])" in compile_segment(sel, seg, Flavor.PROMETHEUS)


@pytest.mark.parametrize(
    ("store", "message"),
    [
        ({"kind": "prometheus"}, "kind: prometheus needs flavor, query_url, remote_write_url"),
        ({"kind": "duckdb", "query_url": "http://a:1"}, "query_url only applies to kind: prometheus"),
        ({"kind": "prometheus", "flavor": "thanos"}, "`store.flavor`: Input should be 'prometheus' or"),
        (
            {
                "kind": "prometheus",
                "flavor": "prometheus",
                "query_url": "localhost:9090",
                "remote_write_url": "x",
            },
            "is not an http(s) URL",
        ),
        (
            {
                "kind": "prometheus",
                "flavor": "prometheus",
                "query_url": "http://a:1",
                "remote_write_url": "http://a:1/api/v1/write",
                "bearer_token": "t",
                "basic_auth": {"username": "u", "password": "p"},
            },
            "give basic_auth or bearer_token, not both",
        ),
        ({"kind": "prometheus", "flavour": "x"}, "did you mean `flavor`?"),
    ],
)
def test_store_config_errors_say_what_to_fix(store, message) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config({"store": store})
    assert message in str(err.value)


def test_engine_options_from_config(tmp_path) -> None:
    config = parse_config(
        {
            "data_dir": str(tmp_path),
            "store": {
                "kind": "prometheus",
                "flavor": "victoriametrics",
                "query_url": "http://127.0.0.1:8428",
                "remote_write_url": "http://127.0.0.1:8428/api/v1/write",
                "bearer_token": "tok",
                "tenant_header": {"X-Scope-OrgID": "team-a"},
            },
        }
    )
    options = engine_options(config)
    assert options == EngineOptions(
        Flavor.VICTORIAMETRICS,
        "http://127.0.0.1:8428",
        "http://127.0.0.1:8428/api/v1/write",
        tmp_path / "remote_write_buffer",
        {"X-Scope-OrgID": "team-a", "Authorization": "Bearer tok"},
        None,
    )
    assert engine_options(parse_config({})) is None


def test_engine_down_is_a_503_and_metrics_show_the_queue(tmp_path) -> None:
    port = free_port()  # nothing listens there
    config = parse_config(
        {
            "data_dir": str(tmp_path),
            "store": {
                "kind": "prometheus",
                "flavor": "prometheus",
                "query_url": f"http://127.0.0.1:{port}",
                "remote_write_url": f"http://127.0.0.1:{port}/api/v1/write",
            },
            "organizations": [{"name": "o", "api_keys": [{"key": "k-503", "type": "WORKSPACE_MANAGE_ALL"}]}],
            "models": [{"id": "m1", "organization": "o", "deployments": [{"id": "d1"}]}],
        }
    )
    app = create_app(config, scrape=False, gateway=False)
    with TestClient(app) as client:
        store = app.state.service.store
        assert isinstance(store, PrometheusStore)
        store.append(SampleBatch.from_samples([Sample("up", LAB, 1.0, 1_000)]))
        resp = client.get("/v1/models/m1/deployments/d1/metrics", headers={"Authorization": "Api-Key k-503"})
        assert resp.status_code == 503
        assert f"the metrics engine at http://127.0.0.1:{port} did not answer" in resp.json()["error"]
        metrics = client.get("/service/metrics").text
        assert "servemetrics_remote_write_queue_samples 1.0" in metrics
        assert "servemetrics_remote_write_failed_samples_total 0.0" in metrics
