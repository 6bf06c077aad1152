"""Where the client commands find the service: ``--url`` / ``--api-key``, else ``SERVEMETRICS_URL`` /
``SERVEMETRICS_API_KEY`` (both read by the flags themselves, at the CLI's edge), else a profile file (the
lowest precedence), else the demo's ``http://127.0.0.1:8321`` for the URL (docs/cli.md "Server and
key").

The profile is YAML with ``url`` and ``api_key``, at ``SERVEMETRICS_PROFILE`` (``--profile``) or
``~/.config/servemetrics/profile.yaml`` (under ``$XDG_CONFIG_HOME`` when set)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import yaml

from servemetrics.client.api import EXIT_USAGE, ClientError, Service

DEFAULT_URL = "http://127.0.0.1:8321"
PROFILE_KEYS = ("url", "api_key")


def default_profile(env: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/servemetrics/profile.yaml``, ``~/.config/…`` without ``XDG_CONFIG_HOME``."""
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "servemetrics" / "profile.yaml"


def read_profile(path: Path, explicit: bool) -> dict[str, str]:
    """``{url?, api_key?}`` of the profile at ``path``; ``{}`` when the default profile does not exist.

    Raises:
        ClientError: (exit 2) a profile named explicitly that does not exist, one that is not YAML, not a
            mapping, has a key other than ``url`` / ``api_key`` or a value that is not a string.
    """
    if not path.is_file():
        if explicit:
            raise ClientError(f"profile {path} does not exist; create it or unset SERVEMETRICS_PROFILE", 2)
        return {}
    try:
        data = yaml.safe_load(path.read_text())
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise ClientError(f"profile {path} is not YAML ({exc}); write `url: …` and `api_key: …`", 2) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ClientError(f"profile {path} must be a mapping with url and api_key", EXIT_USAGE)
    unknown = sorted(str(k) for k in data if k not in PROFILE_KEYS)
    if unknown:
        raise ClientError(f"profile {path}: unknown key(s) {', '.join(unknown)}; it holds url and api_key", 2)
    bad = [k for k, v in data.items() if not isinstance(v, str)]
    if bad:
        raise ClientError(f"profile {path}: {', '.join(bad)} must be a string (quote it)", EXIT_USAGE)
    return {str(k): str(v) for k, v in data.items()}


def resolve_service(
    url: str | None, key: str | None, profile: Path | None, env: Mapping[str, str]
) -> Service:
    """The service to call: ``url`` / ``key`` (the flags, or their environment variables) over the
    profile's (``profile``, else the default one), the URL defaulting to ``DEFAULT_URL``.

    Raises:
        ClientError: (exit 2) a bad profile (``read_profile``), or no key anywhere.
    """
    values = read_profile(profile or default_profile(env), explicit=profile is not None)
    url = url or values.get("url") or DEFAULT_URL
    key = key or values.get("api_key")
    if not key:
        raise ClientError(
            "no API key: pass --api-key, set SERVEMETRICS_API_KEY, or write api_key in the profile "
            f"({profile or default_profile(env)})",
            EXIT_USAGE,
        )
    return Service(url, key)
