"""The operator's policies and limits of the config file: ``network``, ``limits``, ``auth_rate_limit``,
``api_rate_limit``, ``ingest``, ``reads``, ``server``, ``health`` and ``gateway`` (docs/configuration.md,
docs/security.md). Sizes are bytes, durations float seconds."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field, field_validator, model_validator

from servemetrics.config.validators import AllowEntry, Duration, Strict, bounded, byte_size

MiB = 1 << 20
"""Bytes in a MiB (the ``limits`` defaults)."""
MAX_API_RATE = 10_000
"""The highest ``api_rate_limit`` value (each counted request is remembered for its window)."""


class NetworkConfig(Strict):
    """Where tenant-supplied URLs may lead (``servemetrics.netpolicy``, docs/security.md): networks and
    host names allowed for replica targets registered through the API and for webhooks, lifting the
    default refusals."""

    targets_allow: list[AllowEntry] = []
    webhooks_allow: list[AllowEntry] = []


class LimitsConfig(Strict):
    """Request body limits in bytes (``1048576`` or ``1MiB``): every API body, the gateway's inference
    bodies, remote_write (the body and the size it declares decompressed) and ``/v1/import``; samples per
    remote_write and import request; active series (seen in the last hour) per organization (0: off)."""

    max_body_bytes: Annotated[int, byte_size(1024, 1 << 30)] = 1 * MiB
    inference_body_bytes: Annotated[int, byte_size(1024, 1 << 34)] = 32 * MiB
    remote_write_body_bytes: Annotated[int, byte_size(1024, 1 << 30)] = 32 * MiB
    import_body_bytes: Annotated[int, byte_size(1024, 1 << 40)] = 1024 * MiB
    remote_write_samples: int = Field(default=1_000_000, ge=1, le=100_000_000)
    import_samples: int = Field(default=100_000_000, ge=1, le=10_000_000_000)
    series_per_organization: int = Field(default=1_000_000, ge=0, le=1_000_000_000)


class AuthRateLimitConfig(Strict):
    """Failed-authentication limiting per client address (docs/security.md): after ``failures``
    requests with a key that is not stored within ``window`` (float seconds), every authenticated request
    from that address is a 429 until the oldest of them is ``window`` old. ``failures: 0`` turns it off."""

    failures: int = Field(default=30, ge=0, le=1_000_000)
    window: Annotated[Duration, bounded((1.0, "1s"), (86400.0, "1d"))] = 60.0


class ApiRateLimitConfig(Strict):
    """The management API's limits per API key and endpoint (platform-facts §4, docs/security.md):
    ``per_second`` requests per second of every ``/v1/*`` management route, ``activate_per_minute`` per
    minute of ``POST …/deployments/{deployment_id}/activate`` and of ``/deactivate``,
    ``retry_per_minute`` of ``POST …/deployments/{deployment_id}/retry``. Over one, a 429 with
    ``retry_after``. 0 turns that limit off."""

    per_second: int = Field(default=100, ge=0, le=MAX_API_RATE)
    activate_per_minute: int = Field(default=20, ge=0, le=MAX_API_RATE)
    retry_per_minute: int = Field(default=10, ge=0, le=MAX_API_RATE)


class IngestConfig(Strict):
    """The worker threads that decode, parse, adapt and store pushed samples (remote_write, import) and
    parse scrapes, off the event loop: ``workers`` threads for pushed bodies (the scraper's parsing has
    as many of its own), ``queue`` more requests admitted to wait for one, and ``retry_after`` (float
    seconds, sent rounded up) in the 503 that answers a push when all are taken."""

    workers: int = Field(default=2, ge=1, le=64)
    queue: int = Field(default=4, ge=0, le=1000)
    retry_after: Annotated[Duration, bounded((1.0, "1s"), (3600.0, "1h"))] = 5.0


class ReadsConfig(Strict):
    """The worker threads that compute metrics answers (``api.read_pool.ReadPool``): ``workers`` at
    once, the rest waiting in arrival order; identical concurrent requests with a fixed window share one
    answer."""

    workers: int = Field(default=2, ge=1, le=64)


class ServerConfig(Strict):
    """The HTTP server's connection limits (uvicorn; float seconds): ``header_timeout``, the most a client
    may take from opening a connection (or starting its next request on it) to the end of the request's
    headers; ``keep_alive_timeout``, how long an idle kept-alive connection stays open;
    ``limit_concurrency``, the most connections or requests at once (over it new requests are a 503)."""

    header_timeout: Annotated[Duration, bounded((0.1, "100ms"), (3600.0, "1h"))] = 10.0
    keep_alive_timeout: Annotated[Duration, bounded((0.1, "100ms"), (3600.0, "1h"))] = 5.0
    limit_concurrency: int = Field(default=2048, ge=1, le=1_000_000)


class HealthConfig(Strict):
    """The gateway's health checks of replicas (docs/gateway.md "Health"; float seconds): ``interval``
    between two checks of a serving replica, ``timeout`` of one check, ``failures`` consecutive failed
    checks that fail an active replica (FAILED), and the backoff of a FAILED replica's checks:
    ``recovery_backoff`` before the first, doubling after each failed one up to ``recovery_backoff_max``;
    ``startup_stall_timeout``: a startup attempt neither ready nor ended this long after it began is
    STALLED (docs/management.md "Startup times")."""

    interval: Annotated[Duration, bounded((0.05, "50ms"), (3600.0, "1h"))] = 2.0
    timeout: Annotated[Duration, bounded((0.01, "10ms"), (60.0, "1m"))] = 1.0
    failures: int = Field(default=2, ge=1, le=100)
    recovery_backoff: Annotated[Duration, bounded((0.05, "50ms"), (3600.0, "1h"))] = 1.0
    recovery_backoff_max: Annotated[Duration, bounded((0.05, "50ms"), (86400.0, "1d"))] = 60.0
    startup_stall_timeout: Annotated[Duration, bounded((1.0, "1s"), (7 * 86400.0, "7d"))] = 900.0

    @model_validator(mode="after")
    def _check(self) -> HealthConfig:
        if self.recovery_backoff > self.recovery_backoff_max:
            raise ValueError(
                f"recovery_backoff ({self.recovery_backoff:g}s) must not exceed recovery_backoff_max "
                f"({self.recovery_backoff_max:g}s)"
            )
        return self


_TOKEN = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]*")
"""An HTTP token (RFC 9110 §5.6.2), the syntax of a Server-Timing metric name; empty allowed."""


class GatewayConfig(Strict):
    """What the gateway reads from the replicas' answers (docs/gateway.md "Inference time"):
    ``server_timing_metric``, the ``Server-Timing`` entry whose ``dur`` is the inference time
    (``baseten_inference_time_seconds``); ``""`` turns reading it off."""

    server_timing_metric: str = "inference"

    @field_validator("server_timing_metric")
    @classmethod
    def _token(cls, value: str) -> str:
        if _TOKEN.fullmatch(value) is None:
            raise ValueError(
                f"{value!r} is not a Server-Timing metric name: write it as the replica does, with "
                "letters, digits and !#$%&'*+-.^_`|~ only (no spaces, commas, semicolons or quotes), "
                'or "" to not read the header'
            )
        return value
