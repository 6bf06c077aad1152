"""How busy a demo process is: the time during which at least one piece of work was running.

``BusyMeter`` is what the replica (generation) and the trainer (training steps) count; the DCGM replay reads
``busy_seconds()`` from them (``GET /busy``) and turns two readings into the GPU's utilisation over the
interval between them (``utilisation``).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class BusyMeter:
    """Thread-safe count of seconds (of ``clock``) during which ``active > 0``."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.active = 0
        self._total = 0.0
        self._since = 0.0
        self._lock = threading.Lock()

    def enter(self) -> None:
        """One more piece of work runs."""
        with self._lock:
            if self.active == 0:
                self._since = self.clock()
            self.active += 1

    def leave(self) -> None:
        """One piece of work ended; ValueError when none was running."""
        with self._lock:
            if self.active == 0:
                raise ValueError("leave() without a matching enter()")
            self.active -= 1
            if self.active == 0:
                self._total += self.clock() - self._since

    def busy_seconds(self) -> float:
        """Seconds busy so far, the running stretch included."""
        with self._lock:
            return self._total + (self.clock() - self._since if self.active else 0.0)


def utilisation(before: tuple[float, float], after: tuple[float, float]) -> float:
    """The busy fraction (0-1) between two ``(time s, busy_seconds)`` readings; 0 when no time passed."""
    dt = after[0] - before[0]
    if dt <= 0:
        return 0.0
    return min(max((after[1] - before[1]) / dt, 0.0), 1.0)
