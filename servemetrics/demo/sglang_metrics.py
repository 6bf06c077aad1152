"""SGLang format metrics of a demo replica, from its ``Engine`` (exporters.md §2.1).

Names, label names and bucket lists are SGLang's (``srt/metrics/collector.py``, 2026): the tokenizer's
metrics carry ``model_name`` only, the scheduler's ``model_name``, ``engine_type`` ("unified"),
``tp_rank`` and ``pp_rank`` ("0": one rank; ``dp_rank`` appears only with DP attention). The values are
what the replica really did (``demo.engine``), except the KV pool and the radix cache, which are
modelled there. When SGLang observes each value: the scheduler's queue time and cache hit rate when a
request's prefill is scheduled (the hit rate of that prefill batch: cached / prompt tokens), TTFT at
the first token, each later gap as an inter-token latency, and the token counters, request counters
and e2e latency when the request finishes (an aborted one counts in ``num_aborted_requests_total``
too). ``gen_throughput`` is the tokens produced over the last ``THROUGHPUT_WINDOW_S`` seconds (SGLang:
over its decode log interval).
"""

from __future__ import annotations

import threading
from collections import deque

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from servemetrics.demo.engine import Engine, Request

TTFT_BUCKETS: tuple[float, ...] = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0)
TTFT_BUCKETS += (60.0, 80.0, 100.0, 200.0, 400.0)
"""``sglang:time_to_first_token_seconds`` (the ``TokenizerMetricsCollector`` default)."""
ITL_BUCKETS: tuple[float, ...] = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035)
ITL_BUCKETS += (0.040, 0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.0, 2.0, 4.0, 6.0, 8.0)
"""``sglang:inter_token_latency_seconds``."""
E2E_BUCKETS: tuple[float, ...] = (0.1, 0.2, 0.4, 0.6, 0.8, 1.0, 2.0, 4.0, 6.0, 8.0, 10.0, 20.0, 40.0)
E2E_BUCKETS += (60.0, 80.0, 100.0, 200.0, 400.0, 600.0, 1200.0, 1800.0, 2400.0)
"""``sglang:e2e_request_latency_seconds``."""
QUEUE_BUCKETS: tuple[float, ...] = (0.0, 0.1, 0.2, 0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 10.0, 15.0, 20.0, 30.0)
QUEUE_BUCKETS += (40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0, 200.0, 300.0, 400.0, 500.0, 600.0, 700.0)
QUEUE_BUCKETS += (800.0, 900.0, 1000.0, 1200.0, 1400.0, 1600.0, 1800.0, 2000.0, 2500.0, 3000.0)
"""``sglang:queue_time_seconds`` (the ``SchedulerMetricsCollector``'s list)."""
THROUGHPUT_WINDOW_S = 5.0


class SglangMetrics:
    """The ``sglang:*`` series of one replica in ``registry``; ``engine.recorder`` is set to it."""

    def __init__(self, registry: CollectorRegistry, engine: Engine, model_name: str) -> None:
        tok = {"model_name": model_name}
        sched = {"model_name": model_name, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0"}
        self.engine = engine
        self._recent: deque[float] = deque()
        self._lock = threading.Lock()

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(f"sglang:{name}", doc, list(sched), registry=registry).labels(**sched)

        def counter(name: str, doc: str) -> Counter:
            return Counter(f"sglang:{name}", doc, list(tok), registry=registry).labels(**tok)

        def histogram(name: str, doc: str, buckets: tuple[float, ...], labels: dict[str, str]) -> Histogram:
            family = Histogram(f"sglang:{name}", doc, list(labels), buckets=buckets, registry=registry)
            return family.labels(**labels)

        capacity = engine.kv_capacity_tokens
        gauge("num_running_reqs", "The number of running requests.").set_function(lambda: len(engine.running))
        gauge("num_queue_reqs", "The number of requests in the waiting queue.").set_function(
            lambda: engine.waiting
        )
        gauge("num_used_tokens", "The number of used tokens.").set_function(engine.kv_tokens_used)
        gauge("token_usage", "The token usage.").set_function(
            lambda: min(1.0, engine.kv_tokens_used() / capacity)
        )
        gauge("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.").set(capacity)
        gauge("gen_throughput", "The generation throughput (token/s).").set_function(self.throughput)
        self.cache_hit_rate = gauge("cache_hit_rate", "The prefix cache hit rate.")
        self.queue_time = histogram(
            "queue_time_seconds", "Histogram of queueing time in seconds.", QUEUE_BUCKETS, sched
        )
        self.prompt_tokens = counter("prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("generation_tokens", "Number of generation tokens processed.")
        self.cached_tokens = counter("cached_tokens", "Number of cached prompt tokens.")
        self.requests = counter("num_requests", "Number of requests processed.")
        self.aborted = counter("num_aborted_requests", "Number of requests aborted.")
        self.ttft = histogram(
            "time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS, tok
        )
        self.itl = histogram(
            "inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS, tok
        )
        self.e2e = histogram(
            "e2e_request_latency_seconds",
            "Histogram of End-to-end request latency in seconds",
            E2E_BUCKETS,
            tok,
        )
        engine.recorder = self

    def throughput(self) -> float:
        """Tokens per second over the last ``THROUGHPUT_WINDOW_S`` seconds of the engine's clock."""
        now = self.engine.clock()
        with self._lock:
            while self._recent and self._recent[0] <= now - THROUGHPUT_WINDOW_S:
                self._recent.popleft()
            return len(self._recent) / THROUGHPUT_WINDOW_S

    def scheduled(self, req: Request, now: float) -> None:
        scheduled = req.scheduled if req.scheduled is not None else now
        self.queue_time.observe(scheduled - req.arrival)
        self.cache_hit_rate.set(req.cached / req.prompt_tokens if req.prompt_tokens else 0.0)

    def token(self, req: Request, now: float, gap: float | None) -> None:
        if gap is None:
            self.ttft.observe(now - req.arrival)
        else:
            self.itl.observe(gap)
        with self._lock:
            self._recent.append(now)

    def finished(self, req: Request, now: float, reason: str) -> None:
        self.prompt_tokens.inc(req.prompt_tokens)
        self.generation_tokens.inc(req.generated)
        self.cached_tokens.inc(req.cached)
        self.requests.inc()
        if reason == "abort":
            self.aborted.inc()
        self.e2e.observe(now - req.arrival)
