"""``servemetrics.leb128``: varints by hand (the protobuf encoding guide's 150 = 96 01) and the bounds."""

from __future__ import annotations

import pytest

from servemetrics import leb128


@pytest.mark.parametrize(
    ("value", "raw"),
    [
        (0, b"\x00"),
        (1, b"\x01"),
        (127, b"\x7f"),
        (128, b"\x80\x01"),
        (150, b"\x96\x01"),
        (300, b"\xac\x02"),
        (2**64 - 1, b"\xff" * 9 + b"\x01"),
    ],
)
def test_encode_and_decode_by_hand(value: int, raw: bytes) -> None:
    assert leb128.encode(value) == raw
    assert leb128.decode(b"\x07" + raw + b"\x00", 1) == (value, 1 + len(raw))


def test_a_cut_off_varint_is_an_index_error_and_one_over_10_bytes_too_long() -> None:
    with pytest.raises(IndexError):
        leb128.decode(b"\x96", 0)
    with pytest.raises(leb128.VarintTooLong, match="longer than 10 bytes"):
        leb128.decode(b"\xff" * 11, 0)
