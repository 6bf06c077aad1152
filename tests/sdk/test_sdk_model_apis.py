"""Model APIs through the platform's SDK (`baseten` 0.13.1: `get_model_apis`,
`get_model_apis_model_api_name`) against a real `servemetrics serve` (tests/sdk/conftest.py): the answers
parse with the SDK's `ModelAPIsResponse` / `ModelAPI` and hold the config's values."""

from __future__ import annotations

import datetime as dt

import httpx
import pytest
from baseten.client.managementapi import (
    GetModelApisParams,
    GetModelApisUsageParams,
    ModelApisUsageResult,
    ResponseError,
)

from tests.apptools import auth
from tests.processes import wait_until
from tests.sdk.conftest import TEAM_A, Service

pytestmark = pytest.mark.sdk


def test_list_and_get_parse_with_the_sdks_models(service: Service) -> None:
    page = service.api.get_model_apis()
    assert [a.name for a in page.items] == ["chat"]
    assert (page.pagination.has_more, page.pagination.cursor) == (False, None)
    chat = service.api.get_model_apis_model_api_name(model_api_name="chat")
    assert (chat.display_name, chat.context_length, chat.invoke_url) == ("Chat", 8192, service.base)
    assert [(r.type, r.unit, r.threshold) for r in chat.rate_limits] == [
        ("REQUEST", "MINUTE", 60),
        ("TOKEN", "MINUTE", 10000),
    ]
    assert chat.org_details is not None and chat.release_date == chat.org_details.added_at.date()
    assert chat.cost_per_million_input_tokens is None


def test_a_team_key_sees_its_teams_limits(service: Service) -> None:
    chat = service.team_a.get_model_apis_model_api_name(model_api_name="chat")
    assert [(r.type, r.threshold) for r in chat.rate_limits] == [("REQUEST", 5)]
    page = service.team_a.get_model_apis(params=GetModelApisParams(limit=1, added_only=True))
    assert [a.name for a in page.items] == ["chat"]


def test_another_organizations_model_api_is_a_404(service: Service) -> None:
    with pytest.raises(ResponseError) as err:
        service.api.get_model_apis_model_api_name(model_api_name="theirs")
    assert err.value.status_code == 404
    assert [a.name for a in service.other.get_model_apis().items] == ["theirs"]


def test_usage_parses_and_counts_a_call(service: Service) -> None:
    """team-a's call of `chat` (m1's replica is a metrics exporter: it answers the POST 501) shows in the
    usage buckets once the gateway's series were scraped, as the SDK's `ModelApisUsageResponse`."""
    resp = httpx.post(
        f"{service.base}/v1/chat/completions",
        json={"model": "chat", "messages": [{"role": "user", "content": "hi"}]},
        headers=auth(TEAM_A),
        timeout=30,
    )
    assert resp.status_code == 501, resp.text
    start = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    params = GetModelApisUsageParams(
        start_time=start, bucket_width="1m", group_by=["team", "model"], limit=10
    )

    def counted() -> list[ModelApisUsageResult]:
        page = service.api.get_model_apis_usage(params=params)
        return [r for b in page.items for r in b.results or () if r.team_id == "team-a"]

    wait_until(lambda: sum(r.request_count for r in counted()) == 1, "the call in the usage", 30)
    [row] = counted()
    assert (row.model, row.input_tokens, row.output_tokens, row.api_key_prefix) == ("chat", 0, 0, None)
    page = service.api.get_model_apis_usage(params=params)
    assert page.items[0].start_time == start.replace(second=0, microsecond=0)  # snapped to its minute
    starts = [b.start_time for b in page.items]
    assert all(b - a == dt.timedelta(minutes=1) for a, b in zip(starts, starts[1:], strict=False))
    assert page.pagination.has_more is False
