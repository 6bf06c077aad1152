"""``servemetrics demo``: the service, its gateway, a real model on four replica processes exposing vLLM
and SGLang format engine metrics, replayed GPU exporters and Poisson load, in one command (docs/demo.md).

Modules: ``model`` (numpy character-level LM), ``replica`` (its HTTP server), ``engine`` (what an LLM
engine measures around its generation), ``vllm_metrics`` / ``sglang_metrics`` (that in the engines'
formats), ``replay`` (dcgm-replay), ``topology`` (ports, replicas, the generated config), ``processes``
(children), ``load`` (load generator, webhook receiver), ``report`` (metrics API tables), ``run`` (the
orchestration).
"""
