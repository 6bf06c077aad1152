"""servemetrics: a self-hostable model-serving metrics service.

The package root names the unit every layer shares (``docs/architecture.md`` maps the rest):
``Sample`` / ``SampleBatch`` (one point / many points in columns), the ``Labels`` / ``SeriesKey`` /
``Millis`` aliases and ``labels_of``. The service itself is ``servemetrics serve`` (``servemetrics.cli``)
or ``servemetrics.api.create_app``.
"""

from servemetrics.samples import Sample, SampleBatch
from servemetrics.types import Labels, Millis, SeriesKey, labels_of

__version__ = "0.1.0"

__all__ = ["Labels", "Millis", "Sample", "SampleBatch", "SeriesKey", "__version__", "labels_of"]
