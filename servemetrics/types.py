"""Type aliases shared by every layer, and two tiny helpers every layer may use.

- ``Millis``: a Unix epoch time in integer milliseconds.
- ``Labels``: a label set as a tuple of ``(name, value)`` pairs sorted by name; hashable, so it can key dicts.
- ``SeriesKey``: ``(metric_name, Labels)``, the identity of one series.
- ``Matchers``: ``(label, value)`` pairs a selected series must carry.
- ``labels_of``: the canonical ``Labels`` of a mapping.
- ``redact_url``: a URL as it may be shown (API responses, logs, metric labels): its password is ``***``.
- ``escape_log``: outside text (scraped bodies, answers of replicas and engines) made safe to quote in a
  log line: control characters escaped, so a body cannot start a fake log line or colour the terminal.
"""

from __future__ import annotations

Millis = int
Labels = tuple[tuple[str, str], ...]
SeriesKey = tuple[str, Labels]
Matchers = tuple[tuple[str, str], ...]
"""Label equality matchers: ``(name, value)`` pairs a series must carry (``()`` matches every series)."""


def labels_of(mapping: dict[str, str]) -> Labels:
    """Return the canonical ``Labels`` tuple (sorted by label name) for a mapping."""
    return tuple(sorted(mapping.items()))


REDACTED = "***"
"""What ``redact_url`` shows instead of a URL's password."""


def redact_url(url: str) -> str:
    """``url`` with the password of its ``user:password@`` part replaced by ``***`` (the user is kept).

    For showing a target URL in API responses, log lines and metric labels; the scraper still uses the
    real URL. A URL without a password (or that is not a URL) is returned unchanged. Never raises.
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    end = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    netloc, tail = rest[:end], rest[end:]
    userinfo, at, hostport = netloc.rpartition("@")
    if not at or ":" not in userinfo:
        return url
    user = userinfo.partition(":")[0]
    return f"{scheme}://{user}:{REDACTED}@{hostport}{tail}"


_LOG_ESCAPES = {
    **{c: f"\\x{c:02x}" for c in [*range(0x20), 0x7F, *range(0x80, 0xA0)]},
    0x09: "\\t",
    0x0A: "\\n",
    0x0D: "\\r",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}


def escape_log(text: str) -> str:
    """``text`` with every control character written as an escape: ``\\r``, ``\\n``, ``\\t``,
    ``\\x1b`` (C0, DEL and C1 as ``\\xNN``) and the Unicode line and paragraph separators as
    ``\\u2028`` / ``\\u2029``; everything else (backslashes included) is kept. For every log line that
    quotes outside input (scrape errors, answers of replicas, webhooks and engines): one log record stays
    one line and holds no terminal escape sequence. Never raises."""
    return text.translate(_LOG_ESCAPES)
