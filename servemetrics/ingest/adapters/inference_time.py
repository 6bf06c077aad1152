"""Engine histograms of inference time adapted to ``baseten_inference_time_seconds`` (the spec page's
"Inference time" graph: model execution, metrics-dashboard.md "Response time"; issue 16 part 2), only
those exporters.md documents as a histogram of that time, in seconds (no unit conversion needed):

- vLLM ``vllm:request_inference_time_seconds`` (§1: time in RUNNING, scheduled -> last token: prefill and
  decode, queueing excluded), ``source="vllm"``;
- TGI ``tgi_request_inference_duration`` (§6, histogram in seconds), ``source="tgi"``.

Each keeps every label and bucket bound of the engine's (``engine`` ranks add up: each serves its own
requests). The vLLM series is still stored under its own name too (``engines``).

Not adapted, and why (``NOT_ADAPTED``; docs/ingest.md repeats it).
"""

from __future__ import annotations

from servemetrics.ingest.adapters.rules import Rule

TARGET = "baseten_inference_time_seconds"
SOURCES: dict[str, str] = {
    "vllm:request_inference_time_seconds": "vllm",
    "tgi_request_inference_duration": "tgi",
}
"""Engine histogram family (seconds) -> the ``source`` label of its adapted series."""

NOT_ADAPTED: dict[str, str] = {
    "Triton nv_inference_compute_{input,infer,output}_duration_us": "cumulative microsecond counters, "
    "not histograms (exporters.md §6): a sum without buckets gives no percentile",
    "KServe predict / preprocess / postprocess histograms": "not documented in exporters.md (no name, "
    "unit or bucket read from a real exporter)",
    "SGLang sglang:per_stage_req_latency_seconds": "one histogram per stage (prefill_forward, ...): a "
    "request's stages cannot be added up from separate histograms (exporters.md §2)",
}
"""Engines the Inference time graph does not read, and why."""


def _rules() -> tuple[Rule, ...]:
    return tuple(
        Rule(family + suffix, TARGET + suffix, source, labels=None)
        for family, source in SOURCES.items()
        for suffix in ("_bucket", "_sum", "_count")
    )


RULES: tuple[Rule, ...] = _rules()
"""One rule per sample of each histogram (``_bucket`` with its ``le`` as is, ``_sum``, ``_count``)."""
