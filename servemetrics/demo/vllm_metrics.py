"""vLLM V1 (≥0.11) format metrics of a demo replica, from its ``Engine`` (exporters.md §1.1).

Names, label names (``model_name``, ``engine``: the engine core, "0" here) and bucket lists are vLLM's;
the values are what the replica really did (``demo.engine``), except the KV-cache usage and the prefix
cache, which are modelled there. When vLLM observes each value (as in its ``v1/metrics``): tokens as they
are produced, the prefix cache when a request is scheduled, TTFT at the first token, each later gap as
an inter-token latency, the request histograms and ``request_success_total{finished_reason}`` when the
request finishes. No speculative decoding and no preemption in the demo: ``num_preemptions_total`` stays 0.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from servemetrics.demo.engine import FINISH_REASONS, MAX_MODEL_LEN, Engine, Request

TTFT_BUCKETS: tuple[float, ...] = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75)
TTFT_BUCKETS += (1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
"""``vllm:time_to_first_token_seconds`` (exporters.md §1.1 "Histogram buckets")."""
ITL_BUCKETS: tuple[float, ...] = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0)
ITL_BUCKETS += (2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
"""Inter-token latency and per-request time per output token."""
REQUEST_LATENCY_BUCKETS: tuple[float, ...] = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0)
REQUEST_LATENCY_BUCKETS += (30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)
"""e2e, queue, inference, prefill and decode time."""


def buckets_1_2_5(max_value: int) -> tuple[float, ...]:
    """vLLM's ``build_1_2_5_buckets``: 1, 2, 5, 10, 20, 50, … while at most ``max_value``."""
    out: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return tuple(out)
            out.append(value)
        exponent += 1


TOKEN_BUCKETS = buckets_1_2_5(MAX_MODEL_LEN)
"""Prompt / generation length and ``max_tokens`` histograms (1-2-5 up to ``MAX_MODEL_LEN``)."""
_LATENCY = {
    "e2e_request_latency": "Histogram of e2e request latency in seconds.",
    "request_queue_time": "Histogram of time spent in WAITING phase for request.",
    "request_inference_time": "Histogram of time spent in RUNNING phase for request.",
    "request_prefill_time": "Histogram of time spent in PREFILL phase for request.",
    "request_decode_time": "Histogram of time spent in DECODE phase for request.",
}
_LENGTHS = {
    "request_prompt_tokens": "Number of prefill tokens processed.",
    "request_generation_tokens": "Number of generation tokens processed.",
    "request_params_max_tokens": "Histogram of the max_tokens request parameter.",
}


def _gauges(registry: CollectorRegistry, engine: Engine, labels: dict[str, str]) -> None:
    """Running, waiting and the modelled KV-cache usage (blocks used / capacity), read at each scrape."""
    capacity_blocks = engine.kv_capacity_tokens // engine.block_size
    for name, doc, read in (
        (
            "num_requests_running",
            "Number of requests in model execution batches.",
            lambda: len(engine.running),
        ),
        ("num_requests_waiting", "Number of requests waiting to be processed.", lambda: engine.waiting),
        (
            "kv_cache_usage_perc",
            "KV-cache usage. 1 means 100 percent usage.",
            lambda: min(1.0, engine.kv_blocks_used() / capacity_blocks),
        ),
    ):
        Gauge(f"vllm:{name}", doc, list(labels), registry=registry).labels(**labels).set_function(read)


class VllmMetrics:
    """The ``vllm:*`` series of one replica in ``registry``; ``engine.recorder`` is set to it."""

    def __init__(self, registry: CollectorRegistry, engine: Engine, model_name: str) -> None:
        labels = {"model_name": model_name, "engine": "0"}
        names = list(labels)
        self.engine = engine
        _gauges(registry, engine, labels)

        def counter(name: str, doc: str) -> Counter:
            return Counter(f"vllm:{name}", doc, names, registry=registry).labels(**labels)

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(f"vllm:{name}", doc, names, buckets=buckets, registry=registry).labels(**labels)

        self.queries = counter(
            "prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."
        )
        self.hits = counter("prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.")
        counter("num_preemptions", "Cumulative number of preemption from the engine.")
        self.prompt_tokens = counter("prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("generation_tokens", "Number of generation tokens processed.")
        reasons = [*names, "finished_reason"]
        success = Counter(
            "vllm:request_success", "Count of successfully processed requests.", reasons, registry=registry
        )
        self.success = {r: success.labels(**labels, finished_reason=r) for r in FINISH_REASONS}
        self.ttft = histogram(
            "time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS
        )
        self.itl = histogram(
            "inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS
        )
        self.tpot = histogram(
            "request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            ITL_BUCKETS,
        )
        self.latency = {
            k: histogram(f"{k}_seconds", doc, REQUEST_LATENCY_BUCKETS) for k, doc in _LATENCY.items()
        }
        self.lengths = {k: histogram(k, doc, TOKEN_BUCKETS) for k, doc in _LENGTHS.items()}
        engine.recorder = self

    def scheduled(self, req: Request, now: float) -> None:
        self.queries.inc(req.prompt_tokens)
        self.hits.inc(req.cached)

    def token(self, req: Request, now: float, gap: float | None) -> None:
        if gap is None:
            self.prompt_tokens.inc(req.prompt_tokens)  # the prefill step
            self.ttft.observe(now - req.arrival)
        else:
            self.itl.observe(gap)
        self.generation_tokens.inc()

    def finished(self, req: Request, now: float, reason: str) -> None:
        self.success[reason].inc()
        scheduled = req.scheduled if req.scheduled is not None else now
        first = req.first_token if req.first_token is not None else now
        last = req.last_token if req.last_token is not None else now
        self.latency["e2e_request_latency"].observe(now - req.arrival)
        self.latency["request_queue_time"].observe(scheduled - req.arrival)
        self.latency["request_inference_time"].observe(last - scheduled)
        self.latency["request_prefill_time"].observe(first - scheduled)
        self.latency["request_decode_time"].observe(last - first)
        self.lengths["request_prompt_tokens"].observe(req.prompt_tokens)
        self.lengths["request_generation_tokens"].observe(req.generated)
        self.lengths["request_params_max_tokens"].observe(req.max_tokens)
        if req.generated > 1:
            self.tpot.observe((last - first) / (req.generated - 1))
