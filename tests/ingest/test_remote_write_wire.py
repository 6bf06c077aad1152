"""``wire.decode_batch`` against the protobuf runtime's parser (upb) as the reference decoder.

Bodies: random series written by the runtime (which leaves proto3 defaults out: a value of 0, a
timestamp of 0), by our numpy encoder (``encode_batch``), and by hand (labels after samples, exemplars
and histograms, metadata); every prefix of a body and random byte flips: where the reference parses,
ours gives the same samples; where it refuses, ours refuses too.
"""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
from google.protobuf.message import DecodeError

from servemetrics.remote_write import WriteRequest, encode_batch
from servemetrics.remote_write.wire import LabelCache, WireError, decode_batch
from servemetrics.samples import STALE_NAN, Sample, SampleBatch, is_stale_nan
from servemetrics.types import labels_of

T0 = 1_767_225_600_000


def reference(raw: bytes) -> list[tuple[str, tuple, int, bytes]]:
    """The samples upb finds, as (name, labels, ts, value bits): the receiver's rule (non-finite values
    dropped but the stale marker)."""
    request = WriteRequest()
    request.ParseFromString(raw)
    out = []
    for i, series in enumerate(request.timeseries):
        labels = {lb.name: lb.value for lb in series.labels}
        name = labels.pop("__name__", "")
        if not name:
            raise WireError(f"time series {i} has no __name__ label")
        for s in series.samples:
            if math.isfinite(s.value) or is_stale_nan(s.value):
                out.append((name, labels_of(labels), s.timestamp, struct.pack("<d", s.value)))
    return out


def ours(raw: bytes) -> list[tuple[str, tuple, int, bytes]]:
    batch = decode_batch(raw, LabelCache())
    out = []
    for i, t, bits in zip(
        batch.series_index.tolist(), batch.ts_ms.tolist(), batch.values.view(np.uint64).tolist(), strict=True
    ):
        name, labels = batch.series[i]
        out.append((name, labels, t, struct.pack("<Q", bits)))
    return out


def outcome(decode, raw: bytes):
    try:
        return decode(raw)
    except (DecodeError, WireError) as exc:
        return type(exc).__name__ if isinstance(exc, DecodeError) else "error"


def random_request(rng: np.random.Generator) -> WriteRequest:
    """Series with 0-6 samples: zero values, zero and negative timestamps, markers, NaN, infinities,
    short and long timestamps, a repeated series, empty label values, non-ASCII text."""
    request = WriteRequest()
    specials = [0.0, -0.0, math.nan, STALE_NAN, math.inf, -math.inf, 1e300, 5e-324]
    names = ["req_total", "vllm:kv_cache_usage_perc", "lat_bucket", "ünïcode"]
    for _ in range(int(rng.integers(0, 12))):
        series = request.timeseries.add()
        labels = {"__name__": str(rng.choice(names)), "model_id": f"m{rng.integers(0, 3)}"}
        if rng.random() < 0.3:
            labels["le"] = str(rng.choice(["0.1", "+Inf", "1"]))
        if rng.random() < 0.2:
            labels["empty"] = ""
        for k, v in sorted(labels.items()):
            series.labels.add(name=k, value=v)
        base = int(rng.choice([T0, 0, -5_000, 1, 2**40, 2**62]))
        for j in range(int(rng.integers(0, 7))):
            value = float(rng.choice(specials)) if rng.random() < 0.3 else float(rng.integers(0, 1000))
            ts = base + j * int(rng.choice([0, 1, 15_000]))
            series.samples.add(value=value, timestamp=ts)
    return request


@pytest.mark.parametrize("seed", range(40))
def test_random_bodies_equal_the_reference(seed: int) -> None:
    raw = random_request(np.random.default_rng(seed)).SerializeToString()
    assert outcome(ours, raw) == outcome(reference, raw)


def test_a_cache_shared_by_many_bodies_gives_the_reference_answers() -> None:
    """Series seen before are looked up by their label bytes (the one-sample guess included), among
    bodies that share series, change their sample counts and values, and carry a repeated series."""
    cache = LabelCache()
    keys = [("req_total", labels_of({"model_id": "m1", "replica": f"r{i}"})) for i in range(30)]
    rng = np.random.default_rng(11)
    for _ in range(20):
        n = int(rng.integers(1, 90))
        batch = SampleBatch(
            keys,
            rng.integers(0, 30, n).astype(np.uint32),
            T0 + rng.integers(0, 4, n) * 15_000,
            np.where(rng.random(n) < 0.3, 0.0, rng.random(n)),
        )
        raw, _ = encode_batch(batch)
        again = SampleBatch(keys[:1], np.zeros(1, np.uint32), np.array([T0 + 1]), np.ones(1))
        raw += encode_batch(again)[0]  # concatenated requests are one: r0 twice in the body
        got = decode_batch(raw, cache)
        rows = [
            (got.series[i][0], got.series[i][1], t, struct.pack("<d", v))
            for i, t, v in zip(
                got.series_index.tolist(), got.ts_ms.tolist(), got.values.tolist(), strict=True
            )
        ]
        assert rows == reference(raw)


def test_numpy_encoded_batches_equal_the_reference() -> None:
    rng = np.random.default_rng(7)
    keys = [("req_total", labels_of({"model_id": "m1", "replica": f"r{i}"})) for i in range(50)]
    n = 5_000
    batch = SampleBatch(
        keys,
        rng.integers(0, 50, n).astype(np.uint32),
        T0 + rng.integers(0, 3_600_000, n),
        np.where(rng.random(n) < 0.1, 0.0, rng.random(n) * 100),
    )
    raw, count = encode_batch(batch)
    got = ours(raw)
    assert got == reference(raw)
    assert len(got) == count


def _field(number: int, payload: bytes) -> bytes:
    return bytes([number << 3 | 2, len(payload)]) + payload


def _label(name: str, value: str) -> bytes:
    return _field(1, _field(1, name.encode()) + _field(2, value.encode()))


def _sample(value: float, ts: int) -> bytes:
    return _field(2, b"\x09" + struct.pack("<d", value) + b"\x10" + bytes([ts]))


def test_labels_after_samples_exemplars_histograms_and_metadata_by_hand() -> None:
    exemplar = _field(3, _label("trace_id", "abc") + b"\x09" + struct.pack("<d", 9.0) + b"\x10\x05")
    histogram = _field(4, b"\x08\x03")
    after = _field(1, _sample(1.5, 7) + _label("__name__", "late_name") + _label("a", "b"))
    extras = _field(1, _label("__name__", "x") + _sample(2.0, 8) + exemplar + histogram + _sample(3.0, 9))
    reversed_sample = _field(1, _label("__name__", "y") + _field(2, b"\x10\x0b\x09" + struct.pack("<d", 4.0)))
    metadata = _field(3, b"\x08\x01" + _field(2, b"x"))
    raw = after + metadata + extras + reversed_sample
    want = [
        ("late_name", (("a", "b"),), 7, struct.pack("<d", 1.5)),
        ("x", (), 8, struct.pack("<d", 2.0)),
        ("x", (), 9, struct.pack("<d", 3.0)),
        ("y", (), 11, struct.pack("<d", 4.0)),
    ]
    assert reference(raw) == want
    assert ours(raw) == want


def test_a_series_without_name_is_refused_by_ordinal() -> None:
    raw = _field(1, _label("__name__", "a") + _sample(1.0, 1)) + _field(
        1, _label("job", "x") + _sample(1.0, 1)
    )
    with pytest.raises(WireError, match="time series 1 has no __name__ label"):
        decode_batch(raw, LabelCache())


def test_every_prefix_and_byte_flips_match_the_reference() -> None:
    rng = np.random.default_rng(3)
    raw = random_request(rng).SerializeToString() + random_request(rng).SerializeToString()
    assert raw
    cases = [raw[:k] for k in range(len(raw))]
    for _ in range(300):
        flipped = bytearray(raw)
        flipped[int(rng.integers(0, len(raw)))] ^= 1 << int(rng.integers(0, 8))
        cases.append(bytes(flipped))
    for case in cases:
        want, got = outcome(reference, case), outcome(ours, case)
        if want == "DecodeError":
            assert got == "error", case
        else:
            assert got == want, case


def test_the_cache_gives_the_same_keys_and_a_full_cache_starts_again() -> None:
    cache = LabelCache(size=2)
    bodies = [_field(1, _label("__name__", f"s{i}") + _sample(1.0, 1)) for i in range(5)]
    for _ in range(2):
        for i, raw in enumerate(bodies):
            assert decode_batch(raw, cache).series == [(f"s{i}", ())]
    assert len(cache._keys) <= 2


def test_a_sample_row_per_sample_is_what_the_receiver_decodes() -> None:
    raw = _field(1, _label("__name__", "g") + _sample(0.5, 3))
    assert list(decode_batch(raw, LabelCache()).samples()) == [Sample("g", (), 0.5, 3)]
