"""Checks of names that come from outside (the config file and the API): ids and scrape target URLs.

Ids of models, deployments and replicas and environment names match ``ID_PATTERN``; the deployment ids
``production`` and ``development`` are reserved because they are path aliases of the environment of that
name (``GET …/deployments/production``). A scrape target is an ``http(s)://host[:port]/path`` URL
(port 1-65535).
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"
_ID = re.compile(ID_PATTERN)
RESERVED_DEPLOYMENT_IDS = ("production", "development")
"""Deployment ids that are path aliases of the environment of that name."""


def check_id(value: str, what: str = "id") -> str:
    """``value`` when it is a valid id; else ValueError saying which characters are allowed."""
    if not _ID.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a valid {what}: use 1 to 100 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return value


def check_deployment_id(value: str) -> str:
    """``check_id`` plus: not one of the reserved aliases ``production`` / ``development``."""
    check_id(value, "deployment id")
    if value in RESERVED_DEPLOYMENT_IDS:
        raise ValueError(
            f"deployment id {value!r} is reserved: `production` and `development` name the deployment "
            "that environment serves; choose another id"
        )
    return value


def check_port(url: str, example: str) -> None:
    """Raise ValueError (ending with ``example``) unless ``url``'s port, when it has one, is a number
    from 1 to 65535."""
    netloc = urlsplit(url).netloc.rpartition("@")[2]
    host, colon, port = netloc.rpartition(":")
    if not colon or host.endswith(":") or (host.startswith("[") is not host.endswith("]")):
        return  # no port (an IPv6 literal without one, e.g. [::1], has colons inside its brackets)
    if port and (not port.isdigit() or not 1 <= int(port) <= 65535):
        raise ValueError(f"{url!r} has port {port}, not a number from 1 to 65535; {example}")


def check_target_url(url: str) -> str:
    """``url`` when it is an ``http://`` or ``https://`` URL with a host, no spaces and a port (if any)
    from 1 to 65535; else ValueError saying what to write."""
    example = "write e.g. http://10.0.0.5:8080/metrics"
    if any(ch.isspace() for ch in url):
        raise ValueError(f"target {url!r} contains whitespace; {example}")
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError as err:
        raise ValueError(f"target {url!r} is not a valid URL ({err}); {example}") from None
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"target {url!r} is not an http:// or https:// URL; {example}")
    if not host:
        raise ValueError(f"target {url!r} has no host; {example}")
    try:
        check_port(url, example)
    except ValueError as err:
        raise ValueError(f"target {err}") from None
    return url
