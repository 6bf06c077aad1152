"""Custom metrics by their own name (``query.custom``): kinds and units from the name, only the asking
model's series, answers hand-computed over the reference store."""

from __future__ import annotations

import pytest

from servemetrics.catalog.model import Kind, Unit
from servemetrics.query.custom import custom_metric, unit_of
from servemetrics.query.errors import UnknownMetricError
from servemetrics.query.plan import build_plan
from servemetrics.query.windows import Mode
from tests.query.helpers import at, series, store_with
from tests.query.test_execute import D1, execute, values_of


def store():
    mine = {"deployment_id": "d1", "source": "custom"}
    return store_with(
        series("queue_depth", [(0, 3), (15, 5)], replica="r1", **mine),
        series("queue_depth", [(0, 1), (15, 1)], replica="r2", **mine),
        series("jobs_total", [(0, 10), (15, 14), (30, 20)], **mine),
        series("load_seconds_bucket", [(0, 0), (15, 4)], le="1.0", **mine),
        series("load_seconds_bucket", [(0, 0), (15, 4)], le="+Inf", **mine),
        series("theirs_total", [(0, 1), (15, 9)], model_id="m2", deployment_id="d9", source="custom"),
        series("vllm:new_thing", [(0, 1)], deployment_id="d1", source="vllm"),
    )


def test_kinds_and_units_from_the_names() -> None:
    s = store()
    found = {n: custom_metric(s, "m1", n) for n in ("queue_depth", "jobs_total", "load_seconds")}
    assert {n: (m.kind, m.unit) for n, m in found.items() if m} == {
        "queue_depth": (Kind.GAUGE, Unit.COUNT),
        "jobs_total": (Kind.COUNTER, Unit.COUNT),
        "load_seconds": (Kind.HISTOGRAM, Unit.SECONDS),
    }
    assert custom_metric(s, "m1", "theirs_total") is None  # another model's
    assert custom_metric(s, "m1", "vllm:new_thing") is None  # an engine series, not a custom one
    assert custom_metric(s, "m1", "baseten_replicas_active") is None  # the catalog's
    assert [unit_of(n) for n in ("a_bytes", "cpu_seconds_total", "hit_ratio", "x_seconds_count")] == [
        Unit.BYTES,
        Unit.SECONDS,
        Unit.RATIO,
        Unit.SECONDS,
    ]


def test_answers_summed_across_series() -> None:
    s = store()

    def run(mode, names):
        plan = build_plan(
            "m1",
            mode,
            at(0),
            at(60),
            names,
            lambda _s, _e: [(at(-86400), D1)],
            at(60),
            custom_of=lambda n: custom_metric(s, "m1", n),
        )
        return execute(plan, s)

    body = run(Mode.SUMMARY, ["queue_depth", "jobs_total", "load_seconds"])
    assert values_of(body, "queue_depth") == [[4.0 + 1.0]]  # means 4 and 1, summed
    assert values_of(body, "jobs_total") == [[10.0]]
    [[p50, *_, avg]] = values_of(body, "load_seconds")
    assert (p50, avg) == (0.5, None)  # 4 in (0, 1]: rank 2 -> 0.5; no _sum stored: no avg
    with pytest.raises(UnknownMetricError) as exc:
        run(Mode.SUMMARY, ["theirs_total", "queue_depth"])
    assert exc.value.names == ["theirs_total"]


def test_a_misspelt_catalog_name_gets_the_closest_one():
    err = str(UnknownMetricError(["baseten_gpu_utilisation", "bogus"]))
    assert err.startswith(
        "unknown metric name(s): baseten_gpu_utilisation (did you mean baseten_gpu_utilization?), bogus."
    )
