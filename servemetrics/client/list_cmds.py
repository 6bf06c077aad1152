"""``servemetrics model list``, ``servemetrics model environment list`` and ``servemetrics events``
(docs/management.md "Models", "Environments and promotion", "Events")."""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

import typer

from servemetrics.client.list_views import environments_table, events_table, models_table
from servemetrics.client.options import (
    EndOpt,
    KeyOpt,
    ModelIdOpt,
    ModelNameOpt,
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
from servemetrics.client.window import resolve_flags, window_line

NameOpt = Annotated[str | None, typer.Option("--name", help="Only models of this name.")]
KindOpt = Annotated[
    list[str] | None, typer.Option("--kind", help="Only events of this kind, e.g. PROMOTED (repeatable).")
]


def model_list(
    name: NameOpt = None,
    output: OutputOpt = Output.table,
    url: UrlOpt = None,
    api_key: KeyOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """The models the key may read."""
    with reporting():
        params = {} if name is None else {"name": name}
        answer = call(connect(url, api_key, profile), "listing models", "GET", "/v1/models", params=params)
    print_json(answer) if output is Output.json else typer.echo(models_table(answer), nl=False)


def environment_list(
    model_id: ModelIdOpt = None,
    model_name: ModelNameOpt = None,
    output: OutputOpt = Output.table,
    url: UrlOpt = None,
    api_key: KeyOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """A model's environments, what serves each and any promotion running."""
    with reporting():
        one_model(model_id, model_name)
        service = connect(url, api_key, profile)
        path = f"/v1/models/{quote(model_id_of(service, model_id, model_name), safe='')}/environments"
        answer = call(service, "listing environments", "GET", path)
    print_json(answer) if output is Output.json else typer.echo(environments_table(answer), nl=False)


def events(
    ctx: typer.Context,
    model_id: ModelIdOpt = None,
    model_name: ModelNameOpt = None,
    start: StartOpt = None,
    end: EndOpt = None,
    since: SinceOpt = None,
    kind: KindOpt = None,
    output: OutputOpt = Output.table,
    url: UrlOpt = None,
    api_key: KeyOpt = None,
    profile: ProfileOpt = None,
) -> None:
    """A model's events (deployments, promotions, autoscaling changes …), oldest first.

    The last hour unless --start / --end / --since say otherwise; no longest window."""
    clock = clock_of(ctx)
    with reporting():
        one_model(model_id, model_name)
        start_ms, end_ms = resolve_flags("summary", start, end, since, clock, max_ms=None)
        end_ms = clock.now_ms() if end_ms is None else end_ms
        start_ms = end_ms - 3_600_000 if start_ms is None else start_ms
        service = connect(url, api_key, profile)
        path = f"/v1/models/{quote(model_id_of(service, model_id, model_name), safe='')}/events"
        params: dict[str, str | int | list[str]] = {
            "start_epoch_millis": start_ms,
            "end_epoch_millis": end_ms,
        }
        if kind:
            params["kinds"] = kind
        answer = call(service, "listing events", "GET", path, params=params)
    typer.echo(window_line(start_ms, end_ms, None, clock.tz), err=True)
    print_json(answer) if output is Output.json else typer.echo(events_table(answer, clock.tz), nl=False)
