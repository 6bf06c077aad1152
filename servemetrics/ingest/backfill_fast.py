"""The backfill's fast reader: the common lines of an OpenMetrics file read with numpy, whole blocks at once.

``backfill`` hands every block of the file (4 MiB of whole lines) to ``Tokeniser.block``. A block that
is printable ASCII (no other line separator ``str.splitlines`` would cut at, nothing to decode) is cut
into lines with numpy; a sample line is *plain* when it is ``PREFIX VALUE TIMESTAMP`` with

- ``PREFIX`` = ``name`` or ``name{l="v",...}``: a legacy metric name; label names ``[a-zA-Z_]\\w*``, values
  without ``"``, ``\\``, ``{``, ``}`` or ``#`` (no escapes, nothing that moves the cutter's or the library's
  view of where the labels end); the labels as ``prometheus_client``'s ``parse_labels`` reads them (it
  refuses reserved and repeated names, so such a prefix is not plain);
- ``VALUE`` = ``-?D+(.D+)?([eE][-+]?D+)?`` (no NaN, Inf, ``+``, ``_``), at most 32 characters;
- ``TIMESTAMP`` = ``D+`` or ``D+.D`` to ``D+.DDD`` seconds (millisecond precision, so comparing
  milliseconds is comparing what the library compares), at most 15 digits before the point;
- one space between the three, none at the end, no exemplar.

Every other line (metadata, blank, anything not plain) is given to the cutter as text, as before. The
cutter (``backfill_units.Cutter``) cuts plain lines into the same parse units as their text, and a unit of a
family of kind gauge, counter, unknown or histogram (no ``# UNIT``) made only of plain lines becomes part
of a ``FastRun``. ``parse_run`` reads its units: a unit is *certain* when every rule
``prometheus_client``'s OpenMetrics parser (0.26, ``openmetrics/parser.py``) applies to the text
``backfill`` would give it holds, checked here as arrays:

- names: ``family`` alone (gauge, unknown), ``family_total`` (counter), ``_bucket``/``_sum``/``_count``
  (histogram); a name ending in ``_created`` (a creation time, whatever its family's kind) is not read
  here (the unit goes to the library);
- counter-like samples (``_total``, ``_bucket``, ``_sum``, ``_count``) not negative, buckets and counts
  integers; every value finite (the library path drops non-finite values: not read here either);
- timestamps in the store's range (0 to year 2200); within a unit each series' lines contiguous
  ("Invalid metric grouping") and, for gauges and counters, strictly increasing in time (an equal time
  is a duplicate the library drops, a smaller one its "Timestamps went backwards");
- histograms (one timestamp per unit, as cut): per label group, contiguous, the buckets first, bounds
  strictly increasing and not negative, the last ``+Inf``, bucket values not decreasing, ``_sum`` and
  ``_count`` both or neither, ``_count`` equal to the ``+Inf`` bucket; no series twice; an ``le`` on
  every bucket and on no ``_sum``/``_count``; every ``le`` a number (``exposition.normalise_le``).

A unit that breaks any of these goes, unchanged, to the library parser (``backfill._parse_unit``), which
keeps the samples, errors and line numbers the library gives. A certain unit's samples are what the
library path gives: the family's sample names, the parsed labels with ``le`` in ``normalise_le``'s form,
milliseconds, ``float`` of the value (``float(int(token))`` for an integer token: no ``-0.0``), in line
order. The tests hold the two paths together (tests/ingest/test_backfill_fast.py).
"""

from __future__ import annotations

import functools
import itertools
import re
from dataclasses import dataclass

import numpy as np
from prometheus_client import parser as _text_parser

from servemetrics.ingest.exposition import PARSE_ERRORS, normalise_le
from servemetrics.ingest.number_tokens import (
    MAX_TS_CHARS,
    MAX_VALUE_CHARS,
    TS_DFA,
    VALUE_DFA,
    integer_digits,
    run_dfa,
    timestamp_ms,
    tokens,
)
from servemetrics.timeutil import MAX_TS_MS
from servemetrics.types import Labels, SeriesKey, labels_of

FAST_KINDS = frozenset({"gauge", "counter", "unknown", "histogram"})
_MAX_PREFIXES = 1_000_000
_LV = r'"[^"\\{}#]*"'
_LN = r"[a-zA-Z_][a-zA-Z0-9_]*"
_PREFIX = re.compile(rf"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{{((?:{_LN}={_LV}(?:,{_LN}={_LV})*)?)\}})?")
_SUFFIXES = {
    "gauge": ("",),
    "unknown": ("",),
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
}
_BUCKET, _SUM, _COUNT = "_bucket", "_sum", "_count"
_COUNTER_LIKE = frozenset({"_total", "_bucket", "_sum", "_count"})


@dataclass
class Lines:
    """Lines of the file in columns (a block, a slice of one, or slices of several joined).

    ``text`` holds the lines; line ``i`` is ``text[start[i]:end[i]]`` (``end`` the index of its ``\\n``).
    For a plain sample line ``plain[i]``: ``pid`` its prefix's id in the ``Tokeniser``, ``values`` its
    value, ``int_token`` whether the value is written as an integer, ``ts_ms`` its time, ``ts_new``
    whether its timestamp text differs from the line before's (in this block; ``True`` at line 0)."""

    text: bytes
    start: np.ndarray
    end: np.ndarray
    plain: np.ndarray
    pid: np.ndarray
    values: np.ndarray
    int_token: np.ndarray
    ts_ms: np.ndarray
    ts_new: np.ndarray

    def __len__(self) -> int:
        return int(self.start.shape[0])

    def line(self, i: int) -> str:
        """Line ``i`` with its ``\\n``."""
        return self.text[int(self.start[i]) : int(self.end[i]) + 1].decode("ascii")

    def lines(self) -> list[str]:
        """Every line, each with its ``\\n`` (as ``str.splitlines(keepends=True)`` gives them)."""
        if not len(self):
            return []
        return self.text[int(self.start[0]) : int(self.end[-1]) + 1].decode("ascii").splitlines(keepends=True)

    def slice(self, lo: int, hi: int) -> Lines:
        """Lines ``lo`` to ``hi`` (exclusive), sharing this text."""
        return Lines(
            self.text,
            self.start[lo:hi],
            self.end[lo:hi],
            self.plain[lo:hi],
            self.pid[lo:hi],
            self.values[lo:hi],
            self.int_token[lo:hi],
            self.ts_ms[lo:hi],
            self.ts_new[lo:hi],
        )

    def compact(self) -> Lines:
        """The same lines with only their own text (to hand to another process)."""
        if not len(self):
            return self
        lo, hi = int(self.start[0]), int(self.end[-1]) + 1
        if lo == 0 and hi == len(self.text):
            return self
        return Lines(
            self.text[lo:hi],
            self.start - lo,
            self.end - lo,
            self.plain,
            self.pid,
            self.values,
            self.int_token,
            self.ts_ms,
            self.ts_new,
        )

    @staticmethod
    def join(parts: list[Lines]) -> Lines:
        """The lines of ``parts`` in order, as one."""
        parts = [p.compact() for p in parts if len(p)]
        if len(parts) == 1:
            return parts[0]
        offsets = np.cumsum([0] + [len(p.text) for p in parts[:-1]])
        return Lines(
            b"".join(p.text for p in parts),
            np.concatenate([p.start + o for p, o in zip(parts, offsets, strict=True)]),
            np.concatenate([p.end + o for p, o in zip(parts, offsets, strict=True)]),
            *(np.concatenate([getattr(p, f) for p in parts]) for f in _COLUMNS),
        )


_COLUMNS = ("plain", "pid", "values", "int_token", "ts_ms", "ts_new")


@dataclass(frozen=True)
class Prefix:
    """A plain prefix as the cutter sees it: its text, its sample name."""

    text: str
    name: str


class Tokeniser:
    """Cuts blocks into ``Lines``; numbers the distinct prefixes of the file (``prefixes[pid]``)."""

    def __init__(self) -> None:
        self._ids: dict[bytes, int] = {}
        self.prefixes: list[Prefix | None] = []  # None: not plain
        self._plain = np.zeros(0, dtype=bool)  # by prefix id

    def block(self, data: bytes) -> Lines | None:
        """``data`` (whole lines, each ending in ``\\n``) in columns, or ``None`` when it is not printable
        ASCII (the caller reads it as text then) or the file has too many distinct prefixes."""
        if not data or len(self._ids) > _MAX_PREFIXES:
            return None
        buf = np.frombuffer(data, dtype=np.uint8)
        end = np.flatnonzero(buf == 10)
        if np.count_nonzero((buf - np.uint8(32)) > 94) != end.shape[0]:  # a byte not printable ASCII or \n
            return None
        start = np.empty_like(end)
        start[0] = 0
        start[1:] = end[:-1] + 1
        n = end.shape[0]
        spaces = np.flatnonzero(buf == 32)
        last = np.searchsorted(spaces, end) - 1  # the line's last space (if it is in the line)
        ts_sep = spaces[np.maximum(last, 0)] if spaces.shape[0] else np.zeros(n, np.int64)
        v_sep = spaces[np.maximum(last - 1, 0)] if spaces.shape[0] else np.zeros(n, np.int64)
        first = buf[np.minimum(start, buf.shape[0] - 1)]
        shape = (last >= 1) & (v_sep > start) & (first != 35) & (end > start)
        v_len = np.where(shape, ts_sep - v_sep - 1, 0)
        t_len = np.where(shape, end - ts_sep - 1, 0)
        shape &= (v_len >= 1) & (v_len <= MAX_VALUE_CHARS) & (t_len >= 1) & (t_len <= MAX_TS_CHARS)
        v_len, t_len = np.where(shape, v_len, 0), np.where(shape, t_len, 0)
        vtok = tokens(buf, v_sep + 1, v_len, max(1, int(v_len.max(initial=0))))
        ttok = tokens(buf, ts_sep + 1, t_len, max(1, int(t_len.max(initial=0))))
        vstate, tstate = run_dfa(VALUE_DFA, vtok), run_dfa(TS_DFA, ttok)
        plain = shape & np.isin(vstate, (2, 4, 7)) & np.isin(tstate, (1, 3, 4, 5))
        plain &= integer_digits(ttok) <= 15
        values = np.zeros(n, dtype=np.float64)
        if plain.any():
            values[plain] = vtok[plain].view(f"S{vtok.shape[1]}").ravel().astype(np.float64)
        int_token = plain & (vstate == 2)
        pid = np.full(n, -1, dtype=np.int64)
        rows = np.flatnonzero(plain)
        ids = self._ids
        pid[rows] = [
            ids.setdefault(data[s:e], len(ids))
            for s, e in zip(start[rows].tolist(), v_sep[rows].tolist(), strict=True)
        ]
        self._read_new(data)
        known = pid >= 0
        plain[known] &= self._plain[pid[known]]
        pid[~plain] = -1
        ts_new = np.ones(n, dtype=bool)
        if n > 1:
            ts_new[1:] = (ttok[1:] != ttok[:-1]).any(axis=1)
        ts_ms = np.zeros(n, dtype=np.int64)
        ts_ms[plain] = timestamp_ms(ttok[plain])
        return Lines(data, start, end, plain, pid, values, int_token, ts_ms, ts_new)

    def _read_new(self, data: bytes) -> None:
        """Read the prefixes first seen in the last block (the dict keeps insertion order)."""
        if len(self._ids) == len(self.prefixes):
            return
        for raw in itertools.islice(self._ids, len(self.prefixes), None):
            self.prefixes.append(_prefix(raw.decode("ascii")))
        self._plain = np.asarray([p is not None for p in self.prefixes], dtype=bool)


def _prefix(text: str) -> Prefix | None:
    """The plain prefix ``text``, or None when it is not plain (see the module docstring)."""
    found = _PREFIX.fullmatch(text)
    if found is None or _info(text) is None:
        return None
    return Prefix(text, found.group(1))


@dataclass(frozen=True)
class _Info:
    name: str
    key: SeriesKey  # (name, labels with le normalised)
    group: Labels  # the labels without le
    has_le: bool
    bound: float  # float of the normalised le (nan without)


@functools.lru_cache(maxsize=262_144)
def _info(text: str) -> _Info | None:
    """What a plain prefix means: its labels as the library reads them (``parse_labels``, which
    ``backfill`` calls on the same text), ``le`` normalised; None when the library refuses them or
    ``le`` is not a number."""
    found = _PREFIX.fullmatch(text)
    if found is None:
        return None
    name, label_text = found.group(1), found.group(2) or ""
    try:
        labels = _text_parser.parse_labels(label_text, True)
    except PARSE_ERRORS:
        return None
    le = labels.get("le")
    bound = float("nan")
    if le is not None:
        try:
            labels["le"] = normalise_le(le)
        except ValueError:
            return None
        bound = float(labels["le"])
    group = labels_of({k: v for k, v in labels.items() if k != "le"})
    return _Info(name, (name, labels_of(labels)), group, le is not None, bound)


@dataclass
class FastRun:
    """Consecutive parse units of one family, all of plain lines: unit ``u`` is lines ``starts[u]`` to
    ``starts[u + 1]`` (or the end), its first line is line ``first_lines[u]`` of the file."""

    family: str
    kind: str
    meta: str
    meta_lines: tuple[int, ...]
    lines: Lines
    starts: np.ndarray
    first_lines: np.ndarray
    prefix_texts: list[str]  # by local prefix id (``local``)
    local: np.ndarray

    def unit_lines(self, u: int) -> list[str]:
        """The text lines of unit ``u``."""
        lo = int(self.starts[u])
        hi = int(self.starts[u + 1]) if u + 1 < self.starts.shape[0] else len(self.lines)
        return self.lines.slice(lo, hi).lines()


def make_run(
    family: str,
    kind: str,
    meta: str,
    meta_lines: tuple[int, ...],
    lines: Lines,
    starts: np.ndarray,
    first_lines: np.ndarray,
    prefixes: list[Prefix | None],
) -> FastRun:
    """A ``FastRun`` of ``lines`` (plain, ids of ``prefixes``), carrying what another process needs."""
    used, local = np.unique(lines.pid, return_inverse=True)
    texts = [p.text for p in (prefixes[i] for i in used.tolist()) if p is not None]
    return FastRun(family, kind, meta, meta_lines, lines.compact(), starts, first_lines, texts, local)


@dataclass
class RunSamples:
    """``parse_run``'s answer: which units are certain, and the samples of every line (of certain units
    only meaningful): ``series[key_index[i]]``, ``ts_ms[i]``, ``values[i]``."""

    certain: np.ndarray
    series: list[SeriesKey]
    key_index: np.ndarray
    ts_ms: np.ndarray
    values: np.ndarray


def parse_run(run: FastRun) -> RunSamples:
    """Read the units of ``run`` (see the module docstring): the certain ones, and the samples."""
    n, n_units = len(run.lines), int(run.starts.shape[0])
    unit = np.repeat(np.arange(n_units), np.diff(np.append(run.starts, n)))
    infos = [_info(t) for t in run.prefix_texts]
    suffixes = _SUFFIXES.get(run.kind, ()) if run.kind in FAST_KINDS and "# UNIT" not in run.meta else ()
    keys: dict[SeriesKey, int] = {}
    groups: dict[Labels, int] = {}
    p_ok, p_key, p_group, p_suffix, p_bound, p_le = [], [], [], [], [], []
    for info in infos:
        suffix = (
            info.name[len(run.family) :] if info is not None and info.name.startswith(run.family) else None
        )
        ok = info is not None and suffix in suffixes and info.has_le == (suffix == _BUCKET)
        ok = ok and not info.name.endswith("_created")  # type: ignore[union-attr]  # a creation time
        p_ok.append(ok)
        p_key.append(keys.setdefault(info.key, len(keys)) if info is not None else 0)
        p_group.append(groups.setdefault(info.group, len(groups)) if info is not None else 0)
        p_suffix.append(suffix if ok else "")
        p_bound.append(info.bound if info is not None else float("nan"))
        p_le.append(info is not None and info.has_le)
    local = run.local
    ok_line = np.asarray(p_ok, dtype=bool)[local]
    key = np.asarray(p_key, dtype=np.int64)[local]
    values = np.where(run.lines.int_token & (run.lines.values == 0.0), 0.0, run.lines.values)
    ts = run.lines.ts_ms
    ok_line &= np.isfinite(values) & (ts >= 0) & (ts < MAX_TS_MS)
    counter_like = np.asarray([s in _COUNTER_LIKE for s in p_suffix], dtype=bool)[local]
    ok_line &= ~counter_like | (values >= 0)
    integral = np.asarray([s in (_BUCKET, _COUNT) for s in p_suffix], dtype=bool)[local]
    ok_line &= ~integral | (np.floor(values) == values)
    bad = np.zeros(n_units, dtype=bool)
    bad[unit[~ok_line]] = True
    unit_start = np.zeros(n, dtype=bool)
    unit_start[run.starts] = True
    if run.kind == "histogram":
        suffix_code = np.asarray([(_BUCKET, _SUM, _COUNT).index(s) if s else 3 for s in p_suffix])[local]
        _histogram_checks(
            bad,
            unit,
            unit_start,
            key,
            np.asarray(p_group, dtype=np.int64)[local],
            suffix_code,
            np.asarray(p_bound, dtype=np.float64)[local],
            values,
        )
    else:
        _series_checks(bad, unit, unit_start, key, ts)
    return RunSamples(~bad, list(keys), key, ts, values)


def _repeated(bad: np.ndarray, unit: np.ndarray, first: np.ndarray, ident: np.ndarray) -> None:
    """Mark units in which an ``ident`` starts two runs (its lines are not contiguous)."""
    rows = np.flatnonzero(first)
    pairs = unit[rows] * (int(ident.max(initial=0)) + 1) + ident[rows]
    uniq, counts = np.unique(pairs, return_counts=True)
    bad[(uniq[counts > 1] // (int(ident.max(initial=0)) + 1))] = True


def _series_checks(
    bad: np.ndarray, unit: np.ndarray, unit_start: np.ndarray, key: np.ndarray, ts: np.ndarray
) -> None:
    """Gauges, counters, unknown: each series contiguous in its unit, its times strictly increasing."""
    new = unit_start.copy()
    new[1:] |= key[1:] != key[:-1]
    _repeated(bad, unit, new, key)
    same = ~new[1:]
    back = same & (ts[1:] <= ts[:-1])
    bad[unit[1:][back]] = True


def _histogram_checks(
    bad: np.ndarray,
    unit: np.ndarray,
    unit_start: np.ndarray,
    key: np.ndarray,
    group: np.ndarray,
    suffix: np.ndarray,
    bound: np.ndarray,
    values: np.ndarray,
) -> None:
    """Histograms, one timestamp per unit: ``_check_histogram``'s rules per label group (module docstring)."""
    n = key.shape[0]
    every = np.ones(n, dtype=bool)
    _repeated(bad, unit, every, key)  # a series twice at one time
    seg_start = unit_start.copy()
    seg_start[1:] |= group[1:] != group[:-1]
    _repeated(bad, unit, seg_start, group)
    bucket = suffix == 0
    bad[unit[seg_start & ~bucket]] = True  # a group starts with its buckets
    bad[unit[bucket & (bound < 0)]] = True
    if n > 1:
        inner = ~seg_start[1:]
        bad[unit[1:][inner & bucket[1:] & ~bucket[:-1]]] = True  # a bucket after _sum/_count
        both = inner & bucket[1:] & bucket[:-1]
        bad[unit[1:][both & ~(bound[1:] > bound[:-1])]] = True
        bad[unit[1:][both & (values[1:] < values[:-1])]] = True
    seg = np.cumsum(seg_start) - 1
    n_seg = int(seg[-1]) + 1 if n else 0
    last_bucket = bucket.copy()
    if n > 1:
        last_bucket[:-1] &= seg_start[1:] | ~bucket[1:]
    inf_value = np.full(n_seg, np.nan)
    inf_value[seg[last_bucket]] = values[last_bucket]
    has_inf = np.zeros(n_seg, dtype=bool)
    has_inf[seg[last_bucket]] = bound[last_bucket] == np.inf
    seg_unit = unit[seg_start]
    bad[seg_unit[~has_inf]] = True
    sums = np.bincount(seg[suffix == 1], minlength=n_seg)
    counts = np.bincount(seg[suffix == 2], minlength=n_seg)
    bad[seg_unit[sums != counts]] = True
    count_rows = suffix == 2
    bad[unit[count_rows][values[count_rows] != inf_value[seg[count_rows]]]] = True
