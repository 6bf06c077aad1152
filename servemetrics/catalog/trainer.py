"""Canonical series of trainer (Loops) deployments that the model catalog has no row for.

The trainer endpoint (``POST /v1/loops/deployments/{id}/metrics``, docs/loops.md) also reads model-catalog
series (GPU, CPU, memory, requests); these are the ones only trainer nodes report. They are not served
by the model metrics endpoints, so they stay out of ``catalog.metrics.CATALOG``.

- ``baseten_ephemeral_storage_used_bytes``: bytes a pod uses on the node's ephemeral storage (kubelet
  Summary API ``pods[].ephemeral-storage.usedBytes``).
- ``baseten_ephemeral_storage_capacity_bytes``: bytes of the filesystem that holds it (Summary API
  ``capacityBytes``; node_exporter ``node_filesystem_size_bytes`` of ``/``).
- ``baseten_ephemeral_storage_available_bytes``: bytes still free there (Summary API
  ``availableBytes``; node_exporter ``node_filesystem_avail_bytes`` of ``/``). Where no ``used`` series
  exists (node_exporter), used = capacity - available.
"""

from __future__ import annotations

from servemetrics.catalog.model import Aggregation, Kind, MetricDef, Unit

EPHEMERAL_USED = "baseten_ephemeral_storage_used_bytes"
EPHEMERAL_CAPACITY = "baseten_ephemeral_storage_capacity_bytes"
EPHEMERAL_AVAILABLE = "baseten_ephemeral_storage_available_bytes"

TRAINER_CATALOG: dict[str, MetricDef] = {
    m.name: m
    for m in (
        MetricDef(
            EPHEMERAL_USED,
            Kind.GAUGE,
            Unit.BYTES,
            Aggregation.SUM,
            "Ephemeral storage a pod uses (writable layers, logs, emptyDir), in bytes.",
        ),
        MetricDef(
            EPHEMERAL_CAPACITY,
            Kind.GAUGE,
            Unit.BYTES,
            Aggregation.MEAN,
            "Size of the filesystem holding a node's ephemeral storage, in bytes.",
        ),
        MetricDef(
            EPHEMERAL_AVAILABLE,
            Kind.GAUGE,
            Unit.BYTES,
            Aggregation.MEAN,
            "Free bytes on the filesystem holding a node's ephemeral storage.",
        ),
    )
}
"""Canonical name -> definition, for the trainer-only series (kept complete by tests/ingest)."""
