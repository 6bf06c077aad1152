"""The Typer sub-apps of the client commands, registered by ``cli.py``: ``model`` (``list``,
``environment list|metrics``, ``deployment metrics``), ``loops`` (``deployment metrics``) and the
``events`` command."""

from __future__ import annotations

import typer

from servemetrics.client.list_cmds import environment_list, events, model_list
from servemetrics.client.metrics_cmds import deployment_metrics, environment_metrics, loops_metrics


def _group(help_text: str) -> typer.Typer:
    return typer.Typer(help=help_text, no_args_is_help=True, add_completion=False)


model_app = _group("Read a running service: models, their environments and deployments, their metrics.")
model_app.command("list")(model_list)
environment_app = _group("A model's environments and their metrics.")
environment_app.command("list")(environment_list)
environment_app.command("metrics")(environment_metrics)
deployment_app = _group("A model's deployments' metrics.")
deployment_app.command("metrics")(deployment_metrics)
model_app.add_typer(environment_app, name="environment")
model_app.add_typer(deployment_app, name="deployment")

loops_app = _group("Read a running service: trainer (Loops) deployments' metrics.")
loops_deployment_app = _group("A trainer (Loops) deployment's metrics.")
loops_deployment_app.command("metrics")(loops_metrics)
loops_app.add_typer(loops_deployment_app, name="deployment")

__all__ = ["events", "loops_app", "model_app"]
