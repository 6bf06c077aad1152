"""API keys: generation, hashing, verification, key types and what each type may do.

A key is stored only as ``hash_key(pepper, raw)``: the hex HMAC-SHA256 of the key's SHA-256 digest under
a random per-registry secret (the pepper, made by migration ``0002``). The HMAC is deterministic, so a
presented key is found by one indexed lookup, and a stolen table cannot be checked against guesses
without the pepper. The plain key is never stored; only a short public ``prefix`` (the part before the
first ``.`` of a generated key ``<prefix>.<secret>``, else the first 8 hex digits of the hash).

Key types are the spec's ``APIKeyCategory`` (platform-facts §4); ``model_ids`` scoping applies only to
``WORKSPACE_EXPORT_METRICS`` and ``WORKSPACE_INVOKE``.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass

KEY_TYPES = (
    "PERSONAL",
    "WORKSPACE_MANAGE_ALL",
    "WORKSPACE_EXPORT_METRICS",
    "WORKSPACE_INVOKE",
    "WORKSPACE_MANAGE_API_KEYS",
)
SCOPED_KEY_TYPES = frozenset({"WORKSPACE_EXPORT_METRICS", "WORKSPACE_INVOKE"})
_FULL_ACCESS = frozenset({"PERSONAL", "WORKSPACE_MANAGE_ALL"})
METRICS_READ_KEY_TYPES = frozenset({*_FULL_ACCESS, "WORKSPACE_EXPORT_METRICS"})
"""Key types that may read metrics (an export key: of the models in its scope)."""


@dataclass(frozen=True)
class KeyInfo:
    """An authenticated key: its organization, public prefix, type, model scope (None = all) and team
    (None: the key belongs to no team; docs/model-apis.md)."""

    id: int
    organization_id: int
    organization_name: str
    prefix: str
    type: str
    model_ids: frozenset[str] | None
    name: str | None = None
    team_id: str | None = None


def digest(raw_key: str) -> str:
    """Hex SHA-256 of a plain key (what a config file's key becomes on load)."""
    return hashlib.sha256(raw_key.encode()).hexdigest()


def hash_digest(pepper: str, key_digest: str) -> str:
    """Hex HMAC-SHA256 of a key digest under the registry's pepper: the stored ``key_hash``."""
    return hmac.new(pepper.encode(), key_digest.encode(), hashlib.sha256).hexdigest()


def hash_key(pepper: str, raw_key: str) -> str:
    """The stored ``key_hash`` of a plain key."""
    return hash_digest(pepper, digest(raw_key))


def verify(pepper: str, raw_key: str, key_hash: str) -> bool:
    """True when ``raw_key`` hashes to ``key_hash`` (constant-time comparison)."""
    return hmac.compare_digest(hash_key(pepper, raw_key), key_hash)


def generate() -> tuple[str, str]:
    """A new random key ``<prefix>.<secret>`` and its prefix (8 + 43 URL-safe characters)."""
    prefix = secrets.token_hex(4)
    return f"{prefix}.{secrets.token_urlsafe(32)}", prefix


def prefix_of(raw_key: str, key_hash: str) -> str:
    """The public prefix of a key: ``<prefix>`` of a generated key, else 8 hex digits of its hash."""
    head, dot, tail = raw_key.partition(".")
    if dot and 4 <= len(head) <= 12 and len(tail) >= 16:
        return head
    return key_hash[:8]


def check_type(key_type: str, model_ids: list[str] | None) -> None:
    """Raise ValueError if ``key_type`` is unknown or ``model_ids`` is given for an unscoped type."""
    if key_type not in KEY_TYPES:
        raise ValueError(f"unknown API key type {key_type!r}; use one of {', '.join(KEY_TYPES)}")
    if model_ids is not None and key_type not in SCOPED_KEY_TYPES:
        raise ValueError(
            f"model_ids only applies to WORKSPACE_EXPORT_METRICS and WORKSPACE_INVOKE keys, not {key_type}"
        )


def _in_scope(key: KeyInfo, model_id: str) -> bool:
    return key.model_ids is None or model_id in key.model_ids


def can_read_metrics(key: KeyInfo, model_id: str) -> bool:
    """May ``key`` read metrics, deployments, environments and events of ``model_id``?"""
    if key.type in _FULL_ACCESS:
        return True
    return key.type == "WORKSPACE_EXPORT_METRICS" and _in_scope(key, model_id)


def can_read_some_metrics(key: KeyInfo) -> bool:
    """May ``key``'s type read metrics at all (of its organization's models in its scope)?"""
    return key.type in METRICS_READ_KEY_TYPES


def can_manage(key: KeyInfo) -> bool:
    """May ``key`` change models, deployments and environments (activate, promote, autoscaling)?"""
    return key.type in _FULL_ACCESS


def team_bound(key: KeyInfo) -> str | None:
    """The team whose Model API series alone ``key`` reads (docs/model-apis.md "Who sees what"): its
    ``team_id``, unless it may manage (``WORKSPACE_MANAGE_ALL``, ``PERSONAL``: the organization) or has
    no team (None: every team)."""
    return None if can_manage(key) else key.team_id


def can_invoke(key: KeyInfo, model_id: str) -> bool:
    """May ``key`` call ``model_id`` for inference?"""
    if key.type in _FULL_ACCESS:
        return True
    return key.type == "WORKSPACE_INVOKE" and _in_scope(key, model_id)


def can_manage_keys(key: KeyInfo) -> bool:
    """May ``key`` create, list and delete API keys?"""
    return key.type in _FULL_ACCESS or key.type == "WORKSPACE_MANAGE_API_KEYS"
