"""Parse one ``/metrics`` scrape (Prometheus text 0.0.4 or OpenMetrics) into ``Sample`` rows.

Parsing is done by ``prometheus_client``'s own parsers; this module only picks the parser, counts lines
so that errors can name one, and turns the library's families into ``Sample`` rows with our rules:

- sample names are kept as exposed (``x_total``, ``x_bucket``, ``x_sum``, ``x_count``);
- ``*_created`` samples (OpenMetrics' in a family, the text format's ``_created`` gauge families) are not
  samples: their values (epoch seconds) become ``ParseResult.created``, the creation time of the family's
  series, which ``created_zeros`` turns into a 0 at that time (the scraper and the import decide which
  to store; docs/query-semantics.md "Counters across scrapes"); NaN values and native-histogram samples
  are dropped;
- every ``le`` is written the way Prometheus formats floats, so ``"1"``/``"1.0"`` are one bucket and
  ``"+inf"`` is ``"+Inf"``; a bound that is not a number (NaN included) fails the scrape naming its line;
- timestamps become int milliseconds (text format: ms on the wire, OpenMetrics: seconds); a sample
  without one gets the scrape time;
- the same series twice at the same time: the first wins, later copies are counted as duplicates.

Bucket bounds have one normaliser, ``normalise_le``, for every ingest path (this scraper, remote_write,
import). The OpenMetrics parser is stricter than it: it refuses ``+Inf`` spelled any other way
(client_python#938), although ``float`` reads them all. ``openmetrics_bounds`` therefore respells those
bounds ``+Inf`` in the text before the parser sees it (exact: the parser's only check on the text of a
bound is that an infinite one is written ``+Inf``), and ``bound_problem`` turns the parser's error for a
bound that is not a number into the one message of ``normalise_le``. ``quantile`` is kept as written:
the parsers already agree on it (only ±Inf would need a canonical spelling, and a quantile is in [0, 1]).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass

from prometheus_client import parser as _text_parser
from prometheus_client.openmetrics import parser as _om_parser
from prometheus_client.samples import Timestamp
from prometheus_client.utils import floatToGoString

from servemetrics.samples import Sample
from servemetrics.timeutil import MAX_TS_MS
from servemetrics.types import Labels, Millis, SeriesKey, labels_of

OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text"
_INF_LE = re.compile(r'([{,]\s*le\s*=\s*")(?!\+Inf")(?i:\s*\+?inf(?:inity)?\s*)(")')
"""An ``le`` label whose value ``float`` reads as +Inf but is not written ``+Inf`` (group 1: up to the
opening quote, group 2: the closing quote)."""
COUNTER_SUFFIXES = ("_total", "_bucket", "_sum", "_count")
"""The names of counter-like samples: the store counts their increases (a drop is a reset)."""
CREATED_HORIZON_MS = 10 * 60 * 1000
"""How far before a series' first sample its creation time may lie and still give a 0 there: the
store's counter lookback (``store.base.DEFAULT_LOOKBACK_MS``; a test keeps them equal). A 0 further
back pairs with no sample of the series and would only cost a late write."""
_CREATED = "_created"
_NOT_FAMILY_LABELS = ("le", "quantile")
PARSE_ERRORS = (ValueError, IndexError, KeyError, TypeError, AttributeError)
"""What the ``prometheus_client`` parsers raise on a malformed line (they have no error class of their
own); ``parse_exposition`` and ``backfill`` turn these into their own errors."""


class ExpositionError(ValueError):
    """A scrape body that the library parser rejects; the message names the (1-based) line."""


@dataclass(frozen=True)
class ParseResult:
    """The samples of one scrape, in exposition order, and how many duplicate samples were dropped."""

    samples: list[Sample]
    duplicates: int
    created: dict[SeriesKey, int] = dataclasses.field(default_factory=dict)
    """``(family name, labels without le/quantile)`` -> creation time (epoch ms) from ``_created``."""


def is_openmetrics(text: str, content_type: str | None) -> bool:
    """True when the content type says OpenMetrics or the body ends with ``# EOF``."""
    if content_type and content_type.split(";")[0].strip().lower() == OPENMETRICS_CONTENT_TYPE:
        return True
    return text.rstrip().endswith("# EOF")


def format_bound(bound: float) -> str:
    """A bucket bound as Prometheus writes it (Go's float formatting: ``1.0``, ``0.25``, ``+Inf``)."""
    return str(floatToGoString(bound))  # type: ignore[no-untyped-call]


@functools.lru_cache(maxsize=10_000)
def normalise_le(le: str) -> str:
    """Format a bucket bound as Prometheus does: ``"1"``, ``"1e0"`` -> ``"1.0"``; ``"+inf"``, ``"Inf"``
    -> ``"+Inf"``. The one normaliser of bounds: scrape, remote_write and import all call it.

    Raises:
        ValueError: ``le`` is not a number (what ``float`` does not read, or NaN); the message is
            ``bucket bound le='…' is not a number``, which each path prefixes with the line or series.
    """
    try:
        bound = float(le)
    except ValueError:
        bound = math.nan
    if math.isnan(bound):
        raise ValueError(f"bucket bound le={le!r} is not a number")
    return format_bound(bound)


class BoundError(ExpositionError):
    """A sample whose ``le`` is not a number: ``sample NAME: bucket bound le='…' is not a number``."""


def _checked_le(name: str, le: str) -> str:
    try:
        return normalise_le(le)
    except ValueError as exc:
        raise BoundError(f"sample {name}: {exc}") from None


def openmetrics_bounds(text: str) -> str:
    """OpenMetrics ``text`` with every +Inf bucket bound written ``+Inf`` (``+inf``, ``Inf``, ``INF``,
    ``+Infinity``, …), the only spelling the library parser accepts; other text is unchanged."""
    return _INF_LE.sub(r"\1+Inf\2", text)


def parseable_le(le: str) -> str:
    """A parsed ``le`` value as the OpenMetrics parser accepts it (``normalise_le``'s form), or ``le``
    unchanged when it is not a number (the parser then refuses its line, see ``bound_problem``)."""
    try:
        return normalise_le(le)
    except ValueError:
        return le


def bound_problem(line: str) -> str | None:
    """``sample NAME: bucket bound le='…' is not a number`` when the exposition sample ``line`` has an
    ``le`` label that is not a number, else ``None``. For error paths only: it parses the line's labels."""
    brace = line.find("{")
    name = line[:brace].rstrip()
    end = line.find("} ", brace)
    if brace <= 0 or " " in name or end == -1:
        return None
    try:
        labels = _text_parser.parse_labels(line[brace + 1 : end], True)
    except PARSE_ERRORS:
        return None
    try:
        if "le" in labels:
            normalise_le(labels["le"])
    except ValueError as exc:
        return f"sample {name}: {exc}"
    return None


def first_bound_problem(lines: list[str], first_line: int) -> tuple[int, str] | None:
    """The number and problem of the first line of ``lines`` (numbered from ``first_line``) whose ``le``
    is not a number."""
    for i, line in enumerate(lines):
        problem = bound_problem(line)
        if problem is not None:
            return first_line + i, problem
    return None


def timestamp_ms(ts: float | Timestamp | None, default_ms: int) -> int:
    """Convert a library timestamp (seconds as float or ``Timestamp``) to int epoch milliseconds."""
    if ts is None:
        return default_ms
    if isinstance(ts, Timestamp):
        return ts.sec * 1000 + ts.nsec // 1_000_000
    return round(ts * 1000)


PARSE_CHUNK = 1024
"""A text-format family is handed to the library parser in pieces of this many sample lines, and
``parse_exposition``'s ``on_samples`` is called when at least this many new samples are collected (so a
scrape over its ``sample_limit`` stops after at most about ``sample_limit + 2 * PARSE_CHUNK`` samples)."""
_CHUNK_BREAK = "# TYPE servemetrics_parse_chunk untyped\n"
"""Ends the library text parser's current family (it yields it); the family's headers follow again."""


def _lines(text: str) -> Iterator[str]:
    """The lines of ``text`` with their ``\\n``, as ``io.StringIO(text)`` gives them, without its copy of
    the text (four bytes a character: 17 MB for a 4 MB scrape)."""
    start, end = 0, len(text)
    while start < end:
        stop = text.find("\n", start) + 1 or end
        yield text[start:stop]
        start = stop


class _CountingLines:
    """Iterate the lines of a text for the library parser, remembering the current line number, which
    names a text-format ``# TYPE`` line declared as counters, and whether the text is done.

    With ``split_every`` (text format only), a family longer than that many sample lines is split: the
    parser is given ``_CHUNK_BREAK`` and the family's ``# HELP`` / ``# TYPE`` lines again before its next
    sample line, so it yields the family in pieces instead of holding all its samples. The samples are the
    same (``collect_samples`` uses a family only to undo the parser's ``_total`` on counters); the
    ``# HELP`` text is the parser's and not used."""

    def __init__(self, text: str, split_every: int = 0) -> None:
        self._text = text
        self._split_every = split_every
        self.number = 0
        self.counter_names: set[str] = set()
        self.done = False

    def __iter__(self) -> Iterator[str]:
        headers: list[str] = []  # the current family's HELP / TYPE lines
        run = -1  # sample lines since those headers; -1: none yet
        for line in _lines(self._text):
            self.number += 1
            if line.startswith("# TYPE ") and line.rstrip().endswith(" counter"):
                parts = line.split()
                if len(parts) == 4:
                    self.counter_names.add(parts[2])
            if self._split_every:
                words = line.split(None, 2)
                if words[:1] == ["#"] and words[1:2] in (["HELP"], ["TYPE"]):
                    headers, run = ([] if run > 0 else headers) + [line], 0
                elif words and not words[0].startswith("#"):
                    if run >= self._split_every:
                        yield _CHUNK_BREAK
                        yield from headers
                        run = 0
                    run = max(run, 0) + 1
            yield line
        self.done = True


def _decode(body: bytes | str) -> str:
    if isinstance(body, str):
        return body
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ExpositionError(f"body is not UTF-8 (byte {exc.start}): {exc.reason}") from exc


def parse_exposition(
    body: bytes | str,
    content_type: str | None,
    scrape_ts_ms: int,
    on_samples: Callable[[list[Sample]], None] | None = None,
) -> ParseResult:
    """Parse one scrape into samples with the library parser matching ``content_type``.

    Args:
        body: the HTTP response body.
        content_type: the response's Content-Type (``None`` when unknown).
        scrape_ts_ms: epoch ms given to samples that carry no timestamp.
        on_samples: called while the text is still being parsed with the samples collected since its
            previous call, whenever there are ``PARSE_CHUNK`` or more (text format: long families are
            parsed in pieces, ``_CountingLines``; OpenMetrics: family by family). What it raises stops the
            parse and is raised here: the scraper counts its ``sample_limit`` so (issue 12).

    Raises:
        ExpositionError: any malformed line fails the whole scrape (no partial result); the
            message starts with ``line N:``. A sample the library parsed but these rules refuse (a bound
            that is not a number, a timestamp out of range) is reported only when the library parses the
            rest of the text: a malformed line later in it is the error then.
    """
    text = _decode(body)
    openmetrics = is_openmetrics(text, content_type)
    if openmetrics:
        text = openmetrics_bounds(text)
    lines = _CountingLines(text, 0 if openmetrics or on_samples is None else PARSE_CHUNK)
    parse = _om_parser.text_fd_to_metric_families if openmetrics else _text_parser.text_fd_to_metric_families
    collected = _Collector(scrape_ts_ms, set() if openmetrics else lines.counter_names)
    try:
        refused = _collect(parse(lines), lines, collected, on_samples)  # type: ignore[arg-type]
    except PARSE_ERRORS as exc:
        problem = bound_problem(text.split("\n")[lines.number - 1]) if lines.number else None
        if problem is not None:
            raise ExpositionError(f"line {lines.number}: {problem}") from exc
        fmt = "OpenMetrics" if openmetrics else "Prometheus text"
        raise ExpositionError(f"line {lines.number}: invalid {fmt} exposition: {exc}") from exc
    if isinstance(refused, BoundError):
        found = first_bound_problem(text.split("\n"), 1)
        if found is not None:
            raise ExpositionError(f"line {found[0]}: {found[1]}") from refused
    if refused is not None:
        raise refused
    return collected.result()


def _collect(
    families: Iterable[object],
    lines: _CountingLines,
    collected: _Collector,
    on_samples: Callable[[list[Sample]], None] | None,
) -> ExpositionError | None:
    """Collect the library parser's ``families`` of ``lines`` as they come, handing ``on_samples`` the new
    samples whenever ``PARSE_CHUNK`` or more are new and the text is not done. Returns the error of the
    first sample ``collected`` refused (the parse goes on: the library's error on a later line comes
    first), or None."""
    refused: ExpositionError | None = None
    for family in families:
        if refused is not None:
            continue
        try:
            collected.add(family)
        except ExpositionError as exc:
            refused = exc
            continue
        if on_samples is not None and not lines.done and collected.pending >= PARSE_CHUNK:
            on_samples(collected.take_new())
    return refused


def _exposed_name(
    sample_name: str, family_name: str, family_type: str, renamed: set[str] | frozenset[str]
) -> str:
    # The text parser appends ``_total`` to counters declared without it; undo that.
    if family_type == "counter" and family_name in renamed and sample_name == family_name + "_total":
        return family_name
    return sample_name


def collect_samples(
    families: Iterable[object],
    default_ts_ms: int,
    *,
    renamed_counters: set[str] | frozenset[str] = frozenset(),
) -> ParseResult:
    """Turn library ``Metric`` families into ``Sample`` rows with this module's rules (see the module
    docstring). ``renamed_counters`` names text-format counters declared without ``_total``.

    Raises:
        BoundError: a bucket bound that is not a number; ExpositionError: a timestamp out of range.
    """
    collected = _Collector(default_ts_ms, renamed_counters)
    for fam in families:
        collected.add(fam)
    return collected.result()


class _Collector:
    """``collect_samples`` one family at a time: ``add`` each, ``result`` at the end (``take_new``: the
    samples added since its previous call)."""

    def __init__(self, default_ts_ms: int, renamed_counters: set[str] | frozenset[str]) -> None:
        self._default_ts_ms = default_ts_ms
        self._renamed = renamed_counters
        self._out: list[Sample] = []
        self._seen: set[tuple[str, Labels, Millis]] = set()
        self._created: dict[SeriesKey, int] = {}
        self._duplicates = 0
        self._taken = 0

    @property
    def pending(self) -> int:
        """Samples added since ``take_new`` was last called."""
        return len(self._out) - self._taken

    def take_new(self) -> list[Sample]:
        """The samples added since the previous call."""
        new = self._out[self._taken :]
        self._taken = len(self._out)
        return new

    def result(self) -> ParseResult:
        """Every sample added, the duplicates dropped and the creation times."""
        return ParseResult(self._out, self._duplicates, self._created)

    def add(self, fam: object) -> None:
        """Collect the samples of one library ``Metric`` family (raises as ``collect_samples``)."""
        fname, ftype = fam.name, fam.type  # type: ignore[attr-defined]
        default_ts_ms, out, seen = self._default_ts_ms, self._out, self._seen
        for s in fam.samples:  # type: ignore[attr-defined]
            name = _exposed_name(s.name, fname, ftype, self._renamed)
            if name.endswith(_CREATED):
                _add_created(self._created, name, s.labels, float(s.value))
                continue
            if s.native_histogram is not None:
                continue
            value = float(s.value)
            if not math.isfinite(value):
                continue  # NaN marks staleness; an infinite value would poison every sum it enters
            labels = s.labels
            if "le" in labels:
                labels = {**labels, "le": _checked_le(name, labels["le"])}
            ts = timestamp_ms(s.timestamp, default_ts_ms)
            if ts != default_ts_ms and not 0 <= ts < MAX_TS_MS:
                raise ExpositionError(
                    f"sample {name}: timestamp {s.timestamp} is out of range (epoch 1970-2200)"
                )
            key = (name, labels_of(labels), ts)
            if key in seen:
                self._duplicates += 1
                continue
            seen.add(key)
            out.append(Sample(key[0], key[1], value, key[2]))


def _add_created(created: dict[SeriesKey, int], name: str, labels: dict[str, str], seconds: float) -> None:
    """Record a ``_created`` sample (epoch seconds) under its family's name and labels; the first one of a
    series wins (a file repeats it at every timestamp), one that is not a finite time is ignored."""
    if not math.isfinite(seconds) or not 0 <= seconds * 1000 < MAX_TS_MS:
        return
    family = {k: v for k, v in labels.items() if k not in _NOT_FAMILY_LABELS}
    created.setdefault((name[: -len(_CREATED)], labels_of(family)), round(seconds * 1000))


def _family_key(sample: Sample) -> SeriesKey | None:
    """The ``ParseResult.created`` key of a counter-like sample (None for others)."""
    name = sample.name
    for suffix in COUNTER_SUFFIXES:
        if name.endswith(suffix):
            labels = sample.labels
            if any(k in _NOT_FAMILY_LABELS for k, _ in labels):
                labels = tuple(kv for kv in labels if kv[0] not in _NOT_FAMILY_LABELS)
            return (name[: -len(suffix)], labels)
    return None


def created_zeros(
    samples: Iterable[Sample], created: Mapping[SeriesKey, int], horizon_ms: int | None = None
) -> list[Sample]:
    """A 0 at its family's creation time before the first sample of each counter-like series of
    ``samples`` whose family has a ``_created`` time in ``created`` (source names, before ``adapt``).

    With ``horizon_ms``, only creation times in ``[first.ts_ms - horizon_ms, first.ts_ms)`` give a 0
    (the import's rule); without, every creation time gives one and the caller judges it (the scraper,
    which also knows the target's previous scrape).
    """
    if not created:
        return []
    out: list[Sample] = []
    done: set[SeriesKey] = set()
    for s in samples:
        key = s[:2]
        if key in done:
            continue
        done.add(key)
        family = _family_key(s)
        ts = created.get(family) if family is not None else None
        if ts is None or (horizon_ms is not None and not s.ts_ms - horizon_ms <= ts < s.ts_ms):
            continue
        out.append(Sample(s.name, s.labels, 0.0, ts))
    return out
