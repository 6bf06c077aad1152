"""The replica's ``Server-Timing`` response header (W3C Server Timing, §3 "The Server-Timing header
field"), read for the inference time the gateway meters (``baseten_inference_time_seconds``).

Syntax (RFC 9110 list, W3C grammar)::

    Server-Timing: inference;dur=123.4;desc="model run", pre;dur=2.1, cache;desc=hit

Each comma-separated entry is a metric name (a token) with ``;``-separated parameters ``name=value``
(a token or a quoted string, which may hold ``,`` and ``;``). ``dur`` is in milliseconds. Several
header lines are one list, in order.

Rules (docs/gateway.md "Inference time"):

- the inference time is the sum of the ``dur`` of every entry named ``metric`` (exact name; several
  entries of that name add up: a server may report its run in pieces), converted to seconds. Not the
  total of every entry: servers report overlapping spans (``total`` beside its parts, ``cache``
  inside ``db``), whose sum would count time twice.
- malformed input never fails a request: an entry that does not parse is skipped up to the next
  top-level comma, a ``dur`` that is not a finite number >= 0 makes its entry count for nothing, and a
  second ``dur`` parameter of one entry is ignored (W3C processing model: the first wins). No entry of
  that name with a valid ``dur``: None (nothing is observed).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

HEADER = b"server-timing"
_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
_OWS = re.compile(r"[ \t]*")


def _skip_ows(text: str, i: int) -> int:
    m = _OWS.match(text, i)
    return m.end() if m else i


def _value(text: str, i: int) -> tuple[str | None, int]:
    """A parameter value (token or quoted string, unescaped) at ``i`` and the index after it."""
    if (m := _QUOTED.match(text, i)) is not None:
        return re.sub(r"\\(.)", r"\1", m.group(1)), m.end()
    if (m := _TOKEN.match(text, i)) is not None:
        return m.group(0), m.end()
    return None, i


def _to_next_entry(text: str, i: int) -> int:
    """The index after the next top-level comma (commas inside quoted strings do not count)."""
    while i < len(text):
        if text[i] == ",":
            return i + 1
        if text[i] == '"' and (m := _QUOTED.match(text, i)) is not None:
            i = m.end()
        else:
            i += 1
    return i


def _entry(text: str, i: int) -> tuple[str, dict[str, str]] | None:
    """One entry (metric name, its parameters, first occurrence of each) at ``i`` when it parses up to
    the next comma or the end; None when it does not."""
    i = _skip_ows(text, i)
    if (m := _TOKEN.match(text, i)) is None:
        return None
    name, i = m.group(0), _skip_ows(text, m.end())
    params: dict[str, str] = {}
    while i < len(text) and text[i] == ";":
        i = _skip_ows(text, i + 1)
        if (p := _TOKEN.match(text, i)) is None:
            return None
        key, i = p.group(0).lower(), _skip_ows(text, p.end())
        value: str | None = ""
        if i < len(text) and text[i] == "=":
            value, i = _value(text, _skip_ows(text, i + 1))
            if value is None:
                return None
            i = _skip_ows(text, i)
        params.setdefault(key, value or "")
    return (name, params) if i == len(text) or text[i] == "," else None


def entries(values: Iterable[str]) -> list[tuple[str, dict[str, str]]]:
    """The well-formed entries of ``Server-Timing`` header values, in order: ``(metric name,
    {parameter name (lowercased): value})``; malformed entries are left out (module docstring)."""
    out = []
    for text in values:
        i = 0
        while i < len(text):
            entry = _entry(text, i)
            if entry is not None:
                out.append(entry)
            i = _to_next_entry(text, i)
    return out


def _ms(value: str) -> float | None:
    try:
        ms = float(value)
    except ValueError:
        return None
    return ms if math.isfinite(ms) and ms >= 0 else None


def duration_s(headers: Iterable[tuple[bytes, bytes]], metric: str) -> float | None:
    """Seconds: the sum of the ``dur`` (milliseconds) of the ``Server-Timing`` entries named
    ``metric`` in raw ``headers`` (name, value) pairs; None when none has a valid ``dur`` (or
    ``metric`` is empty: reading is off). Never raises on malformed headers (they are skipped)."""
    if not metric:
        return None
    values = [v.decode("latin-1") for k, v in headers if k.lower() == HEADER]
    if not values:
        return None
    durations = [_ms(p["dur"]) for name, p in entries(values) if name == metric and "dur" in p]
    valid = [d for d in durations if d is not None]
    return math.fsum(valid) / 1000 if valid else None
