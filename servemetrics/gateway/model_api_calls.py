"""``ModelApiGateway``: a Model API call (``POST /v1/chat/completions``, ``POST /v1/completions``) from
its arrival to its last byte (docs/model-apis.md "Serving").

The body's ``model`` names the Model API; the call goes through the ``Gateway`` to a replica of the
deployment serving it (its environment's, following promotions, or its one deployment) at the same
path, streamed back as any answer. On the way: the caller's team's rate limits (``team_limits``; over
one, a 429 with ``retry_after``, counted in ``baseten_model_api_rate_limited_requests_total``), and the
``baseten_model_api_*`` series (``model_api_metrics``), with the tokens and token timings read from the
answer (``openai_meter``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request
from starlette.responses import Response

from servemetrics.gateway.errors import error_response
from servemetrics.gateway.gateway import Gateway
from servemetrics.gateway.model_api_metrics import Answer, ApiLabels, ModelApiMetrics
from servemetrics.gateway.openai_meter import StreamMeter, Usage
from servemetrics.gateway.proxy import Relay
from servemetrics.gateway.team_limits import Key, TeamLimiter
from servemetrics.registry import KeyInfo, ModelInfo
from servemetrics.registry.model_apis import DEFAULT_TEAM, ModelApiInfo, RateLimits

OPENAI_PATHS = ("v1/chat/completions", "v1/completions")
"""The replica paths the two routes go to (the same as the client's)."""


class CallError(ValueError):
    """A call body that is not an OpenAI request naming a Model API: a 400 with this message."""


@dataclass(frozen=True)
class Call:
    """What the gateway reads of a call's body: the Model API's name and whether it streams."""

    model: str
    stream: bool


def parse_call(body: bytes) -> Call:
    """The ``model`` and ``stream`` of an OpenAI request body; CallError (what to fix) for a body that is
    not a JSON object with a string ``model`` (and a boolean ``stream`` when given)."""
    try:
        obj = json.loads(body)
    except ValueError:
        raise CallError(
            'the body is not JSON; send an OpenAI request, e.g. {"model": "<Model API name>", '
            '"messages": [...]}'
        ) from None
    if not isinstance(obj, dict) or not isinstance(obj.get("model"), str) or not obj["model"]:
        raise CallError('the body needs "model": the name of a Model API (GET /v1/model_apis lists them)')
    stream = obj.get("stream", False)
    if not isinstance(stream, bool):
        raise CallError('"stream" must be true or false')
    return Call(obj["model"], stream)


def _limit_text(limits: RateLimits) -> str:
    parts = [f"{limits.requests_per_minute} requests"] if limits.requests_per_minute is not None else []
    parts += [f"{limits.tokens_per_minute} tokens"] if limits.tokens_per_minute is not None else []
    return " and ".join(parts) + " per minute"


class ModelApiGateway:
    """The Model API calls of one service process, on its ``gateway``; their series live in the
    gateway's registry. ``on_call(organization id, name)`` is told of every admitted call (the API's
    ``last_used_at``); ``clock_s`` drives the rate limits (monotonic seconds)."""

    def __init__(
        self,
        gateway: Gateway,
        on_call: Callable[[int, str], None] | None = None,
        clock_s: Callable[[], float] = time.monotonic,
    ) -> None:
        self.gateway = gateway
        self.metrics = ModelApiMetrics(gateway.metrics.registry)
        self.limiter = TeamLimiter(clock_s)
        self._on_call = on_call

    async def model_api(self, organization_id: int, name: str) -> ModelApiInfo | None:
        """The organization's Model API ``name`` (cached as the gateway's other registry reads)."""
        return await self.gateway.view.model_api(organization_id, name)

    async def serve(
        self,
        request: Request,
        key: KeyInfo,
        api: ModelApiInfo,
        body: bytes,
        stream: bool,
        path: str,
        arrived: float,
    ) -> Response | Relay:
        """Send the call to the deployment serving ``api`` (replica path ``path``), within the rate limits
        of ``key``'s team; ``arrived`` is ``time.perf_counter()`` at arrival. Every answer is metered:
        the relay of the replica's, or the gateway's own (404 no model, 503 nothing serves, 429 a rate
        limit or backpressure, 502 a failed replica)."""
        team = key.team_id or DEFAULT_TEAM
        gw = self.gateway
        model = await gw.view.model(api.model_id, key.organization_id)
        if model is None:
            labels = ApiLabels(api.name, team, api.model_id, "")
            self.metrics.arrived(labels)
            return self._answered(
                labels, error_response(404, f"model {api.model_id!r} is gone"), body, arrived, key.prefix
            )
        target = await self._target(model, api)
        labels = ApiLabels(api.name, team, api.model_id, "" if isinstance(target, Response) else target[0])
        self.metrics.arrived(labels)
        if isinstance(target, Response):
            return self._answered(labels, target, body, arrived, key.prefix)
        limits, limit_key = api.limits_of(key.team_id), (key.organization_id, api.name, team)
        wait = self.limiter.admit(limit_key, limits)
        if wait is not None:
            self.metrics.limited(labels)
            message = (
                f"team {team!r} is over its rate limit on Model API {api.name!r} ({_limit_text(limits)}); "
                f"retry after {wait} s"
            )
            return self._answered(labels, error_response(429, message, wait), body, arrived, key.prefix)
        if self._on_call is not None:
            self._on_call(key.organization_id, api.name)
        out = await gw.forward(request, model, target, path, arrived, body)
        if isinstance(out, Response):
            return self._answered(labels, out, body, arrived, key.prefix)
        meter = StreamMeter(stream)
        out.on_chunk = meter.feed
        out.after = lambda relay: self._finished(
            labels, limit_key, limits, meter, relay, len(body), key.prefix
        )
        return out

    async def _target(self, model: ModelInfo, api: ModelApiInfo) -> tuple[str, str] | Response:
        """The deployment serving ``api`` now (its deployment, or one serving its environment), or the
        gateway's error answer (404, 503)."""
        if api.deployment_id is not None:
            return await self.gateway.deployment_target(model, api.deployment_id)
        return await self.gateway.environment_target(model, api.environment or "production")

    def _answered(
        self, labels: ApiLabels, resp: Response, body: bytes, arrived: float, api_key: str
    ) -> Response:
        elapsed = time.perf_counter() - arrived
        answer = Answer(resp.status_code, elapsed, None, len(body), len(resp.body), Usage(), api_key=api_key)
        self.metrics.answered(labels, answer)
        return resp

    def _finished(
        self,
        labels: ApiLabels,
        key: Key,
        limits: RateLimits,
        meter: StreamMeter,
        relay: Relay,
        request_bytes: int,
        api_key: str,
    ) -> None:
        """The relay ended: meter the answer and charge its tokens to the team."""
        assert relay.end_to_end_s is not None
        usage = meter.result()
        self.limiter.charge(key, limits, usage.total)
        answer = Answer(
            relay.metered_status,
            relay.end_to_end_s,
            meter.first_token_s,
            request_bytes,
            relay.sent_bytes,
            usage,
            tuple(meter.tpot_s),
            api_key,
        )
        self.metrics.answered(labels, answer)
