"""Model APIs through the platform's SDK (`baseten` 0.13.1: `get_model_apis`,
`get_model_apis_model_api_name`) against a real `servemetrics serve` (tests/sdk/conftest.py): the answers
parse with the SDK's `ModelAPIsResponse` / `ModelAPI` and hold the config's values."""

from __future__ import annotations

import pytest
from baseten.client.managementapi import GetModelApisParams, ResponseError

from tests.sdk.conftest import Service

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
