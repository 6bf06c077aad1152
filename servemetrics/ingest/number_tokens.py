"""Number tokens of exposition lines read as arrays: DFAs that accept the value and timestamp forms the
fast backfill reader takes (``backfill_fast``'s module docstring gives the forms), and the timestamps'
milliseconds, for whole blocks of lines at once with numpy.
"""

from __future__ import annotations

import numpy as np

MAX_VALUE_CHARS = 32
"""The longest value token read as an array (longer ones go to the library parser)."""
MAX_TS_CHARS = 19
"""The longest timestamp token: 15 digits, the point, 3 digits."""


def _value_table() -> np.ndarray:
    """The DFA of ``-?D+(.D+)?([eE][-+]?D+)?`` over bytes; state 0 start, 8 dead; NUL (padding) keeps a
    state. Accepting: 2 (integer), 4 (fraction), 7 (exponent)."""
    t = np.full((9, 256), 8, dtype=np.int8)
    t[:, 0] = np.arange(9)
    digits = np.arange(48, 58)
    t[0, ord("-")] = 1
    for s, to in ((0, 2), (1, 2), (2, 2), (3, 4), (4, 4), (5, 7), (6, 7), (7, 7)):
        t[s, digits] = to
    t[2, ord(".")] = 3
    for s in (2, 4):
        t[s, ord("e")] = t[s, ord("E")] = 5
    t[5, ord("-")] = t[5, ord("+")] = 6
    return t


def _ts_table() -> np.ndarray:
    """The DFA of ``D+(.D{1,3})?``; state 0 start, 6 dead; accepting 1, 3, 4, 5."""
    t = np.full((7, 256), 6, dtype=np.int8)
    t[:, 0] = np.arange(7)
    digits = np.arange(48, 58)
    t[0, digits] = t[1, digits] = 1
    t[1, ord(".")] = 2
    t[2, digits], t[3, digits], t[4, digits] = 3, 4, 5
    return t


VALUE_DFA = _value_table()
TS_DFA = _ts_table()


def tokens(buf: np.ndarray, start: np.ndarray, length: np.ndarray, width: int) -> np.ndarray:
    """The ``n x width`` matrix of the tokens ``buf[start:start+length]``, NUL-padded (length <= width)."""
    cols = np.arange(width, dtype=np.int64)
    idx = start[:, None] + cols[None, :]
    inside = cols[None, :] < length[:, None]
    return np.where(inside, buf[np.minimum(idx, buf.shape[0] - 1)], 0).astype(np.uint8)


def run_dfa(table: np.ndarray, tokens: np.ndarray) -> np.ndarray:
    """The state each row of ``tokens`` (n x width bytes) ends in, walking ``table`` (states x 256)."""
    state = np.zeros(tokens.shape[0], dtype=np.int8)
    for c in range(tokens.shape[1]):
        state = table[state, tokens[:, c]]
    return state


def integer_digits(ttok: np.ndarray) -> np.ndarray:
    """Digits before the point (or in all) of each timestamp token."""
    dot = ttok == 46
    has_dot = dot.any(axis=1)
    width = ttok.shape[1]
    first_dot = np.where(has_dot, dot.argmax(axis=1), width)
    nonzero = (ttok != 0).sum(axis=1)
    out: np.ndarray = np.where(has_dot, first_dot, nonzero)
    return out


def timestamp_ms(ttok: np.ndarray) -> np.ndarray:
    """Milliseconds of timestamp tokens of the ``D+(.D{1,3})?`` form, at most 15 digits before the point."""
    ms = np.zeros(ttok.shape[0], dtype=np.int64)
    digits = ((ttok >= 48) & (ttok <= 57)) | (ttok == 0)
    whole = digits.all(axis=1) & (ttok[:, 0] != 0)
    if whole.any():  # seconds only: numpy reads the digits
        ms[whole] = ttok[whole].view(f"S{ttok.shape[1]}").ravel().astype(np.int64) * 1000
    rest = np.flatnonzero(~whole)
    if rest.shape[0]:
        ms[rest] = _ts_ms_by_digit(ttok[rest])
    return ms


def _ts_ms_by_digit(ttok: np.ndarray) -> np.ndarray:
    n = ttok.shape[0]
    sec = np.zeros(n, dtype=np.int64)
    frac = np.zeros(n, dtype=np.int64)
    frac_digits = np.zeros(n, dtype=np.int64)
    after_dot = np.zeros(n, dtype=bool)
    for c in range(ttok.shape[1]):
        b = ttok[:, c].astype(np.int64)
        digit = (b >= 48) & (b <= 57)
        in_sec = digit & ~after_dot
        in_frac = digit & after_dot & (frac_digits < 3)
        sec = np.where(in_sec, sec * 10 + (b - 48), sec)
        frac = np.where(in_frac, frac * 10 + (b - 48), frac)
        frac_digits += in_frac
        after_dot |= b == 46
    ms: np.ndarray = sec * 1000 + frac * (10 ** (3 - np.minimum(frac_digits, 3)))
    return ms
