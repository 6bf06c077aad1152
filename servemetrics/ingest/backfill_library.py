"""The backfill's library path: a parse unit given to ``prometheus_client``'s OpenMetrics parser.

Bucket bounds are read as the scraper reads them (``exposition.normalise_le``, the one normaliser;
regression case C15). The library parser refuses a +Inf bound not written ``+Inf`` (``+inf``, ``Inf``;
client_python#938), so the text is pre-normalised before it reaches the parser rather than parsed a
second way after a failure: each distinct label text is shortened once (see ``_short_labels``) and its
``le`` is written there in ``normalise_le``'s form, so the common path (bounds already canonical) does no
per-sample work beyond today's; the few units whose labels are not shortened (a ``# UNIT`` line) go
through ``exposition.openmetrics_bounds``, the scraper's regex. Catching the parser's error and
re-parsing a unit was the alternative: it would parse a bad unit twice and need its own rewrite anyway.
A bound that is not a number keeps its text, the parser refuses its line, and the error is reported
as the scraper reports it (``line N: sample NAME: bucket bound le='…' is not a number``).

``parse_unit`` raises ``BackfillError`` naming the file line: the library's message, or the scraper's
for a bound that is not a number, a timestamp out of range, a sample without a timestamp.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass

from prometheus_client import parser as _text_parser
from prometheus_client.metrics_core import Metric
from prometheus_client.openmetrics import parser as _om_parser

from servemetrics.ingest.exposition import (
    PARSE_ERRORS,
    BoundError,
    ExpositionError,
    bound_problem,
    collect_samples,
    first_bound_problem,
    openmetrics_bounds,
    parseable_le,
)
from servemetrics.samples import Sample
from servemetrics.types import SeriesKey

_NO_TS = -(2**63)


class BackfillError(ValueError):
    """The backfill file is not valid OpenMetrics with timestamps; the message names the line."""


@dataclass(frozen=True)
class Unit:
    """One parse unit (see ``backfill``): a family's metadata and a run of its sample lines."""

    family: str  # the family name
    kind: str  # the family's TYPE ("unknown" without one)
    meta: str  # the family's metadata lines
    lines: list[str]  # sample lines
    meta_lines: tuple[int, ...]  # file line numbers of the metadata lines
    first_line: int  # file line number of the first sample line


def _error_line(unit: Unit, unit_line: int, meta_count: int) -> int:
    """The file line of line ``unit_line`` of a unit's parse text that starts with ``meta_count``
    metadata lines (the unit's own, or one synthesized ``# TYPE`` line)."""
    if unit_line <= meta_count:
        return unit.meta_lines[-1] if unit.meta_lines else unit.first_line
    return unit.first_line + unit_line - meta_count - 1


class _Lines:
    def __init__(self, text: str) -> None:
        self._it = io.StringIO(text)
        self.number = 0

    def __iter__(self) -> Iterator[str]:
        for line in self._it:
            self.number += 1
            yield line


_ALIAS = "a_"
_ALIASABLE = frozenset({"gauge", "counter", "unknown", "histogram", "gaugehistogram", "summary"})
_KEPT = ("le", "quantile")
_short_of: dict[str, str] = {}  # label text -> short label text (per process)
_alias_of: dict[str, str] = {}  # repr of the parsed labels without le/quantile -> alias id
_labels_of: dict[str, dict[str, str]] = {}  # alias id -> those labels


def _short_labels(text: str) -> str:
    """The short label text replacing ``text``: the series' alias id, plus ``le``/``quantile``, which
    the parser's histogram and summary checks need, ``le`` in ``normalise_le``'s form (which the parser
    accepts, ``+inf`` included). ``text`` itself is parsed once, by the library."""
    short = _short_of.get(text)
    if short is None:
        try:
            labels = _text_parser.parse_labels(text, True)
        except ValueError:
            return text  # leave the line as it is: the parser reports the error with its line
        kept = {k: labels.pop(k) for k in _KEPT if k in labels}
        if "le" in kept:
            kept["le"] = parseable_le(kept["le"])
        key = repr(sorted(labels.items()))
        alias = _alias_of.setdefault(key, str(len(_labels_of)))
        _labels_of.setdefault(alias, labels)
        short = "".join(f'{k}="{v}",' for k, v in kept.items()) + f'{_ALIAS}="{alias}"'
        if len(_short_of) < 1_000_000:
            _short_of[text] = short
    return short


def register_labels(prefixes: list[str]) -> None:
    """Give the label texts of these plain prefixes (``name`` or ``name{...}``) their alias ids, in this
    order, as parsing their lines here would have: a unit parsed here later, in the same process, then
    names the same ids in its errors as before the fast reader (``f{a_="17"}``)."""
    for prefix in prefixes:
        brace = prefix.find("{")
        _short_labels(prefix[brace + 1 : -1] if brace != -1 else "")


def _shorten(line: str) -> str:
    brace, space = line.find("{"), line.find(" ")
    if brace == -1 or -1 < space < brace:  # no labels (a later "{" belongs to an exemplar)
        if space == -1:
            return line
        return line[:space] + "{" + _short_labels("") + "}" + line[space:]
    end = line.find("} ", brace)
    if end == -1:
        return line
    return line[: brace + 1] + _short_labels(line[brace + 1 : end]) + line[end:]


_SHORT_NAME = "f"


def _unit_text(unit: Unit) -> tuple[str, str | None]:
    """The text handed to the parser, and the family name it was shortened from (``None``: kept)."""
    if unit.kind not in _ALIASABLE or "# UNIT" in unit.meta:
        return openmetrics_bounds(unit.meta + "".join(unit.lines)) + "# EOF\n", None
    cut = len(unit.family)
    meta = f"# TYPE {_SHORT_NAME} {unit.kind}\n" if unit.kind != "unknown" else ""
    lines = [_SHORT_NAME + _shorten(x)[cut:] for x in unit.lines]
    return meta + "".join(lines) + "# EOF\n", unit.family


def _unalias(families: list[Metric], family: str | None) -> None:
    for fam in families:
        if family is not None:
            fam.name = family
        samples = fam.samples
        for i, s in enumerate(samples):
            labels = s.labels
            alias = labels.pop(_ALIAS, None)
            if alias is not None:
                labels = {**_labels_of[alias], **labels}
            name = family + s.name[len(_SHORT_NAME) :] if family is not None else s.name
            samples[i] = s._replace(name=name, labels=labels)


def _unaliased(message: str, unit: Unit, family: str | None) -> str:
    """The parser's ``message`` with each shortened line it quotes written as the file has it (the
    parser saw ``f_total{a_="4"}`` for ``requests_total{code="200"}``; the user must see the latter)."""
    if family is None:
        return message
    cut = len(family)
    for original in unit.lines:
        short = (_SHORT_NAME + _shorten(original)[cut:]).rstrip("\n")
        if short and short in message:
            message = message.replace(short, original.rstrip("\n"))
    return message


def parse_unit(unit: Unit, created: dict[SeriesKey, int]) -> list[Sample]:
    text, family = _unit_text(unit)
    lines = _Lines(text)
    try:
        parsed = _om_parser.text_fd_to_metric_families(lines)  # type: ignore[no-untyped-call]
        families: list[Metric] = list(parsed)
    except PARSE_ERRORS as exc:
        meta_count = len(unit.meta_lines) if family is None else int(unit.kind != "unknown")
        line = _error_line(unit, lines.number, meta_count)
        index = lines.number - meta_count - 1
        problem = bound_problem(unit.lines[index]) if 0 <= index < len(unit.lines) else None
        if problem is not None:
            raise BackfillError(f"line {line}: {problem}") from exc
        raise BackfillError(
            f"line {line}: invalid OpenMetrics: {_unaliased(str(exc), unit, family)}"
        ) from exc
    _unalias(families, family)
    try:
        parsed = collect_samples(families, _NO_TS)
    except BoundError as exc:
        found = first_bound_problem(unit.lines, unit.first_line)
        raise BackfillError(
            f"line {found[0]}: {found[1]}" if found else f"line {unit.first_line}+: {exc}"
        ) from exc
    except ExpositionError as exc:
        hint = "; backfill timestamps are in seconds, not milliseconds" if "out of range" in str(exc) else ""
        raise BackfillError(f"line {unit.first_line}+: {exc}{hint}") from exc
    for key, ts in parsed.created.items():
        created.setdefault(key, ts)
    samples = parsed.samples
    for s in samples:
        if s.ts_ms == _NO_TS:
            raise BackfillError(
                f"line {unit.first_line}+: sample {s.name} has no timestamp (backfill needs them)"
            )
    return samples
