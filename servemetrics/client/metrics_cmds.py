"""``servemetrics model environment metrics``, ``servemetrics model deployment metrics`` and
``servemetrics loops deployment metrics`` (platform-facts §3 "``baseten`` CLI"; the routes of
docs/management.md and docs/loops.md). Flags are checked before any call; the ``Window:`` line goes to
stderr, the table or JSON to stdout."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import quote

import typer

from servemetrics.client.api import EXIT_USAGE, ClientError, Params
from servemetrics.client.charts import chart_table, step_table
from servemetrics.client.loops_view import loops_series
from servemetrics.client.options import (
    EndOpt,
    KeyOpt,
    MetricOpt,
    Mode,
    ModelIdOpt,
    ModelNameOpt,
    ModeOpt,
    NoChartOpt,
    Output,
    OutputOpt,
    ProfileOpt,
    SinceOpt,
    StartOpt,
    UrlOpt,
    call,
    clock_of,
    connect,
    model_id_of,
    one_model,
    print_json,
    reporting,
)
from servemetrics.client.tables import metric_series, value_table
from servemetrics.client.window import HOUR_MS, Clock, check_window, resolve_flags, window_line

NO_METRICS = (
    "no metrics: none of those asked for has data for this deployment or environment (the service "
    "leaves out the ones that do not apply)"
)
EnvOpt = Annotated[str, typer.Option("--environment", help="Environment name.")]
DeploymentOpt = Annotated[
    str, typer.Option("--deployment-id", help="Deployment id (or production / development).")
]
StepOpt = Annotated[int | None, typer.Option("--step-seconds", min=1, help="Seconds per point.")]
DivisorOpt = Annotated[
    int | None, typer.Option("--time-divisor-seconds", min=1, help="Request volumes per N s (default 1).")
]


def _query(mode: Mode, window: tuple[int | None, int | None], metrics: list[str] | None) -> Params:
    params: dict[str, str | int | list[str]] = {"mode": mode.value.upper()}
    for name, value in zip(("start_epoch_millis", "end_epoch_millis"), window, strict=True):
        if value is not None:
            params[name] = value
    if metrics:
        params["metrics"] = metrics
    return params


def show_metrics(answer: dict[str, Any], output: Output, no_chart: bool, clock: Clock) -> None:
    """The ``Window:`` line on stderr, then the answer as JSON, the current / summary table, the
    sparklines or (``no_chart``) the per-step table on stdout."""
    typer.echo(
        window_line(
            answer["start_epoch_millis"], answer["end_epoch_millis"], answer["step_seconds"], clock.tz
        ),
        err=True,
    )
    if output is Output.json:
        print_json(answer)
    elif not answer["metric_descriptors"]:
        typer.echo(NO_METRICS, err=True)
    elif answer["mode"] != "SERIES":
        typer.echo(value_table(answer), nl=False)
    else:
        stamps, series = metric_series(answer)
        typer.echo(step_table(stamps, series, clock.tz) if no_chart else chart_table(series), nl=False)


@dataclass(frozen=True)
class MetricsFlags:
    """The flags both model metrics commands take, as given."""

    mode: Mode
    start: str | None
    end: str | None
    since: str | None
    metric: list[str] | None
    no_chart: bool
    output: Output
    url: str | None
    api_key: str | None
    profile: Path | None


def _model_metrics(
    ctx: typer.Context, scope: str, model: tuple[str | None, str | None], flags: MetricsFlags
) -> None:
    """The shared body of both model metrics commands: ``scope`` is the path after the model
    (``environments/production``)."""
    clock = clock_of(ctx)
    with reporting():
        one_model(*model)
        window = resolve_flags(flags.mode.value, flags.start, flags.end, flags.since, clock)
        service = connect(flags.url, flags.api_key, flags.profile)
        model_id = model_id_of(service, *model)
        path = f"/v1/models/{quote(model_id, safe='')}/{scope}/metrics"
        params = _query(flags.mode, window, flags.metric)
        answer = call(service, "querying metrics", "GET", path, params=params)
    show_metrics(answer, flags.output, flags.no_chart, clock)


def environment_metrics(
    ctx: typer.Context,
    model_id: ModelIdOpt = None,
    model_name: ModelNameOpt = None,
    environment: EnvOpt = "production",
    mode: ModeOpt = Mode.current,
    start: StartOpt = None,
    end: EndOpt = None,
    since: SinceOpt = None,
    metric: MetricOpt = None,
    no_chart: NoChartOpt = False,
    output: OutputOpt = Output.table,
    url: UrlOpt = None,
    api_key: KeyOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Metrics of an environment, across every deployment that served it (split at promotions)."""
    flags = MetricsFlags(mode, start, end, since, metric, no_chart, output, url, api_key, profile)
    _model_metrics(ctx, f"environments/{quote(environment, safe='')}", (model_id, model_name), flags)


def deployment_metrics(
    ctx: typer.Context,
    deployment_id: DeploymentOpt,
    model_id: ModelIdOpt = None,
    model_name: ModelNameOpt = None,
    mode: ModeOpt = Mode.current,
    start: StartOpt = None,
    end: EndOpt = None,
    since: SinceOpt = None,
    metric: MetricOpt = None,
    no_chart: NoChartOpt = False,
    output: OutputOpt = Output.table,
    url: UrlOpt = None,
    api_key: KeyOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Metrics of one deployment of a model."""
    flags = MetricsFlags(mode, start, end, since, metric, no_chart, output, url, api_key, profile)
    _model_metrics(ctx, f"deployments/{quote(deployment_id, safe='')}", (model_id, model_name), flags)


def loops_window(start: str | None, end: str | None, since: str | None, clock: Clock) -> tuple[int, int]:
    """The Loops window, resolved here (the answer does not echo it): ``[start, end)`` epoch ms, end
    defaulting to now, start to end − 1 h, as the service's defaults.

    Raises:
        ClientError: (exit 2) the checks of ``resolve_flags`` and ``check_window``.
    """
    start_ms, end_ms = resolve_flags("series", start, end, since, clock)
    end_ms = clock.now_ms() if end_ms is None else end_ms
    start_ms = end_ms - HOUR_MS if start_ms is None else start_ms
    check_window(start_ms, end_ms)
    return start_ms, end_ms


def loops_metrics(
    ctx: typer.Context,
    deployment_id: DeploymentOpt,
    mode: ModeOpt = Mode.series,
    start: StartOpt = None,
    end: EndOpt = None,
    since: SinceOpt = None,
    step_seconds: StepOpt = None,
    time_divisor_seconds: DivisorOpt = None,
    no_chart: NoChartOpt = False,
    output: OutputOpt = Output.table,
    url: UrlOpt = None,
    api_key: KeyOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """Per-node GPU / CPU / memory / storage and request series of a trainer (Loops) deployment."""
    clock = clock_of(ctx)
    with reporting():
        if mode is not Mode.series:
            raise ClientError(
                f"--mode {mode.value}: the Loops endpoint answers series only; use --mode series (the "
                "default), or the sampler's `servemetrics model deployment metrics` for one value",
                EXIT_USAGE,
            )
        start_ms, end_ms = loops_window(start, end, since, clock)
        service = connect(url, api_key, profile)
        body = {"start_epoch_millis": start_ms, "end_epoch_millis": end_ms}
        for name, value in (("step_seconds", step_seconds), ("time_divisor_seconds", time_divisor_seconds)):
            if value is not None:
                body[name] = value
        path = f"/v1/loops/deployments/{quote(deployment_id, safe='')}/metrics"
        answer = call(service, "querying metrics", "POST", path, body=body)
    step, stamps, series = loops_series(answer, start_ms, end_ms, step_seconds)
    typer.echo(window_line(start_ms, end_ms, step, clock.tz), err=True)
    if output is Output.json:
        print_json(answer)
    else:
        typer.echo(step_table(stamps, series, clock.tz) if no_chart else chart_table(series), nl=False)
