"""The window flags of the metrics commands and their client-side checks, as the platform CLI does them
(platform-facts §3 "Client-side validation"), and the times and durations the output prints.

``--start`` / ``--end`` are ISO-8601 (a time with no offset is in the local time zone); ``--since`` is a
Go duration (``90s``, ``15m``, ``1h30m``) or ``<N>d``, at most 7 days, and means ``[now − since, now]``.
All epoch values are milliseconds; ``step`` values seconds.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, tzinfo

from servemetrics.client.api import EXIT_USAGE, ClientError

MAX_WINDOW_MS = 7 * 24 * 3_600_000
"""The longest window (the platform CLI's ``maxLogTimeRange = 7*24h``; the API's limit too)."""
HOUR_MS = 3_600_000
_GO_UNITS_MS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "μs": 1e-3, "ms": 1.0, "s": 1e3, "m": 6e4, "h": 3.6e6}
_GO_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_DAYS = re.compile(r"(\d+)d")
_SINCE_HELP = "a duration like 90s, 15m, 1h30m or 7d"


@dataclass(frozen=True)
class Clock:
    """The commands' "now" (epoch ms) and time zone (None: the system's local zone). Tests pass a fixed
    one as the Typer context's ``obj``."""

    now_ms: Callable[[], int]
    tz: tzinfo | None = None


def _usage(message: str) -> ClientError:
    return ClientError(message, EXIT_USAGE)


def parse_time(flag: str, text: str, tz: tzinfo | None) -> int:
    """``text`` (ISO-8601, e.g. ``2026-01-01T12:00:00Z``, ``2026-01-01T12:00+02:00``, ``2026-01-01``) as
    epoch ms; a time without an offset is in ``tz`` (None: the local zone).

    Raises:
        ClientError: (exit 2) not ISO-8601, naming ``flag``.
    """
    try:
        dt = datetime.fromisoformat(text.strip())
    except ValueError:
        raise _usage(
            f"{flag} {text!r} is not an ISO-8601 time; write e.g. 2026-01-01T12:00:00Z, or "
            "2026-01-01T12:00 for local time"
        ) from None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=tz) if tz is not None else dt.astimezone()
    return round(dt.timestamp() * 1000)


def parse_since(text: str, max_ms: int | None = MAX_WINDOW_MS) -> int:
    """``--since`` in ms: a Go duration (``1h30m``, ``90s``, ``1.5h``) or ``<N>d`` (days), positive and at
    most ``max_ms`` (7 days; None: no limit).

    Raises:
        ClientError: (exit 2) another form, not positive (at least 1 ms), or over ``max_ms``.
    """
    raw = text.strip()
    sign, body = (-1, raw[1:]) if raw[:1] == "-" else (1, raw.removeprefix("+"))
    if m := _DAYS.fullmatch(body):
        ms = int(m.group(1)) * 24 * HOUR_MS
    elif body and _GO_PART.sub("", body) == "" and (parts := _GO_PART.findall(body)):
        ms = round(sum(float(n) * _GO_UNITS_MS[u] for n, u in parts))
    elif body == "0":
        ms = 0
    else:
        raise _usage(f"--since {text!r} is not a duration; write {_SINCE_HELP}")
    if sign * ms < 1:
        raise _usage(f"--since must be positive (at least 1ms), not {text!r}; write {_SINCE_HELP}")
    if max_ms is not None and ms > max_ms:
        raise _usage(f"--since {text} is longer than 7d, the longest window; write at most 7d")
    return ms


def check_window(start_ms: int | None, end_ms: int | None, max_ms: int | None = MAX_WINDOW_MS) -> None:
    """``--start`` earlier than ``--end`` and the window at most ``max_ms`` (when both are given).

    Raises:
        ClientError: (exit 2) saying which.
    """
    if start_ms is None or end_ms is None:
        return
    if start_ms >= end_ms:
        raise _usage("--start must be earlier than --end")
    if max_ms is not None and end_ms - start_ms > max_ms:
        raise _usage(
            f"the window is {format_duration(end_ms - start_ms)} long; it may be at most 7d: move "
            "--start later or --end earlier"
        )


def resolve_flags(
    mode: str,
    start: str | None,
    end: str | None,
    since: str | None,
    clock: Clock,
    max_ms: int | None = MAX_WINDOW_MS,
) -> tuple[int | None, int | None]:
    """``(start_ms, end_ms)`` to send for ``--mode`` ``mode`` (``current`` / ``summary`` / ``series``)
    and the window flags; None where the service's default applies (end: now, start: end − 1 h).

    Raises:
        ClientError: (exit 2) a window flag with ``--mode current``, ``--since`` with ``--start`` /
            ``--end``, or a check of ``parse_time``, ``parse_since``, ``check_window`` failing.
    """
    if mode == "current" and (start or end or since):
        raise _usage(
            "--mode current takes no --start, --end or --since: omit them, or use --mode summary or "
            "--mode series for a time range"
        )
    if since is not None:
        if start is not None or end is not None:
            raise _usage("--since cannot be combined with --start or --end: give one or the other")
        now = clock.now_ms()
        return now - parse_since(since, max_ms), now
    start_ms = None if start is None else parse_time("--start", start, clock.tz)
    end_ms = None if end is None else parse_time("--end", end, clock.tz)
    check_window(start_ms, end_ms, max_ms)
    return start_ms, end_ms


def format_duration(ms: int) -> str:
    """``ms`` as days, hours, minutes, seconds and ms, largest first, zero parts left out: 3600000 →
    ``1h``, 5400000 → ``1h30m``, 604800000 → ``7d``, 1500 → ``1s500ms``, 0 → ``0s``."""
    parts = []
    for unit, size in (("d", 86_400_000), ("h", HOUR_MS), ("m", 60_000), ("s", 1000), ("ms", 1)):
        count, ms = divmod(ms, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def format_time(ms: int, tz: tzinfo | None, millis: bool = False) -> str:
    """Epoch ``ms`` as ISO-8601 in ``tz`` (None: the local zone) with its offset, to the second (to the
    millisecond when it has some, or with ``millis``): ``2026-01-01T00:00:00+00:00``."""
    dt = datetime.fromtimestamp(ms / 1000, UTC).astimezone(tz)
    return dt.isoformat(timespec="milliseconds" if millis or ms % 1000 else "seconds")


def window_line(start_ms: int, end_ms: int, step_s: int | None, tz: tzinfo | None) -> str:
    """``Window: <start> → <end> (<duration>)``, then `` · <step>/step`` in series mode (the platform
    CLI's stderr line, platform-facts §3 "Output")."""
    span = f"{format_time(start_ms, tz)} → {format_time(end_ms, tz)}"
    line = f"Window: {span} ({format_duration(end_ms - start_ms)})"
    return line if step_s is None else f"{line} · {format_duration(step_s * 1000)}/step"
