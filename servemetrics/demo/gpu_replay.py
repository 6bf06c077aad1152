"""One GPU of the demo: the real dcgm-exporter capture, every field driven by one utilisation level.

The capture (``replays/dcgm_exporter_k8s_pod_sample.prom``, one RTX 4000 Ada, provenance in
``replays/README.md``) was taken on an idle GPU, so its values are the *idle* end of each field. At
utilisation ``u`` (0-1: the fraction of the last interval in which the replica was generating, from
``busy.BusyMeter``) the fields move together, from their recorded idle value at ``u = 0`` (memory: plus the
served model's weights) to a busy value at ``u = 1``:

- ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (ratio) = max(idle, ``u``); ``DCGM_FI_DEV_GPU_UTIL`` (percent) is
  the same level rounded to a whole percent, as the driver reports it.
- ``DCGM_FI_PROF_PIPE_TENSOR_ACTIVE`` = ``TENSOR_SHARE`` x ``u`` (part of the busy time is tensor-core
  work); ``DCGM_FI_PROF_DRAM_ACTIVE`` = idle + ``DRAM_SHARE`` x ``u`` (token decoding is memory-bound);
  ``DCGM_FI_DEV_MEM_COPY_UTIL`` is that level in whole percent.
- ``DCGM_FI_DEV_POWER_USAGE`` (W) from idle up to ``BOARD_POWER_W``; ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``
  (mJ, a counter) grows by that power over the time between renders.
- ``DCGM_FI_DEV_GPU_TEMP`` (whole °C) idle + ``TEMP_RISE_C`` x ``u``.
- ``DCGM_FI_DEV_FB_USED`` (whole MiB) idle + ``WEIGHTS_MIB`` (the model, once served) + ``KV_MIB`` x ``u``;
  ``DCGM_FI_DEV_FB_FREE`` = the capture's total (free + used + reserved) - reserved - used.
- ``DCGM_FI_PROF_PCIE_TX_BYTES`` / ``RX_BYTES`` (bytes/s) idle + a rate proportional to ``u``.
- Everything else is served as recorded: clocks (the capture's are already at their maximum), the
  encoder and decoder (an LLM does not use them: 0), XID, remapped rows and the other health fields.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_SAMPLE = re.compile(r"^(?P<head>(?P<name>[^\s{]+)(?:\{.*\})?)\s+(?P<value>\S+)(?:\s+\S+)?$")

BOARD_POWER_W = 130.0
"""The RTX 4000 Ada's total board power (NVIDIA's data sheet): ``DCGM_FI_DEV_POWER_USAGE`` at ``u = 1``."""
TENSOR_SHARE = 0.6
DRAM_SHARE = 0.7
TEMP_RISE_C = 30.0
WEIGHTS_MIB = 4096.0
KV_MIB = 8192.0
PCIE_TX_BYTES_PER_S = 40e6
PCIE_RX_BYTES_PER_S = 120e6
"""Added at ``u = 1`` to the capture's PCIe rates (bytes/s)."""


def recorded_values(text: str) -> dict[str, float]:
    """``{field name: value}`` of an exposition text (the first sample of each name)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _SAMPLE.match(line)
        if m and not line.startswith("#"):
            out.setdefault(m["name"], float(m["value"]))
    return out


def gauges(u: float, idle: dict[str, float]) -> dict[str, float]:
    """The gauge fields at utilisation ``u`` (clamped to 0-1), from the ``idle`` capture's values (the
    module docstring gives each rule). Fields missing from ``idle`` are left out."""
    u = min(max(u, 0.0), 1.0)
    gr = max(idle.get("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 0.0), u)
    dram = min(idle.get("DCGM_FI_PROF_DRAM_ACTIVE", 0.0) + DRAM_SHARE * u, 1.0)
    used = float(round(idle.get("DCGM_FI_DEV_FB_USED", 0.0) + WEIGHTS_MIB + KV_MIB * u))
    total = sum(idle.get(f"DCGM_FI_DEV_FB_{k}", 0.0) for k in ("FREE", "USED", "RESERVED"))
    idle_power = idle.get("DCGM_FI_DEV_POWER_USAGE", 0.0)
    values = {
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE": gr,
        "DCGM_FI_DEV_GPU_UTIL": float(round(100 * gr)),
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": TENSOR_SHARE * u,
        "DCGM_FI_PROF_DRAM_ACTIVE": dram,
        "DCGM_FI_DEV_MEM_COPY_UTIL": float(round(100 * dram)),
        "DCGM_FI_DEV_POWER_USAGE": idle_power + (BOARD_POWER_W - idle_power) * u,
        "DCGM_FI_DEV_GPU_TEMP": float(round(idle.get("DCGM_FI_DEV_GPU_TEMP", 0.0) + TEMP_RISE_C * u)),
        "DCGM_FI_DEV_FB_USED": used,
        "DCGM_FI_DEV_FB_FREE": total - idle.get("DCGM_FI_DEV_FB_RESERVED", 0.0) - used,
        "DCGM_FI_PROF_PCIE_TX_BYTES": idle.get("DCGM_FI_PROF_PCIE_TX_BYTES", 0.0) + PCIE_TX_BYTES_PER_S * u,
        "DCGM_FI_PROF_PCIE_RX_BYTES": idle.get("DCGM_FI_PROF_PCIE_RX_BYTES", 0.0) + PCIE_RX_BYTES_PER_S * u,
    }
    return {k: v for k, v in values.items() if k in idle}


@dataclass
class GpuReplay:
    """One GPU: ``render(u, now)`` is the capture ``text`` with its fields at utilisation ``u`` and the
    energy counter grown by the power drawn since the previous render (``now`` in seconds, monotonic)."""

    text: str
    idle: dict[str, float] = field(init=False)
    energy_mj: float = field(init=False)
    last: float | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.idle = recorded_values(self.text)
        self.energy_mj = self.idle.get("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", 0.0)

    def render(self, u: float, now: float) -> str:
        """The exposition text at utilisation ``u``; names, labels, HELP and TYPE as recorded."""
        values = gauges(u, self.idle)
        if self.last is not None and now > self.last:
            self.energy_mj += values.get("DCGM_FI_DEV_POWER_USAGE", 0.0) * (now - self.last) * 1000.0
        self.last = now
        values["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] = self.energy_mj
        out = []
        for line in self.text.splitlines():
            m = _SAMPLE.match(line)
            if line.startswith("#") or not m or m["name"] not in values:
                out.append(line)
            else:
                out.append(f"{m['head']} {values[m['name']]:.10g}")
        return "\n".join(out) + "\n"
