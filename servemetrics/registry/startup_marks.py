"""Startup attempts as marks (named instants, epoch ms) and the phases, outcome and duration read from
them (pure functions, no database; docs/management.md "Startup times").

An attempt has a ``source`` that says which marks it can have and which phases they bound (``PHASES``):

- ``lifecycle`` (our own replica lifecycle, plain machines): ``registered`` (the replica registered, or
  registered again after it ended) and ``healthy`` (its first 2xx ``GET /health``): READINESS.
- ``kube_state`` (kube-state-metrics timestamps of the replica's pod): ``created``
  (``kube_pod_created``), ``scheduled`` (``kube_pod_status_scheduled_time``), ``containers_started``
  (the latest ``kube_pod_container_state_started`` of its containers) and ``ready``
  (``kube_pod_status_ready_time``): SCHEDULING, CONTAINER_CREATE (which includes the image pull: the
  exporter does not tell them apart) and READINESS.

A phase is reported only when its first mark was observed (only observed phases); it is COMPLETED when
its second mark was too, else, in an attempt that ended without it, FAILED with no duration.

Outcome: SUCCESS once the ready mark is there; FAILED when the attempt ended before it (the replica
failed or was terminated, the pod failed or was replaced); STALLED when neither happened within
``stall_ms`` of its start; otherwise it is still starting (``None``: not listed yet).
"""

from __future__ import annotations

from dataclasses import dataclass, field

PHASE_NAMES = (
    "SCHEDULING",
    "IMAGE_PULL",
    "WEIGHT_DOWNLOAD",
    "CONTAINER_CREATE",
    "CONTAINER_START",
    "READINESS",
)
"""``StartupPhaseV1`` values, in the order a startup goes through them (and answers list them)."""

OUTCOMES = ("SUCCESS", "FAILED", "STALLED")
"""``StartupOutcomeV1`` values."""

LIFECYCLE = "lifecycle"
KUBE_STATE = "kube_state"

PHASES: dict[str, tuple[tuple[str, str, str], ...]] = {
    LIFECYCLE: (("READINESS", "registered", "healthy"),),
    KUBE_STATE: (
        ("SCHEDULING", "created", "scheduled"),
        ("CONTAINER_CREATE", "scheduled", "containers_started"),
        ("READINESS", "containers_started", "ready"),
    ),
}
"""Source -> its phases as ``(phase, from mark, to mark)``, in order."""

START_MARK = {LIFECYCLE: "registered", KUBE_STATE: "created"}
READY_MARK = {LIFECYCLE: "healthy", KUBE_STATE: "ready"}
"""Source -> the mark that starts an attempt / that makes it a SUCCESS."""

DEFAULT_STALL_MS = 15 * 60 * 1000
"""An attempt neither ready nor ended this long after its start is STALLED (config
``health.startup_stall_timeout``)."""


@dataclass(frozen=True)
class PhaseSpan:
    """One phase of an attempt: ``offset_ms`` from the attempt's start, ``duration_ms`` (None: not
    finished) and ``status`` COMPLETED or FAILED (``StartupPhaseSummary``)."""

    phase: str
    status: str
    offset_ms: int
    duration_ms: int | None


@dataclass(frozen=True)
class Attempt:
    """One startup attempt of a replica, as stored (times epoch ms).

    Attributes:
        id: the row's id (ties in a sort are broken by it).
        model_id, deployment_id, deployment_name, replica: whose attempt.
        source: ``lifecycle`` or ``kube_state`` (``PHASES``).
        started_at_ms: its start mark.
        ready_at_ms: its ready mark, None until it is there.
        ended_at_ms: when it ended without being ready (then FAILED), else None.
        marks: every mark observed, by name.
    """

    id: int
    model_id: str
    deployment_id: str
    deployment_name: str
    replica: str
    source: str
    started_at_ms: int
    ready_at_ms: int | None
    ended_at_ms: int | None
    marks: dict[str, int] = field(default_factory=dict)

    def outcome(self, now_ms: int, stall_ms: int = DEFAULT_STALL_MS) -> str | None:
        """SUCCESS, FAILED, STALLED, or None while it is still starting (module docstring)."""
        if self.ready_at_ms is not None:
            return "SUCCESS"
        if self.ended_at_ms is not None:
            return "FAILED"
        return "STALLED" if now_ms - self.started_at_ms >= stall_ms else None

    def end_ms(self, now_ms: int) -> int:
        """Where its duration ends: ready, else ended, else (a STALLED attempt) ``now_ms``."""
        for end in (self.ready_at_ms, self.ended_at_ms):
            if end is not None:
                return end
        return now_ms

    def duration_ms(self, now_ms: int) -> int:
        """Milliseconds from its start to ``end_ms`` (never negative)."""
        return max(0, self.end_ms(now_ms) - self.started_at_ms)

    def phases(self) -> list[PhaseSpan]:
        """The phases whose first mark was observed (module docstring), in order."""
        out = []
        for phase, begin, finish in PHASES.get(self.source, ()):
            start = self.marks.get(begin)
            if start is None:
                continue
            end = self.marks.get(finish)
            offset = max(0, start - self.started_at_ms)
            if end is not None:
                out.append(PhaseSpan(phase, "COMPLETED", offset, max(0, end - start)))
            elif self.ready_at_ms is None:
                out.append(PhaseSpan(phase, "FAILED", offset, None))
        return out
