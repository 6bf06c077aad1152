"""NVIDIA dcgm-exporter (``exporters.md`` §4): per-GPU utilisation, memory, temperature and activity.

``gpu`` is the GPU index; on MIG, ``GPU_I_ID`` becomes ``gpu_instance`` so that instances are separate
series. Utilisation prefers ``DCGM_FI_PROF_GR_ENGINE_ACTIVE`` (0-1, finer, valid per MIG instance) over
``DCGM_FI_DEV_GPU_UTIL`` (percent, coarse, always 0 on MIG, so never used when ``GPU_I_ID`` is set).

Power (``DEV_POWER_USAGE``, W) feeds two metrics, the mean per GPU and the total; the SM clock
(``DEV_SM_CLOCK``, MHz) is stored in hertz; the memory health fields are the remapped-row counters (one
series per kind: ``rows="correctable"`` / ``"uncorrectable"``) and the remap-failure flag (0 or 1).
Not mapped: ``DEV_XID_ERRORS`` (the code of the last XID error, not a count: no sum or mean of it
means anything) and the ECC counters (not in dcgm-exporter's default CSV, ``exporters.md`` §4).
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
    Rule("DCGM_FI_DEV_POWER_USAGE", "baseten_gpu_power_usage_watts", "dcgm", _GPU),
    Rule("DCGM_FI_DEV_POWER_USAGE", "baseten_gpu_power_total_watts", "dcgm", _GPU),
    Rule("DCGM_FI_DEV_SM_CLOCK", "baseten_gpu_sm_clock_hertz", "dcgm", _GPU, divisor=1e-6),
    Rule(
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "baseten_gpu_remapped_rows_total",
        "dcgm",
        _GPU,
        constant=(("rows", "correctable"),),
    ),
    Rule(
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "baseten_gpu_remapped_rows_total",
        "dcgm",
        _GPU,
        constant=(("rows", "uncorrectable"),),
    ),
    Rule("DCGM_FI_DEV_ROW_REMAP_FAILURE", "baseten_gpu_row_remap_failure", "dcgm", _GPU),
)
