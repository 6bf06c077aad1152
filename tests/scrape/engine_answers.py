"""What the API answers for an engine metric (SUMMARY of deployment ``d1``), or None when it omits it."""

from __future__ import annotations

from servemetrics.query.execute import execute
from servemetrics.query.plan import build_plan
from servemetrics.query.windows import Mode
from servemetrics.store.base import Store
from tests.query.helpers import T0, at, wire
from tests.scrape.answers import D1


def answer(store: Store, name: str, start_s: float, end_s: float) -> list[float | None] | None:
    """The SUMMARY values of ``name`` over ``[T0 + start_s, T0 + end_s)``, one per label set, as the API
    answers them; None when the answer omits the metric (no series)."""
    end_ms = at(end_s)
    plan = build_plan(
        "m1", Mode.SUMMARY, at(start_s), end_ms, [name], lambda _s, _e: [(T0 - 3_600_000, D1)], end_ms
    )
    resp = wire(execute(plan, store))
    if not resp["metric_descriptors"]:
        return None
    assert [d["name"] for d in resp["metric_descriptors"]] == [name]
    values = resp["metric_values"][0]["values"][0]
    return values if isinstance(values, list) else [values]
