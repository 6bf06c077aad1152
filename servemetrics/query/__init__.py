"""The query layer: plans (``plan``, ``loops_plan``) executed against a ``Store`` (``execute``, ``loops``,
``gpu_usage``); its errors are in ``errors``."""

from servemetrics.query.errors import UnknownMetricError, WindowError

__all__ = ["UnknownMetricError", "WindowError"]
