"""``run_demo``: start everything, drive load and a rolling promotion, print tables, stop everything.

Order: four replica processes (d1's with vLLM-format engine metrics, d2's with SGLang's), the DCGM
replay and the trainer, then ``servemetrics serve`` on the generated config; wait until all are healthy;
set the deployments' autoscaling settings through the management API; start the webhook receiver (when
the service has ``async_predict``), the load and the trainer's load (``TRAINER_RATE`` steps a second);
print the first tables (and the Loops table) once requests show up in the API; promote ``production``
to ``d2`` at 25 % half way through (or after 60 s), then 50 % and 100 %; at the end stop the load, wait
one scrape, print the tables again. Every child is stopped on the way out, also on Ctrl-C and SIGTERM.
"""

from __future__ import annotations

import secrets
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import httpx
from rich.console import Console
from rich.markup import escape

from servemetrics.demo import loops_report, model_api_report, report
from servemetrics.demo.chat_load import ChatLoad
from servemetrics.demo.load import LoadGenerator, WebhookReceiver, has_async_route
from servemetrics.demo.processes import Children, free_port, free_ports, wait_http
from servemetrics.demo.topology import (
    ENVIRONMENT,
    MODEL,
    MODEL_API,
    TEAM_LIMITS,
    TRAINER,
    Topology,
    make_topology,
    service_config,
    write_config,
)
from servemetrics.demo.trainer_load import TrainerLoad

SCRAPE_S = 5.0
TRAINER_RATE = 1.0
"""Training steps per second sent to the demo trainer."""
CHAT_RATE = 1.0
"""Model API calls per second each team sends to ``demo-chat``."""


class Terminated(Exception):
    """SIGTERM arrived."""


@dataclass
class Options:
    """What ``servemetrics demo`` was asked for."""

    port: int = 8321
    api_key: str | None = None
    duration: float | None = None
    rate: float = 4.0
    data_dir: Path | None = None


def promotion_plan(duration: float | None) -> list[tuple[float, str, int]]:
    """``(seconds after the load started, action, percent)``: promote at 25 %, then 50 %, then 100 %."""
    start = duration / 2 if duration else 60.0
    gap = (duration - start) / 3 if duration else 30.0
    return [
        (start, "promote", 25),
        (start + gap, "promotion_percent", 50),
        (start + 2 * gap, "promotion_percent", 100),
    ]


def promotion_request(action: str, percent: int) -> tuple[str, dict[str, object]]:
    """``(route under the environment, JSON body)`` of one step of ``promotion_plan``: ``promote``
    starts the rolling promotion of d2 at ``percent``; ``promotion_percent`` moves it (100 completes it).
    Each records its event (docs/management.md "Environments and promotion")."""
    body: dict[str, object] = {"percent": percent}
    if action == "promote":
        body["deployment_id"] = "d2"
    return action, body


def _on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise Terminated()


class Demo:
    """One run; ``run()`` returns the exit code (0, 130 on Ctrl-C, 143 on SIGTERM)."""

    def __init__(self, options: Options, console: Console) -> None:
        self.o = options
        self.console = console
        self.key = options.api_key or f"sm-demo-{secrets.token_hex(8)}"
        self.tmp = None if options.data_dir else Path(tempfile.mkdtemp(prefix="servemetrics-demo-"))
        self.dir: Path = options.data_dir or self.tmp or Path(".")
        self.children = Children(self._mkdir(self.dir / "logs"))
        self.client = httpx.Client(headers={"Authorization": f"Api-Key {self.key}"}, timeout=30)
        self.team_keys = {team: f"{self.key}-{team}" for team in TEAM_LIMITS}
        """Each team's ``WORKSPACE_INVOKE`` key: the organization's key and ``-<team>``."""
        self.load: LoadGenerator | None = None
        self.chat: ChatLoad | None = None
        self.trainer_load: TrainerLoad | None = None
        self.webhooks: WebhookReceiver | None = None
        self.load_t0 = time.monotonic()
        self.load_started_ms = int(time.time() * 1000)
        """When the load started: the tables' windows start there, when the data does."""

    @staticmethod
    def _mkdir(path: Path) -> Path:
        path.mkdir(parents=True, exist_ok=True)
        return path

    @property
    def env_url(self) -> str:
        return f"{self.topo.base}/v1/models/{MODEL}/environments/{ENVIRONMENT}"

    def run(self) -> int:
        previous = signal.signal(signal.SIGTERM, _on_sigterm)
        try:
            self._start()
            self._drive()
            self._finish("at the end")
            return 0
        except KeyboardInterrupt:
            self._interrupted()
            return 130
        except Terminated:
            self.console.print("terminated: stopping")
            return 143
        except RuntimeError as exc:  # a child process exited, or did not come up (Children.check)
            self.console.print(f"[red]error:[/red] {escape(str(exc))}")
            return 1
        finally:
            self._shutdown()
            signal.signal(signal.SIGTERM, previous)

    def _start(self) -> None:
        self.topo: Topology = make_topology(self.o.port, free_ports(6, taken=frozenset({self.o.port})))
        cfg = service_config(self.topo, self.dir / "data", self.key, f"{SCRAPE_S:g}s", self.team_keys)
        config = write_config(self.dir / "servemetrics.yaml", cfg)
        self.console.print(f"starting in {self.dir} (logs in {self.dir / 'logs'}); training the models…")
        for r in self.topo.replicas:
            args = ["--port", str(r.port), "--size", r.size, "--token-ms", f"{r.token_ms:g}", "--name", r.id]
            self.children.start(r.id, ["-m", "servemetrics.demo.replica", *args, "--engine", r.engine])
        self.children.start("dcgm-replay", ["-m", "servemetrics.demo.replay", *self.topo.replay_args()])
        trainer_args = ["--port", str(self.topo.trainer_port), *self.topo.trainer_node_args()]
        self.children.start("trainer", ["-m", "servemetrics.demo.trainer", *trainer_args])
        self.children.start("servemetrics-serve", ["-m", "servemetrics", "serve", "--config", str(config)])
        wait_http(f"{self.topo.base}/healthz", self.children)
        for r in self.topo.replicas:
            wait_http(f"{r.url}/health", self.children, timeout=120)
        wait_http(f"{self.topo.trainer_url}/health", self.children)
        for dep in self.topo.deployments():
            self.client.patch(
                f"{self.topo.base}/v1/models/{MODEL}/deployments/{dep}/autoscaling_settings",
                json={"min_replica": 1, "max_replica": 6, "concurrency_target": 2},
            ).raise_for_status()
        self.async_ok = has_async_route(self.topo.base)
        if self.async_ok:
            self.webhooks = WebhookReceiver(free_port())
        self._banner()

    def _banner(self) -> None:
        b = self.topo.base
        self.console.print(f"\n[bold]servemetrics demo[/bold] — API key: [bold]{self.key}[/bold]")
        self.console.print(f"  dashboard {b}/  (sign in with the key; GPU usage: {b}/#/gpu-usage)")
        self.console.print(f"  API      {b}/v1/models/{MODEL}/environments/{ENVIRONMENT}/metrics")
        self.console.print(f"  OpenAPI  {b}/docs")
        self.console.print(f"  metrics  {b}/metrics  (export, with the key; own: {b}/service/metrics)")
        self.console.print(f"  predict  {b}/v1/models/{MODEL}/environments/{ENVIRONMENT}/predict")
        for r in self.topo.replicas:
            self.console.print(
                f"  replica  {r.id}: {r.url} ({r.size} model, {r.token_ms:g} ms/token, {r.engine} metrics)"
            )
        self.console.print(f"  replay   dcgm-replay :{self.topo.dcgm_port}")
        self.console.print(
            f"  loops    POST {b}/v1/loops/deployments/{TRAINER}/metrics (trainer {self.topo.trainer_url}, "
            f"nodes leader-0 and worker-1, {TRAINER_RATE:g} training step/s)"
        )
        for team, key in self.team_keys.items():
            limits = ", ".join(f"{v:g} {k.replace('_', ' ')}" for k, v in TEAM_LIMITS[team].items())
            self.console.print(f"  team     {team}: key {key} ({limits} on {MODEL_API})")
        self.console.print(
            f"  chat     POST {b}/v1/chat/completions, POST {b}/v1/completions (model {MODEL_API!r}; "
            f"the openai client, {CHAT_RATE:g} call/s per team)"
        )
        self.console.print(f"  model API metrics {b}/v1/model_apis/{MODEL_API}/metrics")
        asyncs = f"on, webhooks to {self.webhooks.url}" if self.webhooks else "off (no async_predict route)"
        self.console.print(f"  load     Poisson {self.o.rate:g}/s; async requests {asyncs}\n")

    def _drive(self) -> None:
        self.load = LoadGenerator(
            self.topo.base,
            self.key,
            MODEL,
            ENVIRONMENT,
            self.o.rate,
            self.webhooks.url if self.webhooks else None,
        )
        self.load.start()
        self.chat = ChatLoad(self.topo.base, self.team_keys, MODEL_API, CHAT_RATE)
        self.chat.start()
        self.trainer_load = TrainerLoad(f"{self.topo.trainer_url}/v1/train_step", TRAINER_RATE)
        self.trainer_load.start()
        t0 = self.load_t0 = time.monotonic()
        self.load_started_ms = int(time.time() * 1000)
        plan = promotion_plan(self.o.duration)
        shown = False
        next_status = 15.0
        while self.o.duration is None or time.monotonic() - t0 < self.o.duration:
            time.sleep(0.5)
            self.children.check()
            elapsed = time.monotonic() - t0
            while plan and plan[0][0] <= elapsed:
                _, action, percent = plan.pop(0)
                self._promote(action, percent)
            if not shown and elapsed >= SCRAPE_S and self._has_requests():
                self._tables("after the first scrapes")
                shown = True
            if elapsed >= next_status:
                self._status(elapsed)
                next_status += 15.0

    def _finish(self, when: str, webhooks_s: float = 30.0) -> None:
        """Stop the load, let the last answers arrive (webhooks: at most ``webhooks_s`` s; one more scrape),
        then print the client's counts and the final tables."""
        if self.load is None:
            return
        self.load.stop()
        if self.chat is not None:
            self.chat.stop()
        if self.trainer_load is not None:
            self.trainer_load.stop()
        self._await_webhooks(webhooks_s)
        time.sleep(SCRAPE_S + 1.5)  # one more scrape of the gateway and replicas
        self._status(time.monotonic() - self.load_t0)
        self._tables(when)

    def _interrupted(self) -> None:
        """Ctrl-C: the final tables as at the end of a run, unless a second Ctrl-C skips them."""
        if self.load is None:
            self.console.print("\ninterrupted: stopping")
            return
        self.console.print(
            f"\ninterrupted: one more scrape ({SCRAPE_S + 1.5:g} s), then the final tables "
            "(Ctrl-C again to skip them)"
        )
        try:
            self._finish("at the interruption", webhooks_s=5.0)
        except KeyboardInterrupt:
            self.console.print("skipped the final tables: stopping")

    def _await_webhooks(self, at_most_s: float) -> None:
        """Wait (at most ``at_most_s`` seconds) until every accepted async request's webhook arrived, so
        the final tables count what the client counts."""
        if self.load is None or self.webhooks is None:
            return
        accepted = sum(n for k, n in self.load.counts.items() if k.startswith("async 2"))
        deadline = time.monotonic() + at_most_s
        while len(self.webhooks.received) < accepted and time.monotonic() < deadline:
            time.sleep(0.2)

    def _promote(self, action: str, percent: int) -> None:
        route, body = promotion_request(action, percent)
        resp = self.client.post(f"{self.env_url}/{route}", json=body)
        word = "rolling promotion to d2 at" if action == "promote" else "promotion moved to"
        if resp.is_success:
            self.console.print(f"[bold]{word} {percent} %[/bold] ({action})")
        else:
            self.console.print(
                f"[red]{action} {percent} % failed:[/red] {resp.status_code} {resp.text[:200]}"
            )

    def _has_requests(self) -> bool:
        try:
            body = report.query(self.client, f"{self.env_url}/metrics", "CURRENT")
        except httpx.HTTPError:
            return False
        return any(v for (m, _), v in report.values(body).items() if m == "baseten_inference_requests_total")

    def _status(self, elapsed: float) -> None:
        counts = dict(sorted(self.load.counts.items())) if self.load else {}
        hooks = f", webhooks received {len(self.webhooks.received)}" if self.webhooks else ""
        steps = dict(sorted(self.trainer_load.counts.items())) if self.trainer_load else {}
        chat = self.chat.snapshot()[0] if self.chat else {}
        calls = "; ".join(f"{t} {dict(sorted(c.items()))}" for t, c in chat.items())
        self.console.print(
            f"[{elapsed:5.0f} s] client outcomes {counts}{hooks}; trainer steps {steps}; "
            f"{MODEL_API} calls {calls}"
        )

    def _tables(self, when: str) -> None:
        now = int(time.time() * 1000)
        start = max(self.load_started_ms, now - 3_600_000)
        url = f"{self.env_url}/metrics"
        metrics = report.SUMMARY_METRICS + (report.ASYNC_METRICS if self.async_ok else [])
        try:
            current = report.query(self.client, url, "CURRENT")
            summary = report.query(self.client, url, "SUMMARY", metrics, start, now)
            series = report.query(self.client, url, "SERIES", report.SERIES_METRICS, start, now)
        except httpx.HTTPError as exc:
            self.console.print(f"[red]metrics API call failed:[/red] {exc}")
            return
        self.console.print(f"\n[bold]Tables {when}[/bold] (GET {url})")
        self.console.print(report.table(current, "CURRENT (default metrics)"))
        self.console.print(report.table(summary, "SUMMARY since the load started"))
        final = when != "after the first scrapes"
        if self.load is not None and final:
            hooks = self.webhooks.received if self.webhooks else []
            line = report.agreement(dict(self.load.counts), hooks, summary, self._forwarded_calls())
            self.console.print(line, soft_wrap=True)
        self.console.print(report.table(series, f"SERIES, last steps of {series.get('step_seconds')} s"))
        self._engine_tables(start, now)
        self._model_api_table(start, now, final)
        try:
            loops = loops_report.query(self.client, self.topo.base, TRAINER, start, now)
        except httpx.HTTPError as exc:
            self.console.print(f"[red]Loops metrics call failed:[/red] {exc}")
            return
        self.console.print(loops_report.table(loops))

    def _forwarded_calls(self) -> dict[str, int] | None:
        """The Model API calls the gateway sent to the environment's replicas, by status class (every
        answer but the teams' rate-limited 429s), as the client counted them."""
        if self.chat is None:
            return None
        out = {"2xx": 0, "4xx": 0, "5xx": 0}
        for counts in self.chat.snapshot()[0].values():
            for c in out:
                out[c] += counts.get(c, 0) - (counts.get("rate limited", 0) if c == "4xx" else 0)
        return out

    def _model_api_table(self, start: int, now: int, final: bool) -> None:
        """The Model API's SUMMARY per team since the load started; at the end, each team's figures
        against what the client counted."""
        try:
            body = model_api_report.query(self.client, self.topo.base, MODEL_API, start, now)
        except httpx.HTTPError as exc:
            self.console.print(f"[red]Model API metrics of {MODEL_API} failed:[/red] {exc}")
            return
        title = f"MODEL API {MODEL_API} SUMMARY since the load started, per team"
        self.console.print(model_api_report.table(body, title))
        if final and self.chat is not None:
            counts, tokens = self.chat.snapshot()
            for line in model_api_report.agreement(counts, tokens, body):
                self.console.print(line, soft_wrap=True)

    def _engine_tables(self, start: int, now: int) -> None:
        """Per deployment, a SUMMARY since the load started of the engine metrics its replicas expose."""
        engines = {r.deployment: r.engine for r in self.topo.replicas}
        for dep, engine in sorted(engines.items()):
            url = f"{self.topo.base}/v1/models/{MODEL}/deployments/{dep}/metrics"
            try:
                body = report.query(self.client, url, "SUMMARY", report.ENGINE_METRICS[engine], start, now)
            except httpx.HTTPError as exc:
                self.console.print(f"[red]engine metrics of {dep} failed:[/red] {exc}")
                continue
            title = f"ENGINE {dep} ({engine} format) SUMMARY since the load started"
            self.console.print(report.table(body, title))

    def _shutdown(self) -> None:
        try:
            if self.load is not None:
                self.load.stop()
            if self.chat is not None:
                self.chat.stop()
            if self.trainer_load is not None:
                self.trainer_load.stop()
            if self.webhooks is not None:
                self.webhooks.close()
        finally:
            self.children.stop_all()
            self.client.close()
            if self.tmp is not None:
                shutil.rmtree(self.tmp, ignore_errors=True)
        self.console.print("stopped every process")


def run_demo(options: Options, console: Console | None = None) -> int:
    """Run the demo; the exit code."""
    if console is None:
        console = Console()
        if not console.is_terminal:
            console = Console(width=120)  # a log file or pipe: room for the tables
    return Demo(options, console).run()
