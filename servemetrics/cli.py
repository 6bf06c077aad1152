"""The ``servemetrics`` command: ``serve``, ``import``, ``demo``, ``version``, ``rules``, and the client
commands that read a running service (``model …``, ``loops …``, ``events``: ``servemetrics.client``,
docs/cli.md).

Wiring happens here and in ``api/app.py`` only: the config file is read here and passed down.
"""

from __future__ import annotations

import gc
import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, DownloadColumn, Progress, TimeRemainingColumn, TransferSpeedColumn

from servemetrics import __version__
from servemetrics.client.apps import events, loops_app, model_app

if TYPE_CHECKING:
    from servemetrics.config import Config
    from servemetrics.importer import Progress as ImportProgress

app = typer.Typer(
    help=(
        "Metrics for the model servers you run: requests, latency, replicas, CPU, GPU and LLM engine "
        "metrics per model, environment and deployment. Try 'servemetrics demo'; run your own with "
        "'servemetrics serve --config FILE' (docs/configuration.md); read a running service with "
        "'servemetrics model ...'."
    ),
    no_args_is_help=True,
    add_completion=False,
)
err = Console(stderr=True)

ConfigOpt = Annotated[
    Path, typer.Option("--config", "-c", help="YAML config file.", exists=True, dir_okay=False, readable=True)
]


def _fail(message: object, code: int = 2) -> NoReturn:
    """Print ``error: <message>`` as one line on stderr and exit with ``code``."""
    err.print(f"[red]error:[/red] {escape(str(message))}", soft_wrap=True)
    raise typer.Exit(code)


def _load(path: Path) -> Config:
    from servemetrics.config import ConfigError, load_config

    try:
        return load_config(path)
    except ConfigError as exc:
        _fail(exc)


@app.command(
    help=(
        "Run the service: scrape the replicas of the config, store their samples in its data_dir, and "
        "serve the metrics API, the gateway and the dashboard on its 'listen' address. A bad config, a "
        "data directory another serve holds or an unreachable registry database stops it with one "
        "error line and exit code 2."
    )
)
def serve(config: ConfigOpt) -> None:
    """Run the service: scrape the configured targets, store samples, serve the API on ``listen``.

    The registry is opened and the config applied here first, so that a bad ``data_dir``,
    ``registry_url``, unreachable database or a config the registry refuses stops with one error line
    (exit 2) before the server starts; the app's startup applies it again (idempotent). The server's
    connection limits come from ``server`` (``api.http_server``).
    """
    import uvicorn

    from servemetrics.api.app import create_app
    from servemetrics.config import ConfigError, apply_config, open_registry

    cfg = _load(config)
    try:
        registry = open_registry(cfg)
        try:
            apply_config(cfg, registry)
        finally:
            registry.close()
    except ConfigError as exc:
        _fail(f"{config}: {exc}")
    lock = _hold_data_dir(cfg.data_dir)
    try:
        _check_listen(cfg.host, cfg.port)
        app = create_app(cfg)
        freeze_startup_heap()
        uvicorn.run(app, log_level="info", **_server_options(cfg))
    finally:
        os.close(lock)
        # the frozen heap holds the app's DuckDB objects, which a frozen generation never frees: without
        # this, interpreter exit prints about 40 lines of nanobind "leaked instances" warnings
        gc.unfreeze()
        gc.collect()


def _check_listen(host: str, port: int) -> None:
    """One error line (exit 2) when ``listen`` (``host``, ``port``) cannot be bound: a port in use, an
    address not of this machine. Bound with ``SO_REUSEADDR``, as uvicorn binds it, then released."""
    import socket

    bare = host.strip("[]")
    family = socket.AF_INET6 if ":" in bare else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((bare, port))
        except OSError as exc:
            _fail(
                f"cannot listen on {host}:{port} ({exc.strerror or exc}): stop what uses it, or set "
                "`listen` in the config to a free address (for example 127.0.0.1:8322)"
            )


DATA_DIR_LOCK = "servemetrics.lock"
"""The file in ``data_dir`` a running ``serve`` holds an exclusive ``flock`` on (its PID inside)."""


def _hold_data_dir(data_dir: Path) -> int:
    """Take ``data_dir``'s lock for this ``serve`` and return its descriptor (closing it releases the lock;
    so does the process ending, however it ends). Another ``serve`` on the same ``data_dir`` would find
    its store and registry locked only after the server started, as a long traceback: this stops it
    first with one error line and exit 2 (issue 15)."""
    import fcntl

    fd = os.open(Path(data_dir) / DATA_DIR_LOCK, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        pid = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
        os.close(fd)
        _fail(
            f"data_dir {data_dir} is in use by another `servemetrics serve` (PID {pid}): stop it, "
            "or give this service another data_dir"
        )
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def freeze_startup_heap() -> None:
    """Move every object alive now (the modules imported, the app built: about 90,000) to the garbage
    collector's permanent generation (``gc.freeze``, which Python's ``gc`` docs give "to speed up
    collection"), so that full collections no longer walk them. A full collection holds the GIL, and so
    the event loop, for as long as it walks: a scrape near its ``sample_limit`` (thousands of samples
    alive while it is parsed) triggers one, which walking the startup heap too took 100-500 ms on a
    loaded 2-core machine and delayed every other target's scrape (issue 12,
    tests/reliability/test_hostile_targets.py). The frozen objects live as long as the process anyway."""
    gc.collect()
    gc.freeze()


def _server_options(cfg: Config) -> dict[str, Any]:
    """``uvicorn.run``'s host, port, HTTP protocol (``api.http_server.HeaderTimeout``: the header read
    timeout), ``timeout_keep_alive`` (seconds) and ``limit_concurrency``, from ``listen`` and ``server``."""
    from servemetrics.api.http_server import header_timeout_protocol

    server = cfg.server
    return {
        "host": cfg.host,
        "port": cfg.port,
        "http": header_timeout_protocol(server.header_timeout),
        "timeout_keep_alive": server.keep_alive_timeout,
        "limit_concurrency": server.limit_concurrency,
    }


def _progress() -> Progress:
    return Progress(
        "[progress.description]{task.description}",
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=err,
    )


@app.command(
    "import",
    help=(
        "Backfill FILE (OpenMetrics text, sample timestamps in seconds) as the samples of one replica "
        "(--model, --deployment, --replica), or of the replicas its series name in their model_id, "
        "deployment_id and replica labels: through a running service (--url and a key that may manage "
        "the models), or straight into the data_dir of --config while no service runs there."
    ),
)
def import_file(
    file: Annotated[
        Path, typer.Argument(help="OpenMetrics file with timestamps (seconds).", exists=True, dir_okay=False)
    ],
    model: Annotated[
        str | None,
        typer.Option(
            "--model", help="Model id the samples belong to (omit all three: from each series' labels)."
        ),
    ] = None,
    deployment: Annotated[str | None, typer.Option("--deployment", help="Deployment id.")] = None,
    replica: Annotated[str | None, typer.Option("--replica", help="Replica id.")] = None,
    url: Annotated[str | None, typer.Option("--url", help="Base URL of a running service.")] = None,
    api_key: Annotated[
        str | None,
        typer.Option("--api-key", envvar="SERVEMETRICS_API_KEY", help="Key for --url (manage-capable)."),
    ] = None,
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="Config whose data_dir to write (when no --url).")
    ] = None,
) -> None:
    """Backfill FILE as samples of one replica, or of the replicas its series name, through a running
    service (--url) or into --config's data."""
    from servemetrics import importer

    target = _import_target(model, deployment, replica)
    size = os.path.getsize(file)
    with _progress() as progress:
        task = progress.add_task(f"importing {file.name}", total=size)

        def advance(done: int, total: int | None) -> None:
            progress.update(task, completed=done)

        try:
            stored = _import(file, target, url, api_key, config, advance)
        except importer.ImportFailed as exc:
            err.print(f"[red]error:[/red] {exc}")
            raise typer.Exit(1) from exc
    err.print(f"stored {stored:,} samples")
    if stored == 0:
        err.print(
            "nothing was stored: no sample of the file maps to a catalog metric or engine metric, or all "
            "were already stored (docs/ingest.md lists what each source adapter keeps)"
        )


def _import_target(
    model: str | None, deployment: str | None, replica: str | None
) -> tuple[str, str, str] | None:
    """(model, deployment, replica) given all three, ``None`` given none; exit code 2 given some."""
    if model is not None and deployment is not None and replica is not None:
        return model, deployment, replica
    if model is None and deployment is None and replica is None:
        return None
    err.print(
        "[red]error:[/red] give --model, --deployment and --replica together (a file of one replica), "
        "or none of them (every series names its own in model_id, deployment_id and replica labels)"
    )
    raise typer.Exit(2)


def _import(
    file: Path,
    replica: tuple[str, str, str] | None,
    url: str | None,
    api_key: str | None,
    config: Path | None,
    advance: ImportProgress,
) -> int:
    """Import ``file`` as samples of ``replica`` (model, deployment, replica ids; ``None``: those of each
    series' labels) through the service at
    ``url`` or into ``config``'s data directory; the samples stored. Exit code 2 when neither (or no
    ``api_key`` for ``url``) is given; ``importer.ImportFailed`` as the importer raises it."""
    from servemetrics import importer

    if url is not None:
        if not api_key:
            err.print("[red]error:[/red] --url needs --api-key (or SERVEMETRICS_API_KEY)")
            raise typer.Exit(2)
        return importer.via_service(file, url, api_key, replica, advance)
    if config is not None:
        return importer.into_data_dir(_load(config), file, replica, advance)
    err.print("[red]error:[/red] give --url URL --api-key KEY (a running service) or --config FILE")
    raise typer.Exit(2)


@app.command(
    help=(
        "Try it: the service with a small language model on four replicas of two deployments, their "
        "LLM engine and GPU metrics, a load generator, and a promotion from d1 to d2 half way. It "
        "prints the API key and the dashboard's URL, then tables; it stops after --duration, or on "
        "Ctrl-C with the final tables."
    )
)
def demo(
    port: Annotated[int, typer.Option("--port", help="Port of the service (API and gateway).")] = 8321,
    api_key: Annotated[
        str | None, typer.Option("--api-key", help="The demo organization's key (default: a random one).")
    ] = None,
    duration: Annotated[
        float | None, typer.Option("--duration", min=10, help="Seconds of load, then stop (default: Ctrl-C).")
    ] = None,
    rate: Annotated[float, typer.Option("--rate", min=0.1, help="Mean requests per second (Poisson).")] = 4.0,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", help="Keep config, data and logs here (default: a temp dir).")
    ] = None,
) -> None:
    """Run the service, a real model on four replicas, replayed GPU/engine exporters and load."""
    from servemetrics.demo.run import Options, run_demo

    _check_listen("127.0.0.1", port)
    code = run_demo(Options(port, api_key, duration, rate, data_dir))
    if code:
        raise typer.Exit(code)


@app.command()
def version() -> None:
    """Print the version."""
    typer.echo(f"servemetrics {__version__}")


@app.command(
    help=(
        "Print Prometheus recording rules (YAML) that turn exporter series (vLLM, SGLang, DCGM, kubelet "
        "...) into the service's metrics, for a Prometheus or VictoriaMetrics that scrapes your "
        "replicas itself (docs/recording-rules.md). A bad config: one error line, exit code 2."
    )
)
def rules(config: ConfigOpt) -> None:
    """Print the Prometheus recording rules (YAML) that turn exporter series into canonical series.

    For an engine whose own agent scrapes (docs/recording-rules.md); the groups are evaluated every
    ``scrape_interval`` of the config. A bad config is one error line and exit code 2.
    """
    from servemetrics.ingest.recording_rules import NotCompilableError, render

    cfg = _load(config)
    try:
        text = render(cfg.scrape_interval)
    except NotCompilableError as exc:
        _fail(f"the adapter table cannot be compiled to recording rules: {exc}", code=1)
    typer.echo(text, nl=False)


app.add_typer(model_app, name="model")
app.add_typer(loops_app, name="loops")
app.command("events")(events)


def main() -> None:
    """Entry point of the ``servemetrics`` script."""
    app()
