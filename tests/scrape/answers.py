"""What the API answers for the scraper tests' stores: SUMMARY of one metric of deployment ``d1``."""

from __future__ import annotations

from servemetrics.query.execute import execute
from servemetrics.query.plan import build_plan
from servemetrics.query.windows import Mode
from servemetrics.store.base import Store
from tests.query.helpers import T0, at, wire

D1 = frozenset({"d1"})
"""The deployment the scraped target belongs to (serving since an hour before ``T0``)."""


def summary(store: Store, name: str, start_s: float, end_s: float) -> list[float | None]:
    """The SUMMARY values of ``name`` over ``[T0 + start_s, T0 + end_s)`` (seconds), as the API answers."""
    return summary_ms(store, name, at(start_s), at(end_s))


def summary_ms(store: Store, name: str, start_ms: int, end_ms: int) -> list[float | None]:
    """The SUMMARY values of ``name`` over ``[start_ms, end_ms)`` (epoch ms), as the API answers them."""
    plan = build_plan(
        "m1", Mode.SUMMARY, start_ms, end_ms, [name], lambda _s, _e: [(T0 - 3_600_000, D1)], end_ms
    )
    resp = wire(execute(plan, store))
    assert [d["name"] for d in resp["metric_descriptors"]] == [name]
    values = resp["metric_values"][0]["values"][0]
    return values if isinstance(values, list) else [values]


def series_ms(store: Store, name: str, start_ms: int, end_ms: int) -> list[list[float | None]]:
    """The SERIES values of ``name`` over ``[start_ms, end_ms)`` (epoch ms, at most an hour: 30 s steps),
    one list per value set (the window start, then every grid point), as the API answers them."""
    plan = build_plan(
        "m1", Mode.SERIES, start_ms, end_ms, [name], lambda _s, _e: [(T0 - 3_600_000, D1)], end_ms
    )
    resp = wire(execute(plan, store))
    assert [d["name"] for d in resp["metric_descriptors"]] == [name]
    rows = [mv["values"][0] for mv in resp["metric_values"]]
    return [v if isinstance(v, list) else [v] for v in rows]
