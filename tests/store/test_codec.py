"""The chunk codec returns exactly what it encoded."""

from __future__ import annotations

import numpy as np
import pytest

from servemetrics.store import duckdb_codec as codec

RNG = np.random.default_rng(3)
VALUES = {
    "counter": np.cumsum(RNG.poisson(300, 480)).astype(float),
    "percent": np.round(RNG.normal(60, 15, 480), 1),
    "bytes": 4e9 + RNG.integers(0, 1 << 28, 480).astype(float),
    "float": RNG.normal(size=480),
    "decimals": np.round(np.cumsum(RNG.uniform(10, 20, 480)), 3),
    "special": np.array([1.0, np.nan, np.inf, -np.inf, -0.0, 5e300, -5e-300]),
    "huge_ints": np.array([-(2.0**62), 2.0**62, 0.0]),
    "one": np.array([3.5]),
    "constant": np.full(100, 8.0),
    "ratio": np.round(np.clip(RNG.normal(60, 15, 480), 0, 100), 1) / 100,  # some one ulp off a decimal
    "ratio_special": np.concatenate([np.round(RNG.normal(60, 15, 50), 1) / 100, [np.nan, -np.inf, 1e300]]),
}


@pytest.mark.parametrize("name", sorted(VALUES))
def test_values_round_trip(name: str) -> None:
    v = VALUES[name]
    blob = codec.encode_values(v, int(codec.decimals_needed(v).max()))
    out = codec.decode_values(blob)
    assert np.array_equal(out, v, equal_nan=True)
    assert np.array_equal(np.signbit(out), np.signbit(v)) or name != "float"


def test_near_decimals_cost_about_the_decimals() -> None:
    """57.3 / 100 is one ulp off 0.573: scaled integers plus a mostly-zero correction, not raw bits."""
    v = VALUES["ratio"]
    assert int(codec.decimals_needed(v).max()) == 255
    blob = codec.encode_values(v, 255)
    assert blob[0] == 0x80 | 3
    assert len(blob) < 2.5 * v.size  # raw XOR bits cost about 7 B per sample
    assert np.array_equal(codec.decode_values(blob).view(np.uint64), v.view(np.uint64))


def test_compact_forms() -> None:
    counter = VALUES["counter"]
    assert len(codec.encode_values(counter, 0)) < 1.0 * counter.size  # deltas in about a byte
    assert len(codec.encode_values(VALUES["constant"], 0)) < 30


@pytest.mark.parametrize(
    "ts",
    [
        1_767_225_600_000 + 15_000 * np.arange(480, dtype=np.int64),
        np.array([5], dtype=np.int64),
        np.array([5, 9], dtype=np.int64),
        np.sort(RNG.choice(10**9, 300, replace=False)).astype(np.int64) + 1_767_225_600_000,
    ],
)
def test_timestamps_round_trip(ts: np.ndarray) -> None:
    blob = codec.encode_ts(ts)
    assert np.array_equal(codec.decode_ts(blob), ts)


def test_regular_grid_costs_only_a_header() -> None:
    assert len(codec.encode_ts(15_000 * np.arange(480, dtype=np.int64))) == 21


def test_ints_round_trip_extremes() -> None:
    for x in (
        np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0]),
        np.arange(-5, 5),
        np.zeros(0, np.int64),
    ):
        assert np.array_equal(codec.decode_ints(codec.encode_ints(x.astype(np.int64))), x)
