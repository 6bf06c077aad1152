"""The errors of the query layer: requests the API answers with 400, the message saying what to fix."""

from __future__ import annotations

import difflib
from collections.abc import Sequence

from servemetrics.catalog import CATALOG


class WindowError(ValueError):
    """A window the API must reject with 400; the message says what to fix."""


def _with_guess(name: str) -> str:
    """``name``, followed by the closest catalog name when one is close (``difflib``, as the config's
    unknown keys): ``baseten_gpu_utilisation (did you mean baseten_gpu_utilization?)``."""
    close = difflib.get_close_matches(name, CATALOG, n=1, cutoff=0.8)
    return f"{name} (did you mean {close[0]}?)" if close else name


class UnknownMetricError(ValueError):
    """Metric names not in the catalog (the API answers 400 naming them)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        shown = [_with_guess(n if len(n) <= 80 else n[:77] + "...") for n in self.names[:10]]
        more = f" and {len(self.names) - 10} more" if len(self.names) > 10 else ""
        platform = [n for n in CATALOG if ":" not in n and not n.startswith("baseten_model_api_")]
        super().__init__(
            "unknown metric name(s): "
            + ", ".join(shown)
            + more
            + ". Known names: "
            + ", ".join(platform)
            + ", the engine metrics vllm:* and sglang:* and Model API ones in docs/catalog.md, "
            + "and the custom metrics "
            + 'the model\'s replicas expose (docs/ingest.md "Custom metrics")'
        )


class SplitError(ValueError):
    """A ``group_by`` that does not apply to a requested metric (the API answers 400 naming the metric
    and the ``group_by`` values it accepts; rules in ``catalog.splits``)."""
