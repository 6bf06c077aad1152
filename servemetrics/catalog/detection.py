"""Which engines a deployment runs, told by the names of its stored series, and which catalog metrics
apply to which engine (issue 13 part 4).

platform-facts.md §1 "vLLM / SGLang engine metrics": detection looks for metrics "that match the vLLM
or SGLang format", runs periodically and its results are cached (``query.engines`` does the looking and
the caching). Here is the table it reads: per engine, the stored series names (``MARKERS``) whose
presence for a deployment says it runs that engine, and per name prefix the engines a catalog metric
with that prefix applies to (``APPLIES_TO``). A metric with no such prefix (the platform's
``baseten_*`` rows) applies to every deployment.
"""

from __future__ import annotations

ENGINES: tuple[str, ...] = ("vllm", "sglang", "triton", "bis_llm")
"""The engines detection tells apart, in the order answers list them: vLLM, SGLang, Triton (core or the
TensorRT-LLM backend) and a BIS-LLM-style engine (one exposing ``baseten_llm_*`` itself)."""

ENGINE_TITLES: dict[str, str] = {
    "vllm": "vLLM",
    "sglang": "SGLang",
    "triton": "Triton",
    "bis_llm": "BIS-LLM",
}
"""Display name of each engine."""

MARKERS: dict[str, tuple[str, ...]] = {
    "vllm": ("vllm:num_requests_running", "vllm:generation_tokens_total"),
    "sglang": ("sglang:num_running_reqs", "sglang:generation_tokens_total"),
    "triton": ("nv_inference_request_success", "nv_trt_llm_request_metrics"),
    "bis_llm": (
        "baseten_llm_in_flight_tokens",
        "baseten_llm_avg_in_flight_tokens",
    ),
}
"""Engine -> stored series names any of which, held for a deployment, means it runs the engine.

vLLM exports ``num_requests_running`` and ``generation_tokens_total`` from V0 through V1 (exporters.md
§1); SGLang's scheduler exports ``num_running_reqs`` and its tokenizer ``generation_tokens_total``
(exporters.md §2: a server started without ``--enable-metrics`` exports neither); Triton core counts
``nv_inference_request_success`` per model and the TensorRT-LLM backend exports
``nv_trt_llm_request_metrics`` (exporters.md §6; ``ingest.adapters.engines.MARKERS`` stores just these
two); the ``baseten_llm_*`` names are platform-facts.md §1's table, only those no engine series is
adapted to (``ingest.adapters.llm.NOT_DERIVED``: a vLLM or SGLang replica also holds ``baseten_llm_*``
series adapted from its own, which must not make it BIS-LLM-style). Two or three names per engine keep a
refresh to a few index lookups (``Store.label_values``)."""

APPLIES_TO: dict[str, tuple[str, ...]] = {
    "vllm:": ("vllm",),
    "sglang:": ("sglang",),
    "nv_inference_": ("triton",),
    "nv_trt_llm_": ("triton",),
    "baseten_llm_": ("bis_llm", "vllm", "sglang"),
}
"""Catalog name prefix -> the engines whose detection makes a metric of that name apply. The
``baseten_llm_*`` set applies to a BIS-LLM-style engine and also to vLLM and SGLang, whose series the
adapters turn into it where exporters.md §7 says the semantics match (issue 13 part 2)."""


def engines_of(name: str) -> tuple[str, ...]:
    """The engines whose detection makes catalog metric ``name`` apply to a deployment (``APPLIES_TO``);
    ``()`` for a metric that applies to every deployment (the platform's ``baseten_*`` rows)."""
    for prefix, engines in APPLIES_TO.items():
        if name.startswith(prefix):
            return engines
    return ()
