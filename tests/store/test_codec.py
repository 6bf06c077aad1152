"""The chunk codec returns exactly what it encoded, bit for bit, in the format it writes and in the
first format (``codec_v1``, what older data directories hold)."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from servemetrics.store import duckdb_codec as codec
from tests.store import codec_v1

RNG = np.random.default_rng(3)
STALE = np.array([0x7FF0000000000002], dtype=np.uint64).view(np.float64)[0]  # Prometheus' StaleNaN
T_2026 = 1_767_225_600_000


def _with(values: np.ndarray, at: list[int], what: float) -> np.ndarray:
    out = values.copy()
    out[at] = what
    return out


def _counter_with_resets() -> np.ndarray:
    c = np.cumsum(RNG.poisson(300, 480)).astype(float)
    c[200:] -= c[199] - 3.0  # restarted at 3
    c[400:] -= c[399]  # restarted at 0
    return c


VALUES = {
    "counter": np.cumsum(RNG.poisson(300, 480)).astype(float),
    "counter_resets": _counter_with_resets(),
    "counter_stale_end": _with(np.cumsum(RNG.poisson(3, 480)).astype(float), [470, 471], STALE),
    "counter_nan": _with(np.cumsum(RNG.poisson(3, 480)).astype(float), [0, 17], np.nan),
    "percent": np.round(RNG.normal(60, 15, 480), 1),
    "bytes": 4e9 + RNG.integers(0, 1 << 28, 480).astype(float),
    "float": RNG.normal(size=480),
    "decimals": np.round(np.cumsum(RNG.uniform(10, 20, 480)), 3),
    "sum_6": np.round(np.cumsum(RNG.normal(28.7, 2.2, 480)), 6),
    "special": np.array([1.0, np.nan, np.inf, -np.inf, -0.0, 5e300, -5e-300, STALE]),
    "infinities": _with(np.round(RNG.normal(60, 15, 100), 1), [3, 50], np.inf)
    * np.where(np.arange(100) == 50, -1, 1),
    "negative_zero": np.array([0.0, -0.0, 1.0, -0.0, 2.0]),
    "huge_ints": np.array([-(2.0**62), 2.0**62, 0.0]),
    "beyond_2_53": np.array([2.0**53, 2.0**53 + 2, 2.0**60, 3.0]),
    "one": np.array([3.5]),
    "two": np.array([1e-300, 7.0]),
    "empty": np.zeros(0),
    "constant": np.full(100, 8.0),
    "all_stale": np.full(20, STALE),
    "ratio": np.round(np.clip(RNG.normal(60, 15, 480), 0, 100), 1) / 100,  # some one ulp off a decimal
    "ratio_special": np.concatenate([np.round(RNG.normal(60, 15, 50), 1) / 100, [np.nan, -np.inf, 1e300]]),
    "ms_to_s": np.round(RNG.uniform(0, 5000, 300), 2) / 1000,  # an adapter's milliseconds / 1000
}

TIMESTAMPS = {
    "grid": T_2026 + 15_000 * np.arange(480, dtype=np.int64),
    "one": np.array([5], dtype=np.int64),
    "two": np.array([5, 9], dtype=np.int64),
    "random": np.sort(RNG.choice(10**9, 300, replace=False)).astype(np.int64) + T_2026,
    "jitter": T_2026 + 15_000 * np.arange(480, dtype=np.int64) + RNG.integers(-40, 40, 480),
    "grid_with_gap": np.concatenate(
        [T_2026 + 15_000 * np.arange(100), T_2026 + 10**12 + 15_000 * np.arange(50)]
    ),
    "negative": -(10**12) + 1000 * np.arange(10, dtype=np.int64),
    "wide": np.array([np.iinfo(np.int64).min + 1, -1, 0, np.iinfo(np.int64).max], dtype=np.int64),
}


def _random_series(k: int) -> np.ndarray:
    """One of several series shapes, with markers, infinities and resets sprinkled in (seeded by k)."""
    rng = np.random.default_rng(1000 + k)
    n = int(rng.integers(1, 600))
    shape = k % 5
    if shape == 0:
        v = np.cumsum(rng.poisson(rng.uniform(0, 400), n)).astype(float)
    elif shape == 1:
        v = np.round(rng.normal(0, 10.0 ** rng.integers(0, 9), n), int(rng.integers(0, 7)))
    elif shape == 2:
        v = np.round(rng.uniform(0, 100, n), int(rng.integers(0, 3))) / 10.0 ** int(rng.integers(1, 4))
    elif shape == 3:
        v = rng.standard_cauchy(n)
    else:
        v = np.full(n, float(rng.integers(0, 10)))
    for what in (STALE, np.nan, np.inf, -np.inf, 0.0, -0.0):
        if rng.random() < 0.3:
            v[rng.integers(0, n, int(rng.integers(1, 4)))] = what
    return v


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and np.array_equal(a.view(np.uint64), b.view(np.uint64))


def _encode(v: np.ndarray) -> bytes:
    return codec.encode_values(v, int(codec.decimals_needed(v).max()) if v.size else 0)


@pytest.mark.parametrize("name", sorted(VALUES))
def test_values_round_trip_bit_for_bit(name: str) -> None:
    v = VALUES[name]
    assert _same_bits(codec.decode_values(_encode(v)), v)


def test_random_series_round_trip_bit_for_bit() -> None:
    for k in range(300):
        v = _random_series(k)
        assert _same_bits(codec.decode_values(_encode(v)), v), k


@pytest.mark.parametrize("name", sorted(TIMESTAMPS))
def test_timestamps_round_trip(name: str) -> None:
    ts = TIMESTAMPS[name]
    assert np.array_equal(codec.decode_ts(codec.encode_ts(ts)), ts)


def test_random_timestamps_round_trip() -> None:
    for k in range(200):
        rng = np.random.default_rng(k)
        n = int(rng.integers(1, 500))
        steps = rng.choice([15_000, 30_000, 1]) + rng.integers(0, int(rng.choice([1, 2, 100, 10**7])), n)
        ts = T_2026 + np.cumsum(steps).astype(np.int64)
        assert np.array_equal(codec.decode_ts(codec.encode_ts(ts)), ts), k


def test_ints_round_trip_extremes() -> None:
    for x in (
        np.array([np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0]),
        np.array([np.iinfo(np.int64).max, np.iinfo(np.int64).min]),
        np.arange(-5, 5),
        np.zeros(0, np.int64),
        np.array([7]),
    ):
        assert np.array_equal(codec.decode_ints(codec.encode_ints(x.astype(np.int64))), x)


# -- the first format ------------------------------------------------------------------------------

V1_VALUES = {k: v for k, v in VALUES.items() if k not in ("negative_zero", "special", "empty")}
"""The first format turned -0.0 in a decimal chunk into 0.0 and wrote no empty chunk: left out here."""


@pytest.mark.parametrize("name", sorted(V1_VALUES))
def test_values_of_the_first_format_read_back(name: str) -> None:
    v = V1_VALUES[name]
    blob = codec_v1.encode_values(v, int(codec_v1.decimals_needed(v).max()))
    assert _same_bits(codec.decode_values(blob), v)


@pytest.mark.parametrize("name", sorted(set(TIMESTAMPS) - {"wide"}))
def test_timestamps_of_the_first_format_read_back(name: str) -> None:
    ts = TIMESTAMPS[name]
    assert np.array_equal(codec.decode_ts(codec_v1.encode_ts(ts)), ts)


def test_random_series_of_the_first_format_read_back() -> None:
    for k in range(300):
        v = _random_series(k)
        v[(v == 0) & np.signbit(v)] = 0.0
        blob = codec_v1.encode_values(v, int(codec_v1.decimals_needed(v).max()))
        assert _same_bits(codec.decode_values(blob), v), k


def test_the_first_format_reference_is_the_old_code() -> None:
    """``codec_v1`` writes the bytes the store wrote before the second format (digest of its blobs for a
    fixed set of series, taken with the code of commit e3ccb55)."""
    h = hashlib.sha256()
    for name in sorted(V1_VALUES):
        v = V1_VALUES[name]
        h.update(codec_v1.encode_values(v, int(codec_v1.decimals_needed(v).max())))
    for name in sorted(set(TIMESTAMPS) - {"wide"}):
        h.update(codec_v1.encode_ts(TIMESTAMPS[name]))
    assert h.hexdigest() == V1_DIGEST


V1_DIGEST = "9ea100514a362f75f365db68c677683800685ff68860f65f9aa71bfe67c081a3"


# -- what it costs -----------------------------------------------------------------------------------


def test_format_tags() -> None:
    """Blobs written now never start with a byte of the first format (that is how the decoder tells)."""
    first_format_ts, first_format_values = {0, 1}, {*range(7), *range(0x80, 0x87), 255}
    for v in [*VALUES.values(), *(_random_series(k) for k in range(50))]:
        assert _encode(v)[0] not in first_format_values
    for ts in TIMESTAMPS.values():
        assert codec.encode_ts(ts)[0] not in first_format_ts


def test_sizes() -> None:
    """Hand-checked costs: a 15 s grid of 480 points is a 12-byte header (mode, first and step as zigzag
    varints: 6 + 3 bytes, n: 2); a constant chunk a few bytes; a counter rising by ~300 (deltas in one
    byte plane, deflated) under a byte per sample; the GPU ratios (``57.3 / 100``) rebuilt by the divided
    form with no correction at all, about as cheap as the percentages they came from."""
    assert len(codec.encode_ts(TIMESTAMPS["grid"])) == 1 + 6 + 3 + 2
    assert len(_encode(VALUES["constant"])) <= 6
    assert len(_encode(VALUES["counter"])) < 0.95 * 480
    ratio, percent = VALUES["ratio"], np.round(VALUES["ratio"] * 100, 1)
    blob = _encode(ratio)
    assert blob[0] == 0x40 + 4 * 3 + 2  # near-decimal, 3 decimals, divided by 10**2
    assert len(blob) <= len(_encode(percent)) + 4
    v1 = codec_v1.encode_values(ratio, 255)
    assert len(blob) < 0.75 * len(v1)
