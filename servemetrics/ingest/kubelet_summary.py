"""Parse one kubelet Summary API body (``GET /stats/summary``, JSON) into source ``Sample`` rows.

The kubelet has no Prometheus metric for ephemeral-storage usage (``exporters.md`` §5.2); it is only in
the Summary API, whose JSON follows ``k8s.io/kubelet/pkg/apis/stats/v1alpha1`` (``Summary``,
``PodStats``, ``FsStats``)::

    {"node": {...}, "pods": [{"podRef": {"name", "namespace", "uid"},
                              "ephemeral-storage": {"time", "availableBytes", "capacityBytes",
                                                    "usedBytes", "inodes", ...},
                              "containers": [...], "volume": [...]}]}

``parse_summary`` turns each pod's ``ephemeral-storage`` into three source samples (``FIELDS``, labels
``namespace`` and ``pod``) stamped with the scrape time; the ``adapters.kubelet_summary`` rules map them
to canonical series. A pod without ``ephemeral-storage``, or a field that is missing or not a finite
non-negative number, yields no sample. The parser is pure, like ``exposition.parse_exposition``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from servemetrics.samples import Sample
from servemetrics.types import labels_of

CONTENT_TYPE = "application/json"
_PREFIX = "kubelet_summary_pod_ephemeral_storage_"
FIELDS: dict[str, str] = {
    "usedBytes": _PREFIX + "used_bytes",
    "capacityBytes": _PREFIX + "capacity_bytes",
    "availableBytes": _PREFIX + "available_bytes",
}
"""``FsStats`` field -> the source sample name ``parse_summary`` gives it."""


class SummaryError(ValueError):
    """A body that is not a Summary API document; the message says what is wrong."""


def is_summary(content_type: str | None, body: bytes) -> bool:
    """True when a scrape answered JSON (the kubelet sends ``application/json``) or starts with ``{``."""
    if content_type and content_type.split(";")[0].strip().lower() == CONTENT_TYPE:
        return True
    return body.lstrip()[:1] == b"{"


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value >= 0 else None


def parse_summary(body: bytes, ts_ms: int) -> list[Sample]:
    """Source samples of every pod's ``ephemeral-storage`` in a Summary API body, at ``ts_ms`` (epoch
    ms), in document order: per pod, ``FIELDS``' order; values in bytes.

    Raises:
        SummaryError: the body is not JSON, or not an object with a ``pods`` list.
    """
    try:
        doc = json.loads(body)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SummaryError(f"not a kubelet Summary API document (invalid JSON: {exc})") from None
    pods = doc.get("pods") if isinstance(doc, dict) else None
    if not isinstance(pods, list):
        raise SummaryError("not a kubelet Summary API document: no `pods` list at the top level")
    out: list[Sample] = []
    for pod in pods:
        out.extend(_pod_samples(pod, ts_ms))
    return out


def _pod_samples(pod: Any, ts_ms: int) -> list[Sample]:
    if not isinstance(pod, dict):
        return []
    ref, fs = pod.get("podRef"), pod.get("ephemeral-storage")
    if not isinstance(ref, dict) or not isinstance(fs, dict) or not ref.get("name"):
        return []
    labels = labels_of({"namespace": str(ref.get("namespace") or ""), "pod": str(ref["name"])})
    out = []
    for field, name in FIELDS.items():
        value = _number(fs.get(field))
        if value is not None:
            out.append(Sample(name, labels, value, ts_ms))
    return out
