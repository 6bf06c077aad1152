"""The backfill's cutter: a stream of OpenMetrics lines (text, or the columns of a block the fast reader
read) cut into parse units, where ``backfill``'s module docstring says units are cut.
"""

from __future__ import annotations

import itertools

import numpy as np

from servemetrics.ingest.backfill_fast import FAST_KINDS, FastRun, Lines, Tokeniser, make_run
from servemetrics.ingest.backfill_library import Unit

MAX_UNIT_LINES = 5_000
"""The most lines of a non-histogram unit before it is cut at the next series change."""
_PER_TIMESTAMP = frozenset({"histogram", "gaugehistogram", "summary"})
_SUFFIXES = {
    "counter": ("_total", "_created"),
    "summary": ("", "_count", "_sum", "_created"),
    "histogram": ("_count", "_sum", "_bucket", "_created"),
    "gaugehistogram": ("_gcount", "_gsum", "_bucket"),
    "info": ("_info",),
}


def _sample_name(line: str) -> str:
    brace, space = line.find("{"), line.find(" ")
    end = brace if brace != -1 and (space == -1 or brace < space) else space
    return line[:end] if end != -1 else line.rstrip("\n")


def _timestamp_token(line: str) -> str:
    head = line.split(" # ", 1)[0] if " # " in line else line
    head = head.rstrip()
    return head[head.rfind(" ") + 1 :]


def _series_token(line: str, name: str) -> str:
    if line.startswith(name + "{"):
        return line[: line.find("} ") + 1]
    return name


class Cutter:
    """Cut a stream of lines into parse units (see the module docstring): text lines (``feed``) or the
    columns of a block (``feed_block``, ``backfill_fast``), whose plain lines are cut as their text would
    be; a unit of plain lines only, of a kind the fast reader reads, becomes (part of) a ``FastRun``."""

    def __init__(self, tokeniser: Tokeniser | None = None) -> None:
        self.line_no = 0
        self._prefixes = tokeniser.prefixes if tokeniser is not None else []
        self._family: str | None = None
        self._type = "unknown"
        self._allowed: frozenset[str] = frozenset()
        self._meta: list[str] = []
        self._meta_nos: list[int] = []
        self._pieces: list[list[str] | Lines] = []
        self._count = 0
        self._first = 0
        self._ts = ""
        self._keys: set[str] = set()
        self._last_key = ""

    def feed(self, lines: list[str], units: list[Unit | FastRun]) -> None:
        """Consume lines (each ending in ``\\n``), appending finished units to ``units``."""
        for line in lines:
            self._line(line, units)

    def _line(self, line: str, units: list[Unit | FastRun]) -> None:
        self.line_no += 1
        if line[0] == "#":
            self._metadata(line, units)
        elif line != "\n":
            self._sample(line, units)

    def feed_block(self, block: Lines, units: list[Unit | FastRun]) -> None:
        """Consume a block's lines: plain stretches in columns, any other line as text."""
        base = self.line_no
        special = np.flatnonzero(~block.plain).tolist()
        special.append(len(block))
        i = 0
        for j in special:
            if i < j:
                self._plain(block, i, j, base, units)
            if j < len(block):
                self.line_no = base + j
                self._line(block.line(j), units)
            i = j + 1
        self.line_no = base + len(block)

    def close(self, units: list[Unit | FastRun]) -> None:
        """Flush the last unit."""
        self._flush(units)

    def _metadata(self, line: str, units: list[Unit | FastRun]) -> None:
        if line.startswith("# EOF"):
            self._flush(units)
            self._family = None
            return
        parts = line.split(" ", 3)
        name = parts[2].rstrip("\n") if len(parts) > 2 else ""
        if name != self._family or self._count:
            self._flush(units)
            self._family, self._type, self._meta, self._meta_nos = name, "unknown", [], []
            self._allowed = frozenset({name})
        if len(parts) == 4 and parts[1] == "TYPE":
            self._type = parts[3].strip()
            self._allowed = frozenset(name + s for s in _SUFFIXES.get(self._type, ("",)))
        self._meta.append(line)
        self._meta_nos.append(self.line_no)

    def _new_family(self, name: str, units: list[Unit | FastRun]) -> None:
        self._flush(units)
        self._family, self._type, self._meta, self._meta_nos = name, "unknown", [], []
        self._allowed = frozenset({name})

    def _sample(self, line: str, units: list[Unit | FastRun]) -> None:
        name = _sample_name(line)
        if name not in self._allowed:
            self._new_family(name, units)
        if self._type in _PER_TIMESTAMP:
            ts = _timestamp_token(line)
            if self._count and ts != self._ts:
                self._flush(units)
            self._ts = ts
        else:
            key = _series_token(line, name)
            if key != self._last_key and (key in self._keys or self._count >= MAX_UNIT_LINES):
                self._flush(units)
            self._keys.add(key)
            self._last_key = key
        self._add([line], 1, self.line_no)

    def _add(self, piece: list[str] | Lines, count: int, first_line: int) -> None:
        if not self._count:
            self._first = first_line
        self._pieces.append(piece)
        self._count += count

    def _plain(self, block: Lines, i: int, j: int, base: int, units: list[Unit | FastRun]) -> None:
        """Cut plain lines ``i`` to ``j`` of ``block`` (``base``: the file line before the block)."""
        pid = block.pid
        while i < j:
            k = self._first_outside(pid, i, j)
            if k == i:
                self._new_family(self._prefixes[int(pid[i])].name, units)  # type: ignore[union-attr]
                continue
            if self._type in _PER_TIMESTAMP:
                self._per_timestamp(block, i, k, base, units)
            else:
                self._by_series(block, i, k, base, units)
            i = k

    def _first_outside(self, pid: np.ndarray, i: int, j: int) -> int:
        """The first of lines ``i`` to ``j`` whose name the current family does not allow (``j``: none),
        looked for in growing windows, so a family's stretch costs about its own length."""
        allowed, prefixes = self._allowed, self._prefixes
        lo, width = i, 64
        while lo < j:
            hi = min(j, lo + width)
            window = pid[lo:hi]
            outside = [p for p in np.unique(window).tolist() if prefixes[p].name not in allowed]
            if outside:
                return lo + int(np.flatnonzero(np.isin(window, outside))[0])
            lo, width = hi, width * 4
        return j

    def _per_timestamp(self, block: Lines, i: int, k: int, base: int, units: list[Unit | FastRun]) -> None:
        """Plain lines ``i`` to ``k`` of a histogram or summary family: a unit per timestamp."""
        if self._count and _ts_text(block, i) != self._ts:
            self._flush(units)
        cuts = (i + 1 + np.flatnonzero(block.ts_new[i + 1 : k])).tolist()
        head = cuts[0] if cuts else k
        self._add(block.slice(i, head), head - i, base + i + 1)
        if cuts:
            self._flush(units)
            last = cuts[-1]
            if len(cuts) > 1:
                starts = np.asarray(cuts[:-1], dtype=np.int64) - cuts[0]
                self._emit(block.slice(cuts[0], last), starts, base + cuts[0] + 1 + starts, units)
            self._add(block.slice(last, k), k - last, base + last + 1)
        self._ts = _ts_text(block, k - 1)

    def _by_series(self, block: Lines, i: int, k: int, base: int, units: list[Unit | FastRun]) -> None:
        """Plain lines ``i`` to ``k`` of another family: cut where a series comes back, or at a series
        change after ``MAX_UNIT_LINES`` lines (``_sample``'s rule, per run of one series)."""
        pid = block.pid[i:k]
        runs = [0, *(1 + np.flatnonzero(pid[1:] != pid[:-1])).tolist(), k - i]
        prefixes = self._prefixes
        for a, b in itertools.pairwise(runs):
            key = prefixes[int(pid[a])].text  # type: ignore[union-attr]
            if key != self._last_key and (key in self._keys or self._count >= MAX_UNIT_LINES):
                self._flush(units)
            self._keys.add(key)
            self._last_key = key
            self._add(block.slice(i + a, i + b), b - a, base + i + a + 1)

    def _emit(
        self, lines: Lines, starts: np.ndarray, first_lines: np.ndarray, units: list[Unit | FastRun]
    ) -> None:
        family = self._family or ""
        if self._type in FAST_KINDS and "# UNIT" not in "".join(self._meta):
            units.append(
                make_run(
                    family,
                    self._type,
                    "".join(self._meta),
                    tuple(self._meta_nos),
                    lines,
                    starts,
                    first_lines,
                    self._prefixes,
                )
            )
            return
        bounds = [*starts.tolist(), len(lines)]
        for u, (lo, hi) in enumerate(itertools.pairwise(bounds)):
            units.append(self._unit(lines.slice(lo, hi).lines(), int(first_lines[u])))

    def _unit(self, lines: list[str], first: int) -> Unit:
        return Unit(self._family or "", self._type, "".join(self._meta), lines, tuple(self._meta_nos), first)

    def _flush(self, units: list[Unit | FastRun]) -> None:
        if self._count:
            pieces = self._pieces
            if all(isinstance(p, Lines) for p in pieces):
                joined = Lines.join(pieces)  # type: ignore[arg-type]
                self._emit(joined, np.zeros(1, np.int64), np.asarray([self._first]), units)
            else:
                lines = [x for p in pieces for x in (p.lines() if isinstance(p, Lines) else p)]
                units.append(self._unit(lines, self._first))
        self._pieces = []
        self._count = 0
        self._keys = set()
        self._last_key = ""


def _ts_text(block: Lines, i: int) -> str:
    """The timestamp token of plain line ``i`` (``_timestamp_token`` of its text)."""
    return _timestamp_token(block.line(i))
