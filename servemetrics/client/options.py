"""The flags the client commands share (the platform CLI's names, platform-facts §3) and what every
command does around its call: find the service, report a failure as one ``error:`` line on stderr with
its exit code, show a progress bar on stderr while a call runs, print JSON."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

from servemetrics.client.api import EXIT_NOT_FOUND, EXIT_USAGE, EXIT_VALIDATION, ClientError, Service
from servemetrics.client.settings import resolve_service
from servemetrics.client.window import Clock
from servemetrics.timeutil import wall_clock_ms


class Mode(StrEnum):
    """``--mode``: sent upper-cased as the API's ``mode``."""

    current = "current"
    summary = "summary"
    series = "series"


class Output(StrEnum):
    """``--output``: a table, or the API's answer unchanged as indented JSON."""

    table = "table"
    json = "json"


UrlOpt = Annotated[
    str | None,
    typer.Option(
        "--url",
        envvar="SERVEMETRICS_URL",
        help="Service URL (default: the profile's, else http://127.0.0.1:8321).",
    ),
]
KeyOpt = Annotated[
    str | None, typer.Option("--api-key", envvar="SERVEMETRICS_API_KEY", help="API key (else the profile's).")
]
ProfileOpt = Annotated[
    Path | None,
    typer.Option(
        "--profile",
        envvar="SERVEMETRICS_PROFILE",
        help="YAML file with url and api_key (default: ~/.config/servemetrics/profile.yaml).",
    ),
]
ModelIdOpt = Annotated[str | None, typer.Option("--model-id", help="Model id.")]
ModelNameOpt = Annotated[str | None, typer.Option("--model-name", help="Model name (instead of --model-id).")]
ModeOpt = Annotated[Mode, typer.Option("--mode", case_sensitive=False, help="current, summary or series.")]
StartOpt = Annotated[str | None, typer.Option("--start", help="ISO-8601 start (local time zone if none).")]
EndOpt = Annotated[str | None, typer.Option("--end", help="ISO-8601 end (local time zone if none).")]
SinceOpt = Annotated[
    str | None, typer.Option("--since", help="The last 90s, 15m, 1h30m … 7d (not with --start/--end).")
]
MetricOpt = Annotated[list[str] | None, typer.Option("--metric", help="A metric name (repeatable).")]
NoChartOpt = Annotated[bool, typer.Option("--no-chart", help="Series mode: a per-step table, no sparklines.")]
OutputOpt = Annotated[Output, typer.Option("--output", "-o", case_sensitive=False, help="table or json.")]


def clock_of(ctx: typer.Context) -> Clock:
    """The clock a test passed as the context's ``obj``, else the wall clock in the local time zone."""
    return ctx.obj if isinstance(ctx.obj, Clock) else Clock(wall_clock_ms)


def connect(url: str | None, key: str | None, profile: Path | None) -> Service:
    """The service of the flags (their environment variables) and the profile (``settings``)."""
    return resolve_service(url, key, profile, os.environ)


@contextmanager
def reporting() -> Iterator[None]:
    """Turn a ``ClientError`` inside into ``error: <message>`` on stderr and its exit code."""
    try:
        yield
    except ClientError as exc:
        typer.echo(f"error: {exc.message}", err=True)
        raise typer.Exit(exc.exit_code) from None


def call(service: Service, what: str, method: str, path: str, **kw: Any) -> Any:
    """``service.call`` with a pulsing progress bar on stderr while it runs (only on a terminal; it is
    removed when the answer arrives)."""
    console = Console(stderr=True)
    columns = (SpinnerColumn(), TextColumn(what), BarColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True, disable=not console.is_terminal) as bar:
        bar.add_task(what, total=None)
        return service.call(method, path, **kw)


def print_json(answer: Any) -> None:
    """``answer`` as JSON indented by two spaces, keys in the service's order (``jq`` reads it)."""
    typer.echo(json.dumps(answer, indent=2, ensure_ascii=False))


def one_model(model_id: str | None, model_name: str | None) -> None:
    """Exactly one of ``--model-id`` and ``--model-name``.

    Raises:
        ClientError: (exit 2) neither or both.
    """
    if (model_id is None) == (model_name is None):
        raise ClientError("give --model-id or --model-name (one of them)", EXIT_USAGE)


def model_id_of(service: Service, model_id: str | None, model_name: str | None) -> str:
    """``model_id``, or the id of the one model named ``model_name`` (``GET /v1/models?name=``).

    Raises:
        ClientError: no model of that name (exit 4), several (exit 5: pass --model-id), or the call's.
    """
    if model_id is not None:
        return model_id
    models = service.call("GET", "/v1/models", params={"name": str(model_name)})["models"]
    if not models:
        raise ClientError(
            f"no model named {model_name!r}; `servemetrics model list` shows yours", EXIT_NOT_FOUND
        )
    if len(models) > 1:
        ids = ", ".join(m["id"] for m in models)
        raise ClientError(
            f"{len(models)} models are named {model_name!r} ({ids}); pass --model-id", EXIT_VALIDATION
        )
    return str(models[0]["id"])
