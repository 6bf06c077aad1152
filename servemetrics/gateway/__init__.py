"""The metering gateway: inference paths in front of the replicas (docs/gateway.md).

It routes each request to a replica of the deployment(s) serving the target, applies per-deployment
backpressure, relays the response as it streams, checks replica health, and exports the platform's
request and replica metrics on its own registry (``GET /gateway/metrics``).
"""

from servemetrics.gateway.backpressure import QUEUE_ON_FULL, REJECT_ON_FULL
from servemetrics.gateway.gateway import Gateway, GatewayOptions, desired_replicas
from servemetrics.gateway.metrics import LATENCY_BUCKETS_S, SIZE_BUCKETS_BYTES

__all__ = [
    "LATENCY_BUCKETS_S",
    "QUEUE_ON_FULL",
    "REJECT_ON_FULL",
    "SIZE_BUCKETS_BYTES",
    "Gateway",
    "GatewayOptions",
    "desired_replicas",
]
