"""Debian's ``prometheus`` and ``victoria-metrics`` as real processes on loopback, for engine tests.

``Engine.start()`` / ``stop()`` (SIGTERM, the engines flush on it) keep the port and the data directory,
so a test can take an engine down and bring it back. When a binary is missing the tests skip, unless
``CI`` is set: then they fail (``scripts/install`` installs both packages).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from servemetrics.store.prometheus import EngineOptions
from servemetrics.store.promql import Flavor
from tests.processes import free_port, wait_http

BINARIES = {Flavor.PROMETHEUS: "prometheus", Flavor.VICTORIAMETRICS: "victoria-metrics"}

PROMETHEUS_CONFIG = """\
# out-of-order ingestion (Prometheus >= 2.39): late samples and backfill within two days are accepted
storage:
  tsdb:
    out_of_order_time_window: 2d
"""


@dataclass
class Engine:
    """One engine process: ``flavor``, its ``port`` and data under ``root``."""

    flavor: Flavor
    root: Path
    port: int = field(default_factory=free_port)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        """Base URL of its HTTP API."""
        return f"http://127.0.0.1:{self.port}"

    def options(self, buffer_dir: Path) -> EngineOptions:
        """``EngineOptions`` for a store on this engine with its remote_write buffer in ``buffer_dir``."""
        return EngineOptions(self.flavor, self.url, self.url + "/api/v1/write", buffer_dir)

    def wait_for(
        self, model_id: str, samples: int, start_ms: int, end_ms: int, deadline_s: float = 20
    ) -> None:
        """Poll until the engine returns ``samples`` samples of ``model_id`` in ``[start_ms, end_ms)``
        (VictoriaMetrics makes new samples searchable about a second after it takes them)."""
        expr = f'{{model_id="{model_id}"}}[{end_ms - start_ms}ms]'  # raw samples, counted here
        at = f"{(end_ms - 1) // 1000}.{(end_ms - 1) % 1000:03d}"
        stop = time.monotonic() + deadline_s
        seen = None
        while time.monotonic() < stop:
            body = httpx.get(self.url + "/api/v1/query", params={"query": expr, "time": at}).json()
            seen = sum(len(series["values"]) for series in body["data"]["result"])
            if seen == samples:
                return
            time.sleep(0.2)
        raise AssertionError(f"{self.flavor} holds {seen} samples of {model_id}, expected {samples}")

    def args(self) -> list[str]:
        """The command line (flags: docs/store.md, "Running the engines")."""
        data = self.root / "data"
        if self.flavor is Flavor.VICTORIAMETRICS:
            return [
                BINARIES[self.flavor],
                f"-storageDataPath={data}",
                f"-httpListenAddr=127.0.0.1:{self.port}",
                "-retentionPeriod=100y",
                "-search.latencyOffset=0s",  # samples are visible as soon as they are written
                "-search.disableCache",  # no cached partial answers while data arrives
                "-dedup.minScrapeInterval=1ms",  # a re-sent sample (retry after a timeout) counts once
            ]
        config = self.root / "prometheus.yml"
        config.write_text(PROMETHEUS_CONFIG)
        return [
            BINARIES[self.flavor],
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=100y",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-remote-write-receiver",
        ]

    def start(self) -> None:
        """Start the process and wait until it answers."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / "engine.log", "ab") as log:
            self.proc = subprocess.Popen(self.args(), stdout=log, stderr=subprocess.STDOUT)
        ready = "/health" if self.flavor is Flavor.VICTORIAMETRICS else "/-/ready"
        wait_http(self.url + ready, deadline_s=60)

    def stop(self) -> None:
        """SIGTERM and wait (SIGKILL after 30 s)."""
        if self.proc is None:
            return
        self.proc.terminate()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None


def require(flavor: Flavor) -> None:
    """Skip when the engine's binary is missing, unless ``CI`` is set (then fail)."""
    if shutil.which(BINARIES[flavor]):
        return
    message = f"{BINARIES[flavor]} is not installed (scripts/install installs Debian's package)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
