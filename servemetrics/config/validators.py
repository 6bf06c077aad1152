"""The config's value checks, written once: durations, ids, URLs, HTTP header values, ``listen`` and the
"X names unknown Y; use one of …" errors.

Each check raises ``ValueError`` with the message a user reads (pydantic puts the key in front of it,
``config.load`` renders it); the ``Annotated`` types below attach them to the models in ``config.model``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, GetCoreSchemaHandler, SecretStr
from pydantic_core import core_schema
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from servemetrics.netpolicy import parse_allow_entry
from servemetrics.registry.ids import check_deployment_id, check_id, check_port, check_target_url
from servemetrics.types import redact_url


class Strict(BaseModel):
    """The base of every config model: unknown keys are errors, values are frozen."""

    model_config = ConfigDict(extra="forbid", frozen=True)


_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


def parse_duration(value: Any) -> float:
    """Seconds from ``15``, ``2.5``, ``"15s"``, ``"500ms"``, ``"1m"``, ``"2h"`` or ``"15d"``.

    Raises ValueError for a bool, a string that is no duration, a non-finite or a non-positive value.
    """
    if isinstance(value, bool):
        raise ValueError("write a duration such as 15s, 1m or 15d")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value))
        if not match:
            raise ValueError(
                f"{value!r} is not a duration; write a number of seconds or e.g. 15s, 1m, 2h, 15d"
            )
        seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if not math.isfinite(seconds):
        raise ValueError(f"{value!r} is not a finite duration; write e.g. 15s, 1m, 2h, 15d")
    if seconds <= 0:
        raise ValueError("a duration must be greater than 0")
    return seconds


Duration = Annotated[float, BeforeValidator(parse_duration)]
"""Float seconds, written as ``parse_duration`` reads them."""


def bounded(at_least: tuple[float, str] | None, at_most: tuple[float, str]) -> Any:
    """A validator of seconds: at least ``at_least`` (None: any positive) and at most ``at_most``, each
    ``(seconds, as written in the error)``, e.g. ``(3600.0, "1h")``; ValueError naming the limit."""

    def check(seconds: float) -> float:
        if at_least is not None and seconds < at_least[0]:
            raise ValueError(f"must be at least {at_least[1]} (got {seconds:g}s)")
        if seconds > at_most[0]:
            raise ValueError(f"must be at most {at_most[1]} (got {seconds:g}s)")
        return seconds

    return AfterValidator(check)


ModelId = Annotated[str, AfterValidator(lambda v: check_id(v, "model id"))]
DeploymentId = Annotated[str, AfterValidator(check_deployment_id)]
ReplicaId = Annotated[str, AfterValidator(lambda v: check_id(v, "replica id"))]
EnvironmentName = Annotated[str, AfterValidator(lambda v: check_id(v, "environment name"))]
NodeId = Annotated[str, AfterValidator(lambda v: check_id(v, "node id"))]
TargetUrl = Annotated[str, AfterValidator(check_target_url)]


_BYTE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "kib": 1024,
    "mib": 1024**2,
    "gib": 1024**3,
}
_BYTES = re.compile(r"^\s*(\d+)\s*([a-zA-Z]*)\s*$")


def parse_bytes(value: Any) -> int:
    """Bytes from ``1048576``, ``"512KiB"``, ``"32MiB"``, ``"1GiB"`` (or ``KB`` / ``MB`` / ``GB``, powers of
    1000); ValueError for anything else (a bool, a fraction, an unknown unit)."""
    if isinstance(value, bool) or isinstance(value, float):
        raise ValueError(f"{value!r} is not a size; write a whole number of bytes or e.g. 1MiB, 32MiB, 1GiB")
    match = _BYTES.match(str(value))
    unit = match.group(2).lower() if match else ""
    if not match or unit not in _BYTE_UNITS:
        raise ValueError(f"{value!r} is not a size; write a whole number of bytes or e.g. 1MiB, 32MiB, 1GiB")
    return int(match.group(1)) * _BYTE_UNITS[unit]


def byte_size(at_least: int, at_most: int) -> Any:
    """A validator of sizes (``parse_bytes``) from ``at_least`` to ``at_most`` bytes; ValueError naming
    the bound."""

    def check(value: Any) -> int:
        size = parse_bytes(value)
        if not at_least <= size <= at_most:
            raise ValueError(f"must be from {at_least} to {at_most} bytes (got {size})")
        return size

    return BeforeValidator(check)


def allow_entry(value: Any) -> str:
    """A ``network.*_allow`` entry as written, when ``netpolicy.parse_allow_entry`` reads it (a network
    or a host name); ValueError saying what to write."""
    if not isinstance(value, str):
        raise ValueError(
            f"{value!r} is not a network or host name; write e.g. 10.0.0.0/8 or metrics.internal"
        )
    parse_allow_entry(value)
    return value.strip()


AllowEntry = Annotated[str, BeforeValidator(allow_entry)]


def no_duplicates(values: list[str], what: str) -> None:
    """ValueError ``duplicate <what> a, b; each must be unique`` when a value is listed twice."""
    dupes = sorted({v for v in values if values.count(v) > 1})
    if dupes:
        raise ValueError(f"duplicate {what} {', '.join(dupes)}; each must be unique")


def unknown_name(problem: str, fix: str, known: Iterable[str]) -> ValueError:
    """The error for a name that is not declared: ``<problem>; <fix>: a, b`` (``(none)`` when nothing is
    declared), e.g. ``unknown_name("model 'm' names organization 'x', which is not under organizations",
    "declare it there or use one of", orgs)``. Returned, for the caller to raise."""
    return ValueError(f"{problem}; {fix}: {', '.join(known) or '(none)'}")


def check_organization(who: str, organization: str, organizations: list[str]) -> None:
    """ValueError unless ``organization`` (named by ``who``, e.g. ``model 'm1'``) is declared under
    ``organizations``."""
    if organization not in organizations:
        raise unknown_name(
            f"{who} names organization {organization!r}, which is not under organizations",
            "declare it there or use one of",
            organizations,
        )


def check_registry_url(url: str) -> str:
    """``url`` when it is ``sqlite:///path`` or ``postgresql+psycopg://…``; a driverless
    ``postgresql://…`` (or ``postgres://…``, as libpq and Heroku write it) is returned as
    ``postgresql+psycopg://…``, the one PostgreSQL driver we ship. Else (also for a port outside 1-65535)
    ValueError saying what to write."""
    example = "write sqlite:///path/registry.sqlite3 or postgresql://user:pass@host:5432/db"
    for plain in ("postgresql://", "postgres://"):
        if url.startswith(plain):
            url = "postgresql+psycopg://" + url[len(plain) :]
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        raise ValueError(f"{redact_url(url)!r} is not a SQLAlchemy URL; {example}") from None
    if parsed.get_backend_name() == "postgresql" and parsed.drivername != "postgresql+psycopg":
        raise ValueError(f"{parsed.drivername!r} is not a supported driver; write postgresql+psycopg://…")
    if parsed.drivername not in ("sqlite", "sqlite+pysqlite", "postgresql+psycopg"):
        raise ValueError(f"{parsed.drivername!r} is not a supported registry database; {example}")
    if parsed.port is not None and not 1 <= parsed.port <= 65535:
        shown = parsed.render_as_string(hide_password=True)
        raise ValueError(f"{shown!r} has port {parsed.port}, not a number from 1 to 65535; {example}")
    return url


def rfc3339_ms(value: Any) -> int:
    """Epoch ms of an RFC 3339 time with a zone (a string, or a ``datetime`` as YAML reads one);
    ValueError saying what to write."""
    if isinstance(value, datetime):
        when = value
    else:
        try:
            when = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
        except ValueError as err:
            raise ValueError(f"{value!r} is not an RFC 3339 time; write e.g. 2026-03-01T12:00:00Z") from err
    if when.tzinfo is None:
        raise ValueError(f"{value!r} has no time zone; write e.g. 2026-03-01T12:00:00Z")
    return int(when.timestamp() * 1000)


class ListenAddress(str):
    """``listen`` as written (``host:port``; it compares equal to the string), parsed once into ``host``
    and ``port`` (1-65535). Any value is read as ``str(value)``; ValueError saying what to write."""

    host: str
    port: int

    def __new__(cls, value: Any) -> ListenAddress:
        text = str(value)
        host, _, port = text.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"{text!r} is not host:port; write e.g. 127.0.0.1:8321 or 0.0.0.0:8321")
        address = super().__new__(cls, text)
        address.host, address.port = host, int(port)
        return address

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> Any:
        return core_schema.no_info_plain_validator_function(
            cls, serialization=core_schema.to_string_ser_schema()
        )


def http_url(value: str) -> str:
    """``value`` when it is an ``http(s)://host[:port][/path]`` URL with a port (if any) in 1-65535; else
    ValueError saying what to write."""
    example = "write e.g. http://127.0.0.1:8428"
    parsed = urlsplit(value)
    if parsed.scheme not in ("http", "https") or not parsed.hostname or any(c.isspace() for c in value):
        raise ValueError(f"{value!r} is not an http(s) URL; {example}")
    check_port(value, example)
    return value


HttpUrl = Annotated[str, AfterValidator(http_url)]


def header_problem(value: str) -> str | None:
    """Why ``value`` cannot be sent as an HTTP header value (empty, spaces at an end, a control or
    non-ASCII character), or None when it can."""
    if not value:
        return "is empty"
    if value != value.strip(" \t"):
        return "starts or ends with a space"
    bad = next((c for c in value if not (c == "\t" or " " <= c <= "~")), None)
    if bad is not None:
        return f"contains the character {bad!r}, which an HTTP header cannot carry"
    return None


def secret_header(what: str, fix: str) -> Any:
    """A validator of a ``SecretStr`` sent in an HTTP header: ValueError naming ``what`` and ``fix``,
    never the secret itself."""

    def check(value: SecretStr) -> SecretStr:
        problem = header_problem(value.get_secret_value())
        if problem is not None:
            raise ValueError(f"the {what} {problem}; {fix}")
        return value

    return AfterValidator(check)


HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""An HTTP header name (RFC 9110 ``token``)."""


def username(value: str) -> str:
    """``value`` when it can be a basic-auth user name (a header value without ``:``); else ValueError."""
    problem = header_problem(value)
    if problem is None and ":" in value:
        problem = "contains ':', which basic auth cannot carry in a username"
    if problem is not None:
        raise ValueError(f"the username {problem}; write the engine's user name, e.g. username: sm")
    return value


def check_tenant_header(headers: dict[str, str]) -> None:
    """ValueError unless every name is an HTTP header name and every value can be sent."""
    for name, value in headers.items():
        if not HEADER_NAME.fullmatch(name):
            raise ValueError(
                f"tenant_header {name!r} is not an HTTP header name; use letters, digits and '-', "
                "e.g. X-Scope-OrgID: team-a"
            )
        if (problem := header_problem(value)) is not None:
            raise ValueError(
                f"the tenant_header {name} value {problem}; write the tenant in printable ASCII, "
                "e.g. X-Scope-OrgID: team-a"
            )
