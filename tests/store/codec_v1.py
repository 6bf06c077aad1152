"""The first chunk format's encoder (``duckdb_codec`` as of commit e3ccb55, before the second format),
kept for the tests only: blobs it writes are what data directories of that time hold, and the store's
decoder must read them back exactly (``test_codec.py``, ``test_duckdb.py``)."""

from __future__ import annotations

import struct
import zlib

import numpy as np

MAX_DECIMALS = 6
_SCALES = [10.0**e for e in range(MAX_DECIMALS + 1)]
_TS_HEAD = struct.Struct("<Bqqi")  # mode, first, step, n
_INT_HEAD = struct.Struct("<BBBqqi")  # kind (0 for, 1 delta), width, deflated?, base, first, n
_VAL_RAW = 255
_VAL_NEAR = 0x80  # | decimals: scaled integers and a correction (XOR) per value
_LEN = struct.Struct("<I")
_WIDTHS = ((1, np.uint8), (2, np.uint16), (4, np.uint32), (8, np.uint64))


def _pack(kind: int, base: int, first: int, rest: np.ndarray) -> bytes:
    """Pack non-negative ``rest`` (uint64) with the smallest byte width, byte-transposed, maybe deflated."""
    top = int(rest.max()) if rest.size else 0
    if top == 0:  # all equal: the header says it all
        return _INT_HEAD.pack(kind, 0, False, base, first, rest.size)
    width, dtype = next((w, d) for w, d in _WIDTHS if top < (1 << (8 * w)))
    planes = rest.astype(dtype).view(np.uint8).reshape(-1, width).T.tobytes()
    packed = _deflate(planes) if len(planes) > 64 else planes
    squeezed = len(packed) < len(planes)
    body = packed if squeezed else planes
    return _INT_HEAD.pack(kind, width, squeezed, base, first, rest.size) + body


def _deflate(data: bytes) -> bytes:
    c = zlib.compressobj(6, zlib.DEFLATED, -15)  # raw deflate: no header, fast to inflate when small
    return c.compress(data) + c.flush()


def encode_ints(x: np.ndarray) -> bytes:
    """Pack an int64 array as frame of reference or as deltas, whichever is smaller."""
    n = x.size
    lo = int(x.min()) if n else 0
    span = int(x.max()) - lo if n else 0
    if n > 1:
        d = np.diff(x)
        dlo = int(d.min())
        if int(d.max()) - dlo < span and int(d.max()) - dlo < (1 << 63):
            return _pack(1, dlo, int(x[0]), (d - dlo).astype(np.uint64))
    if span >= (1 << 63):  # does not fit: keep the bit patterns
        return _pack(0, 0, 0, x.view(np.uint64))
    return _pack(0, lo, 0, (x - lo).astype(np.uint64))


def encode_ts(ts: np.ndarray) -> bytes:
    """Encode sorted int64 timestamps (a regular grid costs only the header)."""
    n = ts.size
    step = int(ts[1] - ts[0]) if n > 1 else 0
    if n <= 2 or bool(np.all(np.diff(ts) == step)):
        return _TS_HEAD.pack(0, int(ts[0]) if n else 0, step, n)
    return _TS_HEAD.pack(1, int(ts[0]), 0, n) + encode_ints(np.diff(ts))


def decimals_needed(values: np.ndarray) -> np.ndarray:
    """Per value: the fewest decimals (0..MAX_DECIMALS) that represent it exactly, or 255 for none."""
    need = np.full(values.size, _VAL_RAW, dtype=np.uint8)
    with np.errstate(invalid="ignore", over="ignore"):
        for e in range(MAX_DECIMALS, -1, -1):
            scaled = np.rint(values * _SCALES[e])
            ok = (np.abs(scaled) < 2.0**53) & (scaled / _SCALES[e] == values)
            need[ok] = e
    return need


def encode_values(values: np.ndarray, decimals: int) -> bytes:
    """Encode float64 values; ``decimals`` is the chunk's max of ``decimals_needed`` (255 = raw)."""
    if decimals != _VAL_RAW:
        with np.errstate(invalid="ignore", over="ignore"):
            scaled = np.rint(values * _SCALES[decimals])
            # each value is exact at its own decimals; at the chunk's (larger) count a big value may
            # leave the exact-integer range of float64 or not round-trip: then store the chunk raw
            exact = bool(np.all(np.abs(scaled) < 2.0**53) and np.all(scaled / _SCALES[decimals] == values))
        if exact:
            return bytes([decimals]) + encode_ints(scaled.astype(np.int64))
    bits = values.view(np.uint64)
    xor = np.bitwise_xor(bits, np.concatenate(([np.uint64(0)], bits[:-1])))
    raw = bytes([_VAL_RAW]) + _pack(0, 0, 0, xor)
    if decimals == _VAL_RAW:  # the decimals most values need (e.g. 57.3 / 100, one ulp off 0.573)
        need = decimals_needed(values)
        need = need[need != _VAL_RAW]
        if need.size == 0:
            return raw
        decimals = int(need.max())
    near = _encode_near(values, decimals)
    return near if len(near) < len(raw) else raw


def _encode_near(values: np.ndarray, decimals: int) -> bytes:
    """Scaled integers plus the XOR of each value with ``integer / 10**decimals`` (mostly zero)."""
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = np.rint(values * _SCALES[decimals])
        scaled = np.where(np.abs(scaled) < 2.0**53, scaled, 0.0)  # also NaN and infinities: 0, fixed below
    ints = scaled.astype(np.int64)
    fix = np.bitwise_xor(values.view(np.uint64), (ints / _SCALES[decimals]).view(np.uint64))
    body = encode_ints(ints)
    return bytes([_VAL_NEAR | decimals]) + _LEN.pack(len(body)) + body + _pack(0, 0, 0, fix)
