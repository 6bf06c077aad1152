"""Per-request sample limits of ``POST /api/v1/write`` and ``POST /v1/import`` (config
``limits.remote_write_samples`` / ``limits.import_samples``; docs/security.md "Limits"). A request over
its limit is a 413 and nothing of it is stored: remote_write counts the decoded samples, import the
sample lines of the whole uploaded file before any batch is stored."""

from __future__ import annotations

from servemetrics.api.errors import ApiError


def check_sample_count(count: int, limit: int, setting: str) -> None:
    """Nothing when ``count`` samples are within ``limit``.

    Raises:
        ApiError: 413 naming the count, the limit and ``setting`` (the config key that raises it).
    """
    if count > limit:
        raise ApiError(
            413,
            f"the request holds {count} samples; this path takes at most {limit} samples per request "
            f"({setting} in the service's config file); send them in smaller requests",
        )


def count_sample_lines(path: str, stop_after: int) -> int:
    """Sample lines of the exposition file at ``path`` (every line that is not blank and not a ``#``
    comment, ``_created`` lines included), counting stopped at ``stop_after + 1``.

    Raises:
        OSError: the file cannot be read.
    """
    count = 0
    with open(path, "rb") as f:
        for line in f:
            if line.strip() and not line.lstrip().startswith(b"#"):
                count += 1
                if count > stop_after:
                    break
    return count
