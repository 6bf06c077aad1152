"""Generate OpenMetrics backfill text (timestamps in seconds) for tests and the backfill measurement.

Layout: per family, per series, every point in time order (a histogram series writes its buckets,
``_sum`` and ``_count`` per timestamp, then the next timestamp: regression case C11).
"""

from __future__ import annotations

from collections.abc import Iterator

T0 = 1767225600
BUCKETS = ("0.05", "0.1", "0.25", "0.5", "1.0", "2.5", "5.0", "10.0", "+Inf")


def openmetrics_lines(points: int, gpus: int = 4, step_s: int = 15) -> Iterator[str]:
    """Yield lines (with ``\\n``) of a file with ``points`` timestamps per series."""
    yield "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"
    for gpu in range(gpus):
        for i in range(points):
            util = (i + gpu) % 101
            yield f'DCGM_FI_DEV_GPU_UTIL{{gpu="{gpu}",UUID="GPU-{gpu}"}} {util} {T0 + i * step_s}\n'
    yield "# TYPE baseten_inference_requests counter\n"
    for code in ("200", "429", "500"):
        for i in range(points):
            yield f'baseten_inference_requests_total{{status_code="{code}"}} {i * 3} {T0 + i * step_s}\n'
    yield "# TYPE baseten_end_to_end_response_time_seconds histogram\n"
    for i in range(points):
        ts = T0 + i * step_s
        for j, le in enumerate(BUCKETS):
            yield f'baseten_end_to_end_response_time_seconds_bucket{{le="{le}"}} {i * (j + 1)} {ts}\n'
        yield f"baseten_end_to_end_response_time_seconds_sum {i * 2.5} {ts}\n"
        yield f"baseten_end_to_end_response_time_seconds_count {i * len(BUCKETS)} {ts}\n"
    yield "# EOF\n"


def samples_per_point(gpus: int = 4) -> int:
    """Adapted samples per timestamp in a generated file."""
    return gpus + 3 + len(BUCKETS) + 2
