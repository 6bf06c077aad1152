"""The wire shapes of the Model API management routes: the platform SDK's ``ModelAPI`` and
``ModelAPIsResponse`` (PyPI ``baseten`` 0.13.1, ``baseten/client/managementapi/_models.py``), built from
the registry's ``ModelApiInfo``, and the opaque page cursors of the list and usage routes."""

from __future__ import annotations

import base64
import binascii
import datetime as dt
from typing import Any

from servemetrics.api.errors import bad_request
from servemetrics.registry.model_apis import ModelApiInfo, RateLimits
from servemetrics.timeutil import iso_ms


def rate_limits(limits: RateLimits) -> list[dict[str, Any]]:
    """The SDK's ``RateLimit`` list: ``REQUEST`` and ``TOKEN`` per ``MINUTE``, those that are set."""
    out = []
    if limits.requests_per_minute is not None:
        out.append({"type": "REQUEST", "unit": "MINUTE", "threshold": limits.requests_per_minute})
    if limits.tokens_per_minute is not None:
        out.append({"type": "TOKEN", "unit": "MINUTE", "threshold": limits.tokens_per_minute})
    return out


def model_api(
    api: ModelApiInfo, team_id: str | None, invoke_url: str, last_used_ms: int | None
) -> dict[str, Any]:
    """One ``ModelAPI``: the limits in effect for a caller of team ``team_id`` (``ModelApiInfo.limits_of``),
    ``release_date`` and ``org_details.added_at`` the day / instant it was added to the registry,
    ``last_used_at`` the last call through this service process (None: none since it started), no
    prices (self-hosted: ``cost_per_million_*`` null) and no ``model_family``."""
    added = dt.datetime.fromtimestamp(api.created_at_ms / 1000, tz=dt.UTC)
    return {
        "name": api.name,
        "display_name": api.display_name,
        "description": api.description,
        "model_family": None,
        "release_date": added.date().isoformat(),
        "invoke_url": invoke_url,
        "context_length": api.context_length,
        "cost_per_million_input_tokens": None,
        "cost_per_million_output_tokens": None,
        "rate_limits": rate_limits(api.limits_of(team_id)),
        "org_details": {
            "added_at": iso_ms(api.created_at_ms),
            "last_used_at": iso_ms(last_used_ms) if last_used_ms is not None else None,
        },
    }


def encode_cursor(value: str) -> str:
    """An opaque cursor naming the last item of a page (URL-safe base64 of ``value``)."""
    return base64.urlsafe_b64encode(value.encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> str:
    """The value an ``encode_cursor`` cursor names; 400 when ``cursor`` is not one."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        return base64.b64decode(padded, altchars=b"-_", validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise bad_request(
            "cursor is not one this service gave; pass pagination.cursor of the previous page unchanged"
        ) from None
