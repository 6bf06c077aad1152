"""The queued (async) requests' table on SQLite and PostgreSQL, and the pure helpers of
``gateway/queued.py``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from servemetrics.api.errors import ApiError
from servemetrics.api.routes.queued import parse_body
from servemetrics.gateway.queued import QueuedOptions, backoff_s, iso, status_view, webhook_payload
from servemetrics.gateway.queued_store import QueuedStore
from servemetrics.registry import Registry
from servemetrics.registry.migrations import applied
from tests.conftest_pg import fresh_pg_url


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[QueuedStore, int]]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'registry.sqlite3'}"
    else:
        url = fresh_pg_url(request.getfixturevalue("pg_url"))
    registry = Registry.open(url)
    org = registry.tenancy.ensure_organization("acme")
    registry.tenancy.ensure_model("m1", "llama", "acme")
    yield QueuedStore(registry.engine), org
    registry.close()


def test_the_migration_is_named_and_applied(store):
    s, _ = store
    assert "0003_async_requests" in applied(s.engine)


def test_lifecycle_fifo_claim_finish_and_webhook_state(store):
    s, org = store
    a = s.create(org, "m1", "production", '{"x": 1}', "http://127.0.0.1:1/hook", 600, 1_000)
    b = s.create(org, "m1", "production", "null", None, 600, 1_001)
    assert [r.id for r in s.queued()] == [a, b]
    assert s.get(a, "m1", org).status == "QUEUED"  # type: ignore[union-attr]
    assert s.get(a, "m2", org) is None and s.get(a, "m1", org + 1) is None
    assert s.claim(a, "d1", 2_000) and not s.claim(a, "d1", 2_001)  # only one worker wins
    got = s.get(a)
    assert (got.status, got.deployment_id, got.started_at_ms, got.attempts) == ("IN_PROGRESS", "d1", 2_000, 1)
    assert not s.cancel(a)  # started: not cancellable
    assert s.finish(a, "SUCCEEDED", 3_000, response_status=200, result='{"y": 2}', errors=[])
    got = s.get(a)
    assert (got.status, got.finished_at_ms, got.webhook_status, got.webhook_next_at_ms) == (
        "SUCCEEDED",
        3_000,
        "PENDING",
        3_000,
    )
    assert [r.id for r in s.pending_webhooks()] == [a]
    s.webhook_attempted(a, "DELIVERED", 3, "the webhook answered HTTP 502: ", None)
    assert s.pending_webhooks() == []
    assert s.cancel(b) and s.get(b) is None and not s.cancel(b)


def test_recover_requeue_and_expiry(store):
    s, org = store
    a = s.create(org, "m1", "staging", "1", None, 600, 1_000)
    b = s.create(org, "m1", "staging", "2", "https://example.com/h", 2, 1_000)
    assert s.claim(a, "d2", 1_500)
    assert s.recover() == 1  # the service stopped while a ran
    got = s.get(a)
    assert (got.status, got.deployment_id, got.started_at_ms, got.attempts) == ("QUEUED", None, None, 1)
    assert s.claim(a, "d2", 1_600)
    s.requeue(a)  # no replica took it: not an attempt
    assert (s.get(a).status, s.get(a).attempts) == ("QUEUED", 1)  # type: ignore[union-attr]
    assert [r.id for r in s.expired(2_999)] == []
    assert [r.id for r in s.expired(3_000)] == [b]
    errors = [{"code": "REQUEST_EXPIRED", "message": "waited"}]
    assert s.finish(
        b, "EXPIRED", 3_000, response_status=None, result=None, errors=errors, from_status="QUEUED"
    )
    got = s.get(b)
    assert (got.status, got.errors, got.webhook_status) == ("EXPIRED", errors, "PENDING")


def test_views_and_backoff(store):
    s, org = store
    a = s.create(org, "m1", "production", '{"x": 1}', "http://h/x", 600, 1_767_225_600_000)
    s.claim(a, "d1", 1_767_225_601_500)
    s.finish(
        a,
        "FAILED",
        1_767_225_602_000,
        response_status=500,
        result="oops",
        errors=[{"code": "c", "message": "m"}],
    )
    req = s.get(a)
    assert status_view(req) == {  # type: ignore[arg-type]
        "request_id": a,
        "model_id": "m1",
        "environment": "production",
        "deployment_id": "d1",
        "status": "FAILED",
        "created_at": "2026-01-01T00:00:00.000Z",
        "started_at": "2026-01-01T00:00:01.500Z",
        "finished_at": "2026-01-01T00:00:02.000Z",
        "attempts": 1,
        "webhook": {"status": "PENDING", "attempts": 0, "last_error": None},
    }
    assert webhook_payload(req) == {  # type: ignore[arg-type]
        "request_id": a,
        "model_id": "m1",
        "deployment_id": "d1",
        "environment": "production",
        "type": "async_request_completed",
        "time": "2026-01-01T00:00:02.000Z",
        "data": "oops",
        "errors": [{"code": "c", "message": "m"}],
    }
    o = QueuedOptions()
    assert [backoff_s(o, n) for n in (1, 2, 3, 4)] == [1.0, 2.0, 4.0, 8.0]
    assert iso(None) is None


@pytest.mark.parametrize(
    ("body", "fix"),
    [
        (b"nope", "not JSON"),
        (b"[]", "JSON object"),
        (b"{}", '"model_input" is missing'),
        (b'{"model_input": 1, "priority": 2}', "unknown field(s) priority"),
        (b'{"model_input": 1, "webhook_endpoint": "ftp://x"}', "http:// or https://"),
        (b'{"model_input": 1, "webhook_endpoint": 3}', "http:// or https://"),
        (b'{"model_input": 1, "max_time_in_queue_seconds": 0}', "from 1 to 259200"),
        (b'{"model_input": 1, "max_time_in_queue_seconds": 1.5}', "whole number"),
        (b'{"model_input": 1, "max_time_in_queue_seconds": true}', "whole number"),
    ],
)
def test_bad_bodies_say_what_to_fix(body, fix):
    with pytest.raises(ApiError) as err:
        parse_body(body, QueuedOptions())
    assert err.value.status == 400 and fix in err.value.message


def test_good_bodies():
    o = QueuedOptions()
    assert parse_body(b'{"model_input": {"p": "hi"}}', o) == ('{"p": "hi"}', None, 600)
    assert parse_body(
        b'{"model_input": null, "webhook_endpoint": "https://h/x", "max_time_in_queue_seconds": 5}', o
    ) == (
        "null",
        "https://h/x",
        5,
    )
    with pytest.raises(ApiError):
        parse_body(b'{"model_input": "' + b"x" * (4 << 20) + b'"}', o)


def test_retention_purges_finished_requests_but_not_pending_webhooks_or_queued(store):
    s, org = store
    done = s.create(org, "m1", "production", "null", None, 600, 1_000)
    hook = s.create(org, "m1", "production", "null", "http://127.0.0.1:1/hook", 600, 1_001)
    queued = s.create(org, "m1", "production", "null", None, 600, 1_002)
    for rid in (done, hook):
        assert s.claim(rid, "d1", 2_000)
        assert s.finish(rid, "SUCCEEDED", 3_000, response_status=200, result="{}", errors=[])
    assert s.purge_finished(3_000) == 0  # finished at 3,000: not before it
    assert s.purge_finished(10_000) == 1  # the webhook of `hook` is still PENDING
    assert s.get(done) is None and s.get(hook) is not None and s.get(queued) is not None
    s.webhook_attempted(hook, "DELIVERED", 1, None, None)
    assert s.purge_finished(10_000) == 1 and s.get(hook) is None
    assert [r.id for r in s.queued()] == [queued]
