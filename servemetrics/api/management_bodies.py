"""Request bodies of the management API (``routes/management.py``, ``routes/environments.py``).

Strict: unknown keys are rejected and ``"false"`` / ``"3"`` / ``3.0`` are not booleans or ints. A bounded
integer that is out of range, or not an integer, fails with ``must be an integer <low>..<high>, not <v>``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PlainValidator

from servemetrics.registry.ids import check_id
from servemetrics.registry.records import AUTOSCALING_RANGES, MAX_SETTING, NULLABLE_AUTOSCALING


class _Body(BaseModel):
    """Strict: unknown keys are rejected and ``"false"`` / ``"3"`` / ``3.0`` are not booleans or ints."""

    model_config = ConfigDict(extra="forbid", strict=True)


def in_range(low: int, high: int, nullable: bool = False) -> PlainValidator:
    """Validator of an int from ``low`` to ``high`` (no bools, floats or strings), failing with the range
    (use as ``Annotated[int, in_range(low, high)]``; ``nullable``: the message says null is allowed too)."""
    null = " or null" if nullable else ""

    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            raise ValueError(f"must be an integer {low}..{high}{null}, not {value!r}")
        return value

    return PlainValidator(check, json_schema_input_type=int)


_AS = AUTOSCALING_RANGES
Flag = Annotated[bool, Field(strict=True)]
Percent = Annotated[int, in_range(0, 100)]
Seconds = Annotated[int, in_range(0, MAX_SETTING)]
MinReplica = Annotated[int, in_range(*_AS["min_replica"])]
MaxReplica = Annotated[int, in_range(*_AS["max_replica"])]
AutoscalingWindow = Annotated[int, in_range(*_AS["autoscaling_window"])]
ScaleDownDelay = Annotated[int, in_range(*_AS["scale_down_delay"])]
ConcurrencyTarget = Annotated[int, in_range(*_AS["concurrency_target"])]
UtilizationPercent = Annotated[int, in_range(*_AS["target_utilization_percentage"])]
InFlightTokens = Annotated[int, in_range(*_AS["target_in_flight_tokens"], nullable=True)]


class AutoscalingUpdate(_Body):
    """``UpdateAutoscalingSettingsV1``: only the fields passed are changed (ranges: platform-facts §4)."""

    min_replica: MinReplica | None = None
    max_replica: MaxReplica | None = None
    autoscaling_window: AutoscalingWindow | None = None
    scale_down_delay: ScaleDownDelay | None = None
    concurrency_target: ConcurrencyTarget | None = None
    target_utilization_percentage: UtilizationPercent | None = None
    target_in_flight_tokens: InFlightTokens | None = None
    """Tokens per replica (platform-facts §4, "early access"): set, desired replicas follow in-flight
    tokens instead of concurrency; an explicit null unsets it (docs/gateway.md "Desired replicas")."""

    def changes(self) -> dict[str, Any]:
        """The fields passed, without nulls, except an explicit null of a nullable field (it unsets)."""
        out: dict[str, Any] = self.model_dump(exclude_none=True)
        for name in NULLABLE_AUTOSCALING & self.model_fields_set:
            out[name] = getattr(self, name)
        return out


class RollingDeployConfig(_Body):
    """``rolling_deploy_config`` of ``PromotionSettingsV1``; fields left out keep their value."""

    rolling_deploy_strategy: Literal["REPLICA"] | None = None
    max_surge_percent: Percent | None = None
    max_unavailable_percent: Percent | None = None
    stabilization_time_seconds: Seconds | None = None
    replica_overhead_percent: Percent | None = None


class PromotionSettings(_Body):
    """``PromotionSettingsV1``; fields left out keep their value (defaults on create)."""

    redeploy_on_promotion: Flag | None = None
    rolling_deploy: Flag | None = None
    promotion_cleanup_strategy: Literal["KEEP", "SCALE_TO_ZERO", "DEACTIVATE"] | None = None
    rolling_deploy_config: RollingDeployConfig | None = None
    ramp_up_while_promoting: Flag | None = None
    ramp_up_duration_seconds: Seconds | None = None


class BackpressureSettings(_Body):
    """``request_backpressure_settings``: ``policy`` QUEUE_ON_FULL, REJECT_ON_FULL or null."""

    policy: Literal["QUEUE_ON_FULL", "REJECT_ON_FULL"] | None = None


class BackpressureUpdate(_Body):
    """Body of ``PATCH …/deployments/{deployment_id}/request_backpressure_settings``: ``policy`` is
    required, null resets it to the default (queue)."""

    policy: Literal["QUEUE_ON_FULL", "REJECT_ON_FULL"] | None


class EnvironmentCreate(_Body):
    """Body of ``POST /v1/models/{model_id}/environments``."""

    name: Annotated[str, AfterValidator(lambda v: check_id(v, "environment name"))]
    promotion_settings: PromotionSettings | None = None
    autoscaling_settings: AutoscalingUpdate | None = None
    request_backpressure_settings: BackpressureSettings | None = None


class EnvironmentUpdate(_Body):
    """Body of ``PATCH /v1/models/{model_id}/environments/{env_name}``."""

    promotion_settings: PromotionSettings | None = None
    autoscaling_settings: AutoscalingUpdate | None = None
    request_backpressure_settings: BackpressureSettings | None = None
    autoscaling_schedule_settings: dict[str, Any] | None = None


def settings(body: BaseModel | None) -> dict[str, Any] | None:
    """The fields the client passed (nested ones too), without the nulls (autoscaling settings keep an
    explicit null of a nullable field: ``AutoscalingUpdate.changes``)."""
    if isinstance(body, AutoscalingUpdate):
        return body.changes()
    return None if body is None else body.model_dump(exclude_none=True)


class PromoteBody(_Body):
    """Body of ``POST …/environments/{env_name}/promote``; ``percent`` and ``rolling`` are our extensions.

    ``percent`` below 100 starts a rolling promotion at that share; with ``rolling: false`` it is a 400.
    """

    deployment_id: str
    scale_down_previous_deployment: bool = True
    preserve_env_instance_type: bool = True
    percent: Percent | None = None
    rolling: bool | None = None


class PercentBody(_Body):
    """Body of ``POST …/environments/{env_name}/promotion_percent`` (our extension)."""

    percent: int = Field(ge=0, le=100, strict=True)
