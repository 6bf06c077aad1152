"""Engine detection: which engines (vLLM, SGLang, Triton, BIS-LLM-style) each deployment of a model
exposes, from the series the store holds, cached per model (issue 13 part 4).

platform-facts.md §1 "vLLM / SGLang engine metrics": detection looks for metrics that match the
engine's format, runs periodically and "uses cached results", so graphs can take a few minutes to
appear. Here: a deployment runs an engine when the store holds a series of one of the engine's marker
names (``catalog.detection.MARKERS``) with its ``deployment_id`` and the model's ``model_id``, whether
scraped or pushed by remote_write (both store the same series). The answer is kept per model for
``DETECTION_TTL_MS`` and asked again on the first request after that: one ``Store.label_values`` per
marker name per refresh, none per request in between.

Held series, not a time window: the store holds a series until retention drops it (``Store.label_values``
has no time range), so a deployment that exposed vLLM inside the retention keeps its engine graphs over
any dashboard range that reaches its data; the metrics answers still omit the names without a series in
the scope.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from servemetrics.catalog.detection import ENGINES, MARKERS
from servemetrics.store.base import Store

DETECTION_TTL_MS = 2 * 60 * 1000
"""How long one model's detection is reused before the store is asked again (2 minutes)."""


@dataclass(frozen=True)
class Detection:
    """What detection found for one model.

    Attributes:
        deployments: deployment id -> the engines its series show (``catalog.detection.ENGINES``
            order); deployments with no engine are absent.
        checked_at_ms: epoch ms of the store lookup this answer comes from.
    """

    deployments: dict[str, tuple[str, ...]]
    checked_at_ms: int

    def engines(self, deployment_ids: set[str] | frozenset[str]) -> tuple[str, ...]:
        """The engines of any of ``deployment_ids``, in ``ENGINES`` order."""
        found = {e for d in deployment_ids for e in self.deployments.get(d, ())}
        return tuple(e for e in ENGINES if e in found)


def detect(store: Store, model_id: str, now_ms: int) -> Detection:
    """Detection of model ``model_id`` from ``store`` now (no cache): per engine, the deployments that
    hold a series of one of its marker names (``Store.label_values(name, "deployment_id",
    (("model_id", model_id),))``)."""
    found: dict[str, set[str]] = {}
    for engine in ENGINES:
        for name in MARKERS[engine]:
            for deployment_id in store.label_values(name, "deployment_id", (("model_id", model_id),)):
                found.setdefault(deployment_id, set()).add(engine)
    deployments = {d: tuple(e for e in ENGINES if e in engines) for d, engines in sorted(found.items())}
    return Detection(deployments, now_ms)


class EngineCache:
    """``detect`` answers per model, reused for ``ttl_ms`` (default ``DETECTION_TTL_MS``).

    Thread-safe (routes run in worker threads); two requests that find the same model stale may both
    ask the store, which is harmless. ``ttl_ms`` <= 0 disables the cache (every call asks the store).
    """

    def __init__(self, ttl_ms: int = DETECTION_TTL_MS) -> None:
        self.ttl_ms = ttl_ms
        self._lock = threading.Lock()
        self._by_model: dict[str, Detection] = {}

    def get(self, store: Store, model_id: str, now_ms: int) -> Detection:
        """The model's detection: the cached one while younger than ``ttl_ms`` at ``now_ms`` (epoch
        ms), else a fresh ``detect`` (then cached)."""
        with self._lock:
            cached = self._by_model.get(model_id)
        if cached is not None and 0 <= now_ms - cached.checked_at_ms < self.ttl_ms:
            return cached
        fresh = detect(store, model_id, now_ms)
        with self._lock:
            self._by_model[model_id] = fresh
        return fresh
