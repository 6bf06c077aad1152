"""Chunk codec of ``DuckDBStore``: one series' timestamps and values in a chunk as two small blobs.

Timestamps: a regular grid (first, step, n) costs a header of about 10 bytes and nothing per sample;
otherwise the deltas are packed as integers. Values: when every value is an exact decimal with at most
``MAX_DECIMALS`` digits (counters, percentages, byte counts), the scaled integers are packed either as
they are (frame of reference) or as deltas, whichever needs fewer bytes; when most are, the scaled
integers plus the XOR of each value with the double rebuilt from its integer (``k / 10**d``, or
``k / 10**(d - f) / 10**f`` for a decimal an adapter divided by ``10**f``: ``57.3 / 100`` is not the
double nearest 0.573), mostly zero; anything else as the XOR of consecutive IEEE-754 bit patterns.
Packing = subtract the minimum, split the rest into its significant byte planes (all low bytes, then
the next ...) and deflate each plane that shrinks (raw deflate: for blobs of a few hundred bytes it
packs like zstd and inflates about four times faster); lengths and small header fields are LEB128
varints. Decoding returns exactly the values that were encoded.

The first byte of each blob says its format, so blobs of the first format (fixed-width headers, byte
widths 1/2/4/8, the planes deflated together; written before December 2026) still decode: timestamp
modes 0 and 1, value tags 0..6, ``0x80 | d`` and 255. Every blob written now uses the second format:
timestamp modes 2 and 3, value tags ``0x10 | d``, ``0x40 + 4 d + f`` and ``0x7E``.
"""

from __future__ import annotations

import struct
import zlib

import numpy as np

from servemetrics.leb128 import decode as _read_varint
from servemetrics.leb128 import encode as _varint

MAX_DECIMALS = 6
MAX_DIVISOR = 3
"""Largest ``f`` of a near-decimal ``k / 10**(d - f) / 10**f`` (an adapter's ``/ 1000``)."""
_SCALES = [10.0**e for e in range(MAX_DECIMALS + 1)]
_VAL_RAW = 255
"""``decimals_needed`` of a value that is no decimal (and the first format's raw tag)."""

# -- second format (written) -----------------------------------------------------------------------

_TS_GRID, _TS_DELTAS = 2, 3
_VAL_DEC = 0x10  # | decimals: scaled integers
_VAL_NEAR = 0x40  # + 4 * decimals + divisor exponent: scaled integers and a correction per value
_VAL_XOR = 0x7E
_DELTA = 1  # kind bit of a packed integer stream: deltas (else frame of reference)


def _zigzag(x: int) -> bytes:
    return _varint(x << 1 if x >= 0 else ((-x) << 1) - 1)


def _read_zigzag(blob: bytes, at: int) -> tuple[int, int]:
    z, at = _read_varint(blob, at)
    return (z >> 1) ^ -(z & 1), at


def _deflate(data: bytes) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, -15)  # raw deflate: no header, fast to inflate when small
    return c.compress(data) + c.flush()


def _pack(kind: int, base: int, first: int, rest: np.ndarray) -> bytes:
    """Non-negative ``rest`` (uint64) as its significant byte planes, each deflated when that is smaller:
    ``kind | planes << 1``, n, base (and first, for deltas), then per plane its length and bytes."""
    top = int(rest.max()) if rest.size else 0
    planes = (top.bit_length() + 7) // 8
    head = bytes([kind | planes << 1]) + _varint(rest.size) + _zigzag(base)
    if kind & _DELTA:
        head += _zigzag(first)
    body = [head]
    if planes:
        split = np.ascontiguousarray(rest, dtype="<u8").view(np.uint8).reshape(-1, 8).T
        for p in range(planes):
            plane = split[p].tobytes()
            squeezed = _deflate(plane)
            deflated = len(squeezed) < len(plane)
            data = squeezed if deflated else plane
            body += [_varint(len(data) << 1 | deflated), data]
    return b"".join(body)


def _unpack(blob: bytes, at: int) -> tuple[int, int, int, np.ndarray, int]:
    """Inverse of ``_pack`` from ``blob[at:]``: kind, base, first, rest (uint64), the offset after it."""
    flags = blob[at]
    kind, planes = flags & _DELTA, flags >> 1
    n, at = _read_varint(blob, at + 1)
    base, at = _read_zigzag(blob, at)
    first = 0
    if kind & _DELTA:
        first, at = _read_zigzag(blob, at)
    if planes == 0:
        return kind, base, first, np.zeros(n, dtype=np.uint64), at
    width = 1 if planes == 1 else 2 if planes == 2 else 4 if planes <= 4 else 8
    split = np.zeros((n, width), dtype=np.uint8)  # little-endian bytes of each value, as rows
    for p in range(planes):
        size, at = _read_varint(blob, at)
        data = blob[at : at + (size >> 1)]
        at += size >> 1
        split[:, p] = np.frombuffer(zlib.decompress(data, -15) if size & 1 else data, dtype=np.uint8)
    rest = split.view(f"<u{width}").reshape(n).astype(np.uint64)
    return kind, base, first, rest, at


def _ints_of(kind: int, base: int, first: int, rest: np.ndarray) -> np.ndarray:
    """The int64 array a packed stream stands for."""
    if not kind & _DELTA:
        return (rest.astype(np.int64) + np.int64(base)) if base or rest.size == 0 else rest.view(np.int64)
    out = np.empty(rest.size + 1, dtype=np.int64)
    out[0] = first
    out[1:] = rest.astype(np.int64) + np.int64(base)
    return np.cumsum(out)


def encode_ints(x: np.ndarray) -> bytes:
    """Pack an int64 array as frame of reference or as deltas, whichever spans less."""
    n = x.size
    lo = int(x.min()) if n else 0
    span = int(x.max()) - lo if n else 0
    if n > 1:
        d = np.diff(x)
        dlo = int(d.min())
        if int(d.max()) - dlo < span and int(d.max()) - dlo < (1 << 63):
            return _pack(_DELTA, dlo, int(x[0]), (d - dlo).astype(np.uint64))
    if span >= (1 << 63):  # does not fit: keep the bit patterns
        return _pack(0, 0, 0, x.view(np.uint64))
    return _pack(0, lo, 0, (x - lo).astype(np.uint64))


def _decode_ints_at(blob: bytes, at: int) -> tuple[np.ndarray, int]:
    kind, base, first, rest, at = _unpack(blob, at)
    return _ints_of(kind, base, first, rest), at


def decode_ints(blob: bytes) -> np.ndarray:
    """Inverse of ``encode_ints``."""
    return _decode_ints_at(blob, 0)[0]


def encode_ts(ts: np.ndarray) -> bytes:
    """Encode sorted int64 timestamps (a regular grid costs only the header)."""
    n = ts.size
    first = int(ts[0]) if n else 0
    step = int(ts[1] - ts[0]) if n > 1 else 0
    if n <= 2 or bool(np.all(np.diff(ts) == step)):
        return bytes([_TS_GRID]) + _zigzag(first) + _zigzag(step) + _varint(n)
    return bytes([_TS_DELTAS]) + _zigzag(first) + encode_ints(np.diff(ts))


def decode_ts(blob: bytes) -> np.ndarray:
    """Inverse of ``encode_ts`` (and of the first format's)."""
    mode = blob[0]
    if mode < _TS_GRID:
        return _decode_ts_v1(blob)
    first, at = _read_zigzag(blob, 1)
    if mode == _TS_GRID:
        step, at = _read_zigzag(blob, at)
        n, _ = _read_varint(blob, at)
        grid: np.ndarray = first + step * np.arange(n, dtype=np.int64)
        return grid
    deltas = decode_ints(blob[at:])
    out = np.empty(deltas.size + 1, dtype=np.int64)
    out[0] = first
    out[1:] = deltas
    return np.cumsum(out)


def decimals_needed(values: np.ndarray) -> np.ndarray:
    """Per value: the fewest decimals (0..MAX_DECIMALS) that represent it exactly, or 255 for none (NaN,
    infinities, -0.0, and values no decimal of ``MAX_DECIMALS`` digits gives back)."""
    need = np.full(values.size, _VAL_RAW, dtype=np.uint8)
    with np.errstate(invalid="ignore", over="ignore"):
        for e in range(MAX_DECIMALS, -1, -1):
            scaled = np.rint(values * _SCALES[e])
            ok = (np.abs(scaled) < 2.0**53) & (scaled / _SCALES[e] == values)
            need[ok] = e
    need[(values == 0) & np.signbit(values)] = _VAL_RAW  # -0.0: an integer would lose the sign
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
            return bytes([_VAL_DEC | decimals]) + encode_ints(scaled.astype(np.int64))
    bits = values.view(np.uint64)
    xor = np.bitwise_xor(bits, np.concatenate(([np.uint64(0)], bits[:-1])))
    raw = bytes([_VAL_XOR]) + _pack(0, 0, 0, xor)
    if decimals == _VAL_RAW:  # the decimals most values need (e.g. 57.3 / 100, one ulp off 0.573)
        need = decimals_needed(values)
        need = need[need != _VAL_RAW]
        if need.size == 0:
            return raw
        decimals = int(need.max())
    near = _encode_near(values, decimals)
    return near if len(near) < len(raw) else raw


def _rebuilt(ints: np.ndarray, decimals: int, divisor: int) -> np.ndarray:
    """The doubles ``ints / 10**decimals``, computed as ``ints / 10**(decimals - divisor) / 10**divisor``."""
    if divisor == 0:
        out: np.ndarray = ints / _SCALES[decimals]
        return out
    divided: np.ndarray = ints / _SCALES[decimals - divisor] / _SCALES[divisor]
    return divided


def _encode_near(values: np.ndarray, decimals: int) -> bytes:
    """Scaled integers plus the XOR of each value with the double rebuilt from its integer (mostly zero),
    rebuilt the way that leaves the most zeros (``_rebuilt``: divided by ``10**f`` or not)."""
    with np.errstate(invalid="ignore", over="ignore"):
        scaled = np.rint(values * _SCALES[decimals])
        scaled = np.where(np.abs(scaled) < 2.0**53, scaled, 0.0)  # also NaN and infinities: 0, fixed below
    ints = scaled.astype(np.int64)
    bits = values.view(np.uint64)
    tries = range(min(decimals, MAX_DIVISOR) + 1)
    fixes = [np.bitwise_xor(bits, _rebuilt(ints, decimals, f).view(np.uint64)) for f in tries]
    divisor = min(tries, key=lambda f: int(np.count_nonzero(fixes[f])))
    tag = _VAL_NEAR + 4 * decimals + divisor
    return bytes([tag]) + encode_ints(ints) + _pack(0, 0, 0, fixes[divisor])


def decode_values(blob: bytes) -> np.ndarray:
    """Inverse of ``encode_values`` (and of the first format's)."""
    tag = blob[0]
    if tag == _VAL_XOR:
        xor = _unpack(blob, 1)[3]
        return np.bitwise_xor.accumulate(xor).view(np.float64)
    if _VAL_NEAR <= tag < _VAL_NEAR + 4 * (MAX_DECIMALS + 1):
        decimals, divisor = divmod(tag - _VAL_NEAR, 4)
        ints, at = _decode_ints_at(blob, 1)
        fix = _unpack(blob, at)[3]
        fixed: np.ndarray = np.bitwise_xor(_rebuilt(ints, decimals, divisor).view(np.uint64), fix).view(
            np.float64
        )
        return fixed
    if _VAL_DEC <= tag <= _VAL_DEC | MAX_DECIMALS:
        scaled: np.ndarray = decode_ints(blob[1:]) / _SCALES[tag & 0x0F]
        return scaled
    return _decode_values_v1(blob)


# -- first format (read only) ----------------------------------------------------------------------

_V1_TS_HEAD = struct.Struct("<Bqqi")  # mode, first, step, n
_V1_INT_HEAD = struct.Struct("<BBBqqi")  # kind (0 for, 1 delta), width, deflated?, base, first, n
_V1_NEAR = 0x80  # | decimals
_V1_LEN = struct.Struct("<I")
_V1_WIDTHS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def _decode_ints_v1(blob: bytes) -> np.ndarray:
    kind, width, squeezed, base, first, n = _V1_INT_HEAD.unpack_from(blob)
    if width == 0:
        rest = np.zeros(n, dtype=np.uint64)
    else:
        body = blob[_V1_INT_HEAD.size :]
        if squeezed:
            body = zlib.decompress(body, -15)
        dtype = _V1_WIDTHS[width]
        planes = np.frombuffer(body, dtype=np.uint8).reshape(width, n)
        rest = np.ascontiguousarray(planes.T).view(dtype).reshape(n).astype(np.uint64)
    return _ints_of(kind, base, first, rest)


def _decode_ts_v1(blob: bytes) -> np.ndarray:
    mode, first, step, n = _V1_TS_HEAD.unpack_from(blob)
    if mode == 0:
        grid: np.ndarray = first + step * np.arange(n, dtype=np.int64)
        return grid
    out = np.empty(n, dtype=np.int64)
    out[0] = first
    out[1:] = _decode_ints_v1(blob[_V1_TS_HEAD.size :])
    return np.cumsum(out)


def _decode_values_v1(blob: bytes) -> np.ndarray:
    decimals = blob[0]
    if decimals == _VAL_RAW:
        xor = _decode_ints_v1(blob[1:]).view(np.uint64)
        return np.bitwise_xor.accumulate(xor).view(np.float64)
    if decimals & _V1_NEAR:
        (size,) = _V1_LEN.unpack_from(blob, 1)
        at = 1 + _V1_LEN.size
        out = _decode_ints_v1(blob[at : at + size]) / _SCALES[decimals & ~_V1_NEAR]
        fix = _decode_ints_v1(blob[at + size :]).view(np.uint64)
        fixed: np.ndarray = np.bitwise_xor(out.view(np.uint64), fix).view(np.float64)
        return fixed
    scaled: np.ndarray = _decode_ints_v1(blob[1:]) / _SCALES[decimals]
    return scaled
