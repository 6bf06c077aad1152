"""Unsigned LEB128 varints, the integer encoding of protobuf's wire format and of our chunk codec's
headers (``store/duckdb_codec``, ``remote_write/wire``, ``remote_write/batch``).
"""

from __future__ import annotations


class VarintTooLong(ValueError):
    """A varint of more than 10 bytes (the most a 64-bit value takes): the bytes are not what they claim."""


def encode(x: int) -> bytes:
    """The varint of ``x`` (0 <= x < 2**64)."""
    out = bytearray()
    while x >= 0x80:
        out.append((x & 0x7F) | 0x80)
        x >>= 7
    out.append(x)
    return bytes(out)


def decode(buf: bytes, pos: int) -> tuple[int, int]:
    """The varint at ``buf[pos:]`` (kept to 64 bits) and the position after it.

    Raises:
        IndexError: the varint is cut off by the end of ``buf``.
        VarintTooLong: it runs over 10 bytes.
    """
    b = buf[pos]
    if b < 0x80:  # most fields: one byte
        return b, pos + 1
    result, shift = b & 0x7F, 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result & 0xFFFFFFFFFFFFFFFF, pos + 1
        shift += 7
        if shift > 63:
            raise VarintTooLong(f"a varint at byte {pos} is longer than 10 bytes")
