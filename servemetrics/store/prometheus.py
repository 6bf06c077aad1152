"""``PrometheusStore``: a ``Store`` on a Prometheus-compatible engine (Prometheus, VictoriaMetrics).

Writes go through ``RemoteWriteClient`` (remote_write 1.0, batched, retried, buffered on disk); reads
compile each ``Selection`` to PromQL (``promql.py``) and evaluate it with ``/api/v1/query_range`` and
``/api/v1/query`` over httpx. The engine keeps the samples and applies its own retention.

Differences from the embedded store (docs/store.md, "Prometheus-compatible engines"):

- ``append`` returns the samples *queued*; the engine decides duplicates (Prometheus keeps the first
  sample of a (series, ts); VictoriaMetrics, run with ``-dedup.minScrapeInterval=1ms``, keeps one).
- Groups whose series have no sample in any value set are listed only when no group has data (from
  ``/api/v1/series`` over the window); the engines cannot list series independent of time.
- ``delete_before`` does nothing (the engine's retention flag applies); ``stats`` reports the queue.
- Engine down, timing out or answering nonsense on a read: ``StoreUnavailableError`` (the API's 503).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx

from servemetrics.samples import SampleBatch
from servemetrics.store.base import GroupKey, Selection, SelectResult, StoreStats, ValueSet, check_value_sets
from servemetrics.store.errors import StoreUnavailableError
from servemetrics.store.promql import (
    EngineAnswerError,
    Flavor,
    Segment,
    compile_segment,
    quote,
    read_answer,
    segments,
    selector,
    to_result,
)
from servemetrics.store.remote_write_client import RemoteWriteClient, WriterOptions
from servemetrics.types import Matchers

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EngineOptions:
    """How to reach the engine.

    Attributes:
        flavor: ``prometheus`` or ``victoriametrics`` (which INCREASE function the reads use).
        query_url: base URL of the Prometheus HTTP API (``http://host:9090``; ``/api/v1/...`` is added).
        remote_write_url: the remote_write endpoint (``http://host:9090/api/v1/write``).
        buffer_dir: the on-disk remote_write buffer.
        headers: extra headers on every request (``Authorization: Bearer ...``, a tenant header).
        basic_auth: ``(username, password)`` or None.
        query_timeout_s: seconds before a read counts as failed (503).
        writer: tunables of the remote_write client other than URL, buffer, headers and auth.
    """

    flavor: Flavor
    query_url: str
    remote_write_url: str
    buffer_dir: Path
    headers: dict[str, str] = field(default_factory=dict)
    basic_auth: tuple[str, str] | None = None
    query_timeout_s: float = 30.0
    writer: WriterOptions | None = None


class PrometheusStore:
    """A ``Store`` backed by a Prometheus-compatible engine (module docstring).

    Raises:
        BufferLockedError: another process holds ``options.buffer_dir``.
    """

    def __init__(self, options: EngineOptions) -> None:
        self.options = options
        base = options.writer or WriterOptions(url=options.remote_write_url, buffer_dir=options.buffer_dir)
        self.writer = RemoteWriteClient(
            replace(
                base,
                url=options.remote_write_url,
                buffer_dir=options.buffer_dir,
                headers=options.headers,
                basic_auth=options.basic_auth,
            )
        )
        self._http = httpx.Client(
            base_url=options.query_url.rstrip("/"),
            headers=options.headers,
            auth=options.basic_auth,
            timeout=options.query_timeout_s,
        )

    # -- writes ----------------------------------------------------------------------------------

    def append(self, batch: SampleBatch) -> int:
        """Queue ``batch`` for the engine; return the samples queued (never blocks on the network)."""
        return self.writer.append(batch)

    def delete_before(self, ts_ms: int) -> int:
        """Nothing: the engine applies its own retention (``--storage.tsdb.retention.time``,
        ``-retentionPeriod``). Returns 0."""
        return 0

    def stats(self) -> StoreStats:
        """Nothing counted here (the engine holds the samples); ``extra`` has the remote_write counters."""
        return StoreStats(extra=self.writer.stats())

    def remote_write_stats(self) -> dict[str, float]:
        """The remote_write counters (``RemoteWriteClient.stats``), for the service's ``/metrics``."""
        return self.writer.stats()

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until every queued sample is sent; False on timeout (they stay queued)."""
        return self.writer.flush(timeout_s)

    def close(self) -> None:
        """Send what is queued (up to 10 s; the rest stays in ``buffer_dir`` for the next start)."""
        self.writer.close()
        self._http.close()

    # -- reads -----------------------------------------------------------------------------------

    def select(self, selection: Selection) -> SelectResult:
        """Evaluate ``selection`` on the engine (``promql.py``).

        Raises:
            ValueError: a value set with ``start_ms >= end_ms``.
            StoreUnavailableError: the engine is unreachable, slow or answers something invalid.
        """
        check_value_sets(selection.value_sets)
        sel = _narrowed(selection)
        raw: dict[GroupKey, list[list[float | None]]] = {}
        for seg in segments(sel.value_sets):
            body = self._query(compile_segment(sel, seg, self.options.flavor), seg)
            try:
                read_answer(body, sel, seg, raw)
            except EngineAnswerError as exc:
                raise self._unavailable(f"answered a query with something unexpected: {exc}") from exc
        if not raw:
            for key in self._groups(sel):
                raw[key] = [[None, None] for _ in sel.value_sets]
        return to_result(raw)

    def label_values(self, name: str, label: str, matchers: Matchers = ()) -> list[str]:
        """Sorted distinct values of ``label`` over the engine's series ``name`` matching ``matchers``
        (``/api/v1/label/<label>/values`` from the epoch to now; series the engine's retention dropped are
        left out).

        Raises:
            StoreUnavailableError: the engine is unreachable or answers something invalid.
        """
        parts = [f"__name__={quote(name)}", *(f"{k}={quote(v)}" for k, v in matchers)]
        params = {"match[]": "{" + ",".join(parts) + "}", "start": "0"}
        body = self._get(f"/api/v1/label/{label}/values", params)
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or body.get("status") != "success":
            raise self._unavailable(f"answered a label values query with {str(body)[:200]}")
        return sorted({str(v) for v in data if v != ""})

    def _query(self, expr: str, seg: Segment) -> Any:
        if seg.count == 1:
            path, params = "/api/v1/query", {"query": expr, "time": _seconds(seg.first_eval_ms)}
        else:
            path = "/api/v1/query_range"
            params = {
                "query": expr,
                "start": _seconds(seg.first_eval_ms),
                "end": _seconds(seg.last_eval_ms),
                "step": f"{seg.width_ms}ms",
            }
        if self.options.flavor is Flavor.VICTORIAMETRICS:
            params["nocache"] = "1"  # no alignment of start/end to the step, no cached partial answers
        return self._get(path, params)

    def _get(self, path: str, params: dict[str, str]) -> Any:
        try:
            resp = self._http.get(path, params=params)
        except httpx.HTTPError as exc:
            raise self._unavailable(f"did not answer ({type(exc).__name__}: {exc})") from exc
        if resp.status_code != 200:
            raise self._unavailable(f"answered HTTP {resp.status_code}: {resp.text[:300]}")
        try:
            return resp.json()
        except ValueError as exc:
            raise self._unavailable(f"answered with something that is not JSON: {resp.text[:200]}") from exc

    def _unavailable(self, what: str) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"the metrics engine at {self.options.query_url} {what}; check that it is running and "
            "reachable from this service, then retry"
        )

    def _groups(self, sel: Selection) -> set[GroupKey]:
        """Group keys of the series that exist for the value sets' deployments around the window."""
        deployments = frozenset().union(*(vs.deployment_ids for vs in sel.value_sets))
        if not deployments:
            return set()
        start = min(vs.start_ms for vs in sel.value_sets) - sel.lookback_ms
        end = max(vs.end_ms for vs in sel.value_sets)
        params = {
            "match[]": selector(sel.name, sel.matchers, deployments),
            "start": _seconds(max(start, 0)),
            "end": _seconds(end),
        }
        body = self._get("/api/v1/series", params)
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list) or body.get("status") != "success":
            raise self._unavailable(f"answered a series query with {str(body)[:200]}")
        return {tuple(str(s.get(g, "")) for g in sel.group_by) for s in data if isinstance(s, dict)}


def _narrowed(sel: Selection) -> Selection:
    """A ``deployment_id`` matcher applied to every value set's deployments."""
    wanted = [v for k, v in sel.matchers if k == "deployment_id"]
    if not wanted:
        return sel
    keep = frozenset(wanted) if len(set(wanted)) == 1 else frozenset()
    value_sets = tuple(ValueSet(vs.start_ms, vs.end_ms, vs.deployment_ids & keep) for vs in sel.value_sets)
    return replace(sel, value_sets=value_sets)


def _seconds(ms: int) -> str:
    """Epoch ms as the API's decimal seconds, exact to the millisecond (``1767225600.999``)."""
    return f"{ms // 1000}.{ms % 1000:03d}"
