"""``GET /v1/model_apis/usage`` (platform-facts §3; the SDK's ``get_model_apis_usage``): Model API token
usage of the key's organization in time buckets (``query.model_api_usage``; docs/model-apis.md "Usage").

Matched before ``GET /v1/model_apis/{model_api_name}`` (``api/app.ROUTERS`` lists this module first).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from fastapi import APIRouter, Request

from servemetrics.api.deps import Auth, RegistryDep, ServiceDep, require_org_metrics_read
from servemetrics.api.errors import bad_request
from servemetrics.api.model_api_shapes import decode_cursor, encode_cursor
from servemetrics.api.params import reject_unknown_params
from servemetrics.api.team_scope import team_scope
from servemetrics.query.model_api_usage import (
    GROUPS,
    LIMITS,
    WIDTHS_MS,
    UsageRow,
    UsageSource,
    buckets,
    usage,
)
from servemetrics.registry import KeyInfo, Registry
from servemetrics.timeutil import MAX_TS_MS, iso_ms

router = APIRouter(tags=["model_apis"])
LISTS = ("group_by", "api_keys", "models", "team_ids", "user_ids")
PARAMS = ("start_time", "end_time", "bucket_width", "limit", "cursor", *LISTS, *(f"{n}[]" for n in LISTS))


def _list(request: Request, name: str) -> list[str]:
    """A repeatable parameter (``name`` or ``name[]``, comma-separated values too), once each."""
    values = [*request.query_params.getlist(name), *request.query_params.getlist(f"{name}[]")]
    return list(dict.fromkeys(v.strip() for value in values for v in value.split(",") if v.strip()))


def _time_ms(value: str, name: str) -> int:
    """Epoch ms of an ISO 8601 time (UTC when it names no offset); 400 naming ``name`` otherwise."""
    try:
        when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise bad_request(
            f"{name}: {value!r} is not an ISO 8601 time; write e.g. 2026-01-01T00:00:00Z"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    ms = int(when.timestamp() * 1000)
    if not 0 <= ms <= MAX_TS_MS:
        raise bad_request(
            f"{name}: {value!r} is outside 1970-01-01 to {iso_ms(MAX_TS_MS)[:10]}; give a time in it"
        )
    return ms


def _limit(request: Request, width: str) -> int:
    default, most = LIMITS[width]
    raw = request.query_params.get("limit")
    if raw is None:
        return default
    if not raw.isdigit() or not 1 <= int(raw) <= most:
        raise bad_request(
            f"limit: {raw!r}; with bucket_width={width} give 1 to {most} buckets (default {default})"
        )
    return int(raw)


def _sources(registry: Registry, key: KeyInfo, models: list[str]) -> list[UsageSource]:
    """The Model APIs the key may read (the organization's, only its models' for a scoped key; those named
    in ``models`` when given) with the deployments of their models. 400 for a name outside them, listing
    only the names the key may read."""
    apis = registry.model_apis.list_model_apis(key.organization_id)
    if key.model_ids is not None:  # a scoped key neither reads nor hears of the others
        apis = [a for a in apis if a.model_id in key.model_ids]
    names = [a.name for a in apis]
    unknown = [m for m in models if m not in names]
    if unknown:
        raise bad_request(
            f"models: no Model API {', '.join(map(repr, unknown))}; "
            f"use some of: {', '.join(names) or '(none)'}"
        )
    apis = [a for a in apis if not models or a.name in models]
    out = []
    for api in apis:
        deployments = {d.id for d in registry.deployments.list_deployments(api.model_id)} | {""}
        out.append(UsageSource(api.name, api.model_id, frozenset(deployments)))
    return out


def _group_by(request: Request) -> list[str]:
    """``group_by`` (default model); 400 for a dimension outside ``GROUPS`` or any ``user_ids``."""
    group_by = _list(request, "group_by") or ["model"]
    bad = [g for g in group_by if g not in GROUPS]
    if bad or _list(request, "user_ids"):
        raise bad_request(
            f"group_by: {', '.join(bad) or 'user'}: use some of {', '.join(GROUPS)} (there are no users here)"
        )
    return group_by


def _start_ms(request: Request) -> int:
    """The first bucket's start: the ``cursor``'s, else ``start_time`` (required without a cursor)."""
    q = request.query_params
    cursor = q.get("cursor")
    if cursor is not None:
        start = decode_cursor(cursor)
        if not start.isdigit():
            raise bad_request(
                "cursor is not one this service gave; pass pagination.cursor of the previous page"
            )
        return int(start)
    if q.get("start_time") is None:
        raise bad_request("start_time is required on the first page (ISO 8601, e.g. 2026-01-01T00:00:00Z)")
    return _time_ms(q["start_time"], "start_time")


def _result(row: UsageRow) -> dict[str, Any]:
    return {
        "api_key_prefix": row.api_key_prefix,
        "user_id": None,
        "model": row.model,
        "team_id": row.team_id,
        "input_tokens": row.input_cached + row.input_uncached,
        "cached_input_tokens": row.input_cached,
        "uncached_input_tokens": row.input_uncached,
        "output_tokens": row.output,
        "request_count": row.requests,
    }


@router.get("/v1/model_apis/usage")
async def model_apis_usage(
    request: Request, service: ServiceDep, registry: RegistryDep, key: Auth
) -> dict[str, Any]:
    """``ModelApisUsageResponse``: per bucket (``bucket_width`` 1m / 1h / 1d, default 1d; ``limit``
    buckets a page, default 7 / 24 / 60 and at most 31 / 168 / 1440 by width) from ``start_time``
    (snapped down to its bucket; required without a ``cursor``, which gives the next page's start) to
    ``end_time`` (default now), the tokens and requests grouped by ``group_by`` (api_key, model, team;
    default model), filtered by ``api_keys[]``, ``models[]`` and ``team_ids[]`` (a team key: its team
    only, as the metrics). 403 a key that may not read metrics; 400 bad parameters, and a ``start_time``
    after ``end_time``."""
    reject_unknown_params(request, PARAMS)
    require_org_metrics_read(key, "Model API usage")
    q = request.query_params
    width = q.get("bucket_width", "1d")
    if width not in WIDTHS_MS:
        raise bad_request(f"bucket_width: {width!r}; use one of {', '.join(WIDTHS_MS)}")
    group_by, start_ms = _group_by(request), _start_ms(request)
    end_ms = _time_ms(q["end_time"], "end_time") if q.get("end_time") else service.clock()
    if q.get("cursor") is None and start_ms > end_ms:
        raise bad_request(
            f"start_time {iso_ms(start_ms)} is after end_time {iso_ms(end_ms)}"
            f"{'' if q.get('end_time') else ' (now)'}; give a start_time before it"
        )
    spans, next_ms = buckets(start_ms, end_ms, WIDTHS_MS[width], _limit(request, width))
    known = [t.team_id for t in registry.model_apis.list_teams(key.organization_id)]
    parts = team_scope(key, _list(request, "team_ids"), known)
    teams = None if parts is None else frozenset(p[0] for p in parts)
    keys = frozenset(_list(request, "api_keys")) or None
    sources = _sources(registry, key, _list(request, "models"))

    def answer() -> list[list[UsageRow]]:
        return usage(service.store, sources, spans, group_by, keys, teams) if spans else []

    rows = await service.reads.run(None, answer)
    items = [
        {"start_time": iso_ms(s), "end_time": iso_ms(e), "results": [_result(r) for r in got]}
        for (s, e), got in zip(spans, rows, strict=True)
    ]
    more = next_ms is not None
    return {
        "items": items,
        "pagination": {"has_more": more, "cursor": encode_cursor(str(next_ms)) if more else None},
    }
