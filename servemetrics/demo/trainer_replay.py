"""What the demo trainer's nodes expose, rendered from fixtures with moving values (``replay.render``).

For node ``node`` at ``t`` seconds after start:

- ``NodeGpus.dcgm(node, u, now)``: the real dcgm-exporter capture
  (``replays/dcgm_exporter_k8s_pod_sample.prom``, one GPU) presented as two GPU ranks: every sample line
  is followed by a copy with ``gpu="1"`` (device, UUID and PCI bus id changed to match). Both ranks' fields
  follow one utilisation level (``gpu_replay``): rank 0 at ``u`` (the trainer's busy fraction), rank 1 at
  ``RANK1_SHARE`` x ``u`` (the worker waits on the leader at each step), so their values differ.
- ``kubelet(node, t)``: the kubelet ``/metrics/resource`` test expectation from Kubernetes
  (``replays/kubelet_metrics_resource_test_expectations.prom``; pods ``namespace_a/pod_a`` with two
  containers and ``namespace_b/pod_b`` with one), counters growing and gauges oscillating.
- ``summary(node, t, pod, namespace)``: the hand-written kubelet Summary API document
  (``replays/kubelet_stats_summary.json``; shape from ``k8s.io/kubelet/pkg/apis/stats/v1alpha1``) with
  the trainer pod renamed to the node's ``pod`` / ``namespace`` and its ephemeral-storage usage growing
  by 10 MB a second (checkpoints being written), available bytes shrinking by as much.

Provenance of the files: ``replays/README.md``.
"""

from __future__ import annotations

import copy
import json
import re
from functools import cache
from pathlib import Path
from typing import Any

from servemetrics.demo.gpu_replay import GpuReplay
from servemetrics.demo.replay import REPLAYS, render

DCGM_FILE = "dcgm_exporter_k8s_pod_sample.prom"
KUBELET_FILE = "kubelet_metrics_resource_test_expectations.prom"
SUMMARY_FILE = "kubelet_stats_summary.json"
SUMMARY_POD = ("trainer-0", "loops")
"""The pod of the Summary document that stands for the node's trainer pod."""
GROWTH_BYTES_PER_S = 10_000_000
_RANK1 = (
    (re.compile(r'gpu="0"'), 'gpu="1"'),
    (re.compile(r'device="nvidia0"'), 'device="nvidia1"'),
    (re.compile(r'UUID="GPU-a'), 'UUID="GPU-b'),
    (re.compile(r'pci_bus_id="00000000:00:02.0"'), 'pci_bus_id="00000000:00:03.0"'),
)


@cache
def _text(name: str) -> str:
    return (REPLAYS / name).read_text()


def _rank1(text: str) -> str:
    for pattern, repl in _RANK1:
        text = pattern.sub(repl, text)
    return text


RANK1_SHARE = 0.9
"""Rank 1's utilisation as a share of rank 0's."""


class NodeGpus:
    """The two GPU ranks of each node (their energy counters grow between calls)."""

    def __init__(self) -> None:
        self.ranks: dict[str, tuple[GpuReplay, GpuReplay]] = {}

    def dcgm(self, node: str, u: float, now: float) -> str:
        """Two-rank DCGM exposition of ``node`` at utilisation ``u`` (0-1), ``now`` in monotonic seconds
        (see the module docstring)."""
        gpu0, gpu1 = self.ranks.setdefault(
            node, (GpuReplay(_text(DCGM_FILE)), GpuReplay(_rank1(_text(DCGM_FILE))))
        )
        return interleave(gpu0.render(u, now), gpu1.render(RANK1_SHARE * u, now))


def interleave(rank0_text: str, rank1_text: str) -> str:
    """Rank 0's exposition with each sample line followed by rank 1's (same families, same order)."""
    rank0, rank1 = rank0_text.splitlines(), rank1_text.splitlines()
    out: list[str] = []
    for a, b in zip(rank0, rank1, strict=True):
        out.append(a)
        if a and not a.startswith("#"):
            out.append(b)
    return "\n".join(out) + "\n"


def kubelet(node: str, t: float) -> str:
    """The kubelet ``/metrics/resource`` exposition of ``node`` at ``t`` s."""
    return render(_text(KUBELET_FILE), t, f"/{node}/kubelet")


@cache
def _summary_doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(_text(SUMMARY_FILE))
    return doc


def summary(t: float, pod: str, namespace: str) -> bytes:
    """The Summary API document at ``t`` s with the trainer pod named ``namespace/pod`` (JSON bytes)."""
    doc = copy.deepcopy(_summary_doc())
    grown = int(GROWTH_BYTES_PER_S * t)
    for entry in doc["pods"]:
        if (entry["podRef"]["name"], entry["podRef"]["namespace"]) == SUMMARY_POD:
            entry["podRef"].update(name=pod, namespace=namespace)
            fs = entry["ephemeral-storage"]
            fs["usedBytes"] += grown
            fs["availableBytes"] -= grown
    return json.dumps(doc).encode()


def replay_files() -> list[Path]:
    """The fixture files the trainer's nodes replay."""
    return [REPLAYS / n for n in (DCGM_FILE, KUBELET_FILE, SUMMARY_FILE)]
