"""API key hashing and capabilities (pure functions)."""

from __future__ import annotations

import pytest

from servemetrics.registry import keys as k

PEPPER = "p" * 64


def _key(key_type: str, model_ids: frozenset[str] | None = None) -> k.KeyInfo:
    return k.KeyInfo(1, 1, "acme", "abcd", key_type, model_ids)


def test_hash_is_hmac_of_sha256_never_the_key() -> None:
    raw = "supersecret-key-1"
    stored = k.hash_key(PEPPER, raw)
    assert stored != raw and raw not in stored and len(stored) == 64
    assert stored == k.hash_digest(PEPPER, k.digest(raw))
    assert k.hash_key("another-pepper", raw) != stored
    assert k.verify(PEPPER, raw, stored)
    assert not k.verify(PEPPER, raw + "x", stored)


def test_generated_key_has_public_prefix() -> None:
    raw, prefix = k.generate()
    assert raw.startswith(prefix + ".") and len(prefix) == 8
    assert k.prefix_of(raw, k.hash_key(PEPPER, raw)) == prefix


def test_short_key_prefix_comes_from_the_hash_not_the_key() -> None:
    stored = k.hash_key(PEPPER, "abc")
    assert k.prefix_of("abc", stored) == stored[:8]


@pytest.mark.parametrize(
    ("key_type", "scope", "read_m1", "read_m2", "manage", "invoke_m1", "invoke_m2"),
    [
        ("PERSONAL", None, True, True, True, True, True),
        ("WORKSPACE_MANAGE_ALL", None, True, True, True, True, True),
        ("WORKSPACE_EXPORT_METRICS", None, True, True, False, False, False),
        ("WORKSPACE_EXPORT_METRICS", frozenset({"m1"}), True, False, False, False, False),
        ("WORKSPACE_INVOKE", frozenset({"m1"}), False, False, False, True, False),
        ("WORKSPACE_MANAGE_API_KEYS", None, False, False, False, False, False),
    ],
)
def test_capabilities(
    key_type: str,
    scope: frozenset[str] | None,
    read_m1: bool,
    read_m2: bool,
    manage: bool,
    invoke_m1: bool,
    invoke_m2: bool,
) -> None:
    key = _key(key_type, scope)
    assert k.can_read_metrics(key, "m1") is read_m1
    assert k.can_read_metrics(key, "m2") is read_m2
    assert k.can_manage(key) is manage
    assert k.can_invoke(key, "m1") is invoke_m1
    assert k.can_invoke(key, "m2") is invoke_m2


def test_check_type_rejects_unknown_types_and_scopes_on_unscoped_types() -> None:
    with pytest.raises(ValueError, match="unknown API key type 'ADMIN'"):
        k.check_type("ADMIN", None)
    with pytest.raises(ValueError, match="model_ids only applies"):
        k.check_type("WORKSPACE_MANAGE_ALL", ["m1"])
    k.check_type("WORKSPACE_INVOKE", ["m1"])
