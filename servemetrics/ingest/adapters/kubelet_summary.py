"""The kubelet Summary API's pod ephemeral-storage, as parsed by ``ingest.kubelet_summary``.

``parse_summary`` gives each pod's ``ephemeral-storage`` three source samples (``FIELDS``, labels
``namespace`` and ``pod``); ``RULES`` map them to the canonical
``baseten_ephemeral_storage_{used,capacity,available}_bytes`` (``catalog.trainer``), keeping both labels.
"""

from __future__ import annotations

from servemetrics.catalog.trainer import EPHEMERAL_AVAILABLE, EPHEMERAL_CAPACITY, EPHEMERAL_USED
from servemetrics.ingest.adapters.rules import Rule
from servemetrics.ingest.kubelet_summary import FIELDS

_KEEP = {"namespace": "namespace", "pod": "pod"}
RULES: tuple[Rule, ...] = (
    Rule(FIELDS["usedBytes"], EPHEMERAL_USED, "kubelet_summary", _KEEP),
    Rule(FIELDS["capacityBytes"], EPHEMERAL_CAPACITY, "kubelet_summary", _KEEP),
    Rule(FIELDS["availableBytes"], EPHEMERAL_AVAILABLE, "kubelet_summary", _KEEP),
)
