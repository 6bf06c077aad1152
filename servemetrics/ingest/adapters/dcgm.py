"""NVIDIA dcgm-exporter (``exporters.md`` §4): per-GPU utilisation, memory, temperature and activity.

``gpu`` is the GPU index; on MIG, ``GPU_I_ID`` becomes ``gpu_instance`` so that instances are separate
series. Utilisation prefers ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (0-1, finer, valid per MIG instance) over
``DCGM_FI_DEV_GPU_UTIL`` (percent, coarse, always 0 on MIG, so never used when ``GPU_I_ID`` is set).
"""

from __future__ import annotations

from servemetrics.ingest.adapters.rules import LabelMatch, Rule

_GPU = {"gpu": "gpu", "GPU_I_ID": "gpu_instance"}
_NOT_MIG = (LabelMatch("GPU_I_ID", ""),)

RULES: tuple[Rule, ...] = (
    Rule("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "baseten_gpu_utilization", "dcgm", _GPU, priority=1),
    Rule("DCGM_FI_DEV_GPU_UTIL", "baseten_gpu_utilization", "dcgm", _GPU, _NOT_MIG, divisor=100.0),
    Rule("DCGM_FI_DEV_FB_USED", "baseten_gpu_memory_used", "dcgm", _GPU),
    Rule("DCGM_FI_DEV_GPU_TEMP", "baseten_gpu_temperature_celsius", "dcgm", _GPU),
    Rule("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "baseten_gpu_tensor_core_utilization", "dcgm", _GPU),
    Rule("DCGM_FI_PROF_DRAM_ACTIVE", "baseten_gpu_memory_bandwidth_utilization", "dcgm", _GPU),
)
