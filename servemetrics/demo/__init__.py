"""``servemetrics demo``: the service, its gateway, a real model on four replica processes, replayed GPU
and engine exporters and Poisson load, in one command (docs/demo.md).

Modules: ``model`` (numpy character-level LM), ``replica`` (its HTTP server), ``replay`` (dcgm-replay,
vllm-replay), ``topology`` (ports, replicas, the generated config), ``processes`` (children), ``load``
(load generator, webhook receiver), ``report`` (metrics API tables), ``run`` (the orchestration).
"""
