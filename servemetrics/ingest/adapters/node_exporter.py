"""Prometheus ``node_exporter`` filesystem series, as a node's ephemeral storage.

``node_filesystem_size_bytes`` and ``node_filesystem_avail_bytes`` (labels ``device``, ``fstype``,
``mountpoint``) of the root filesystem ``mountpoint="/"``, which holds the kubelet's directory
(``/var/lib/kubelet``: pods' writable layers, logs and emptyDir volumes) in a default node layout. The
``rootfs`` pseudo-entry older kernels list beside the real ``/`` mount is skipped. Stored as
``baseten_ephemeral_storage_capacity_bytes`` and ``..._available_bytes`` (``catalog.trainer``); the
trainer query derives used = capacity - available (docs/loops.md).
"""

from __future__ import annotations

from servemetrics.catalog.trainer import EPHEMERAL_AVAILABLE, EPHEMERAL_CAPACITY
from servemetrics.ingest.adapters.rules import LabelMatch, Rule

MOUNTPOINT = "/"
_ROOT = (LabelMatch("mountpoint", MOUNTPOINT), LabelMatch("fstype", "rootfs", negate=True))

RULES: tuple[Rule, ...] = (
    Rule("node_filesystem_size_bytes", EPHEMERAL_CAPACITY, "node_exporter", {}, _ROOT),
    Rule("node_filesystem_avail_bytes", EPHEMERAL_AVAILABLE, "node_exporter", {}, _ROOT),
)
