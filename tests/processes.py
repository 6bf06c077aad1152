"""Real processes for end-to-end tests: free ports, start / stop, wait for HTTP, and one replica behind
`servemetrics serve` (the shape several e2e tests use)."""

from __future__ import annotations

import contextlib
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.apptools import org
from tests.conftest import REPO_ROOT

PORTS_LOW, PORTS_HIGH = 10_000, 32_000
"""The ports ``free_port`` hands out: below Linux's ephemeral range (32768-60999), so no outgoing
connection's local port and no ``bind(0)`` of another process can take one between the moment a test
picks it and the moment its child process listens on it (a CI run lost the demo test to that)."""


def _worker_ports() -> Iterator[int]:
    """This pytest-xdist worker's own slice of ``PORTS_LOW``-``PORTS_HIGH``, from a random offset, round
    and round: two workers never pick the same port, and one worker's picks repeat after its whole slice."""
    worker = int(os.environ.get("PYTEST_XDIST_WORKER", "gw0").removeprefix("gw") or 0)
    workers = max(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")), worker + 1)
    size = (PORTS_HIGH - PORTS_LOW) // workers
    low = PORTS_LOW + worker * size
    offset = random.randrange(size)
    while True:
        for i in range(size):
            yield low + (offset + i) % size


_PORTS = _worker_ports()
_PORTS_LOCK = threading.Lock()  # a generator is not safe to advance from two threads at once


def free_port() -> int:
    """A TCP port on 127.0.0.1, free a moment ago and not handed out by this worker recently."""
    while True:
        with _PORTS_LOCK:
            port = next(_PORTS)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue  # in use, or in TIME_WAIT from an earlier test: the next one
            return port


def wait_http(url: str, deadline_s: float = 30.0) -> None:
    """Poll ``url`` until it answers below 500; AssertionError after ``deadline_s`` seconds."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        try:
            if httpx.get(url, timeout=1.0).status_code < 500:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError(f"{url} did not come up within {deadline_s} s")


def wait_until(ok: Callable[[], bool], what: str, deadline_s: float = 60.0) -> None:
    """Poll ``ok`` every 50 ms until it is true; AssertionError naming ``what`` after ``deadline_s``."""
    deadline = time.monotonic() + deadline_s
    while not ok():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def scrapes_done(base: str, source: str | None = None) -> float:
    """Scrapes the service at ``base`` has completed, from its own ``/service/metrics``: of every target,
    or only of ``source``'s (``"gateway"``: the gateway's own series; ``"registry"``: the registry's
    targets)."""
    text = httpx.get(f"{base}/service/metrics", timeout=10).text
    return sum(
        s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
        if s.name == "servemetrics_scrape_duration_seconds_count"
        and (source is None or s.labels.get("target_source") == source)
    )


def wait_for_scrapes(base: str, n: int = 2, source: str | None = None) -> None:
    """Wait until ``n`` more scrapes (of ``source``'s targets, see ``scrapes_done``) completed: the last
    of them started after this call, so what the targets showed before it is in the store."""
    done = scrapes_done(base, source)
    wait_until(lambda: scrapes_done(base, source) >= done + n, f"{n} more scrapes")


def start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    """``python ARGS`` from the repository root, output to ``log``."""
    with open(log, "wb") as out:  # the child keeps its own descriptor
        return subprocess.Popen(
            [sys.executable, *args],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT, then SIGKILL after 10 s."""
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def start_replicas(tmp: Path, count: int, token_ms: int) -> tuple[list[int], list[subprocess.Popen[bytes]]]:
    """``count`` examples/replica.py processes named p0, p1 … (``token_ms`` between tokens) on free
    ports, output to ``tmp / "r<i>.log"``: their ports and processes."""
    ports = [free_port() for _ in range(count)]
    procs = [
        start(
            ["examples/replica.py", "--port", str(p), "--name", f"p{i}", "--token-ms", str(token_ms)],
            tmp / f"r{i}.log",
        )
        for i, p in enumerate(ports)
    ]
    return ports, procs


def two_organizations(
    manage: str, invoke_m1: str, other: str, more: Mapping[str, str] = {}
) -> list[dict[str, Any]]:
    """acme with keys ``manage`` (WORKSPACE_MANAGE_ALL), ``invoke_m1`` (WORKSPACE_INVOKE on m1) and
    ``more`` ({key: type}); other with ``other`` (WORKSPACE_MANAGE_ALL)."""
    keys = {manage: "WORKSPACE_MANAGE_ALL", invoke_m1: "WORKSPACE_INVOKE", **more}
    return [org("acme", keys, scoped={invoke_m1: ["m1"]}), org("other", {other: "WORKSPACE_MANAGE_ALL"})]


def theirs(deployment: dict[str, Any], **more: Any) -> dict[str, Any]:
    """Model m2 ("theirs") of organization other with one ``deployment`` (and ``more`` sections)."""
    return {"id": "m2", "name": "theirs", "organization": "other", "deployments": [deployment], **more}


PROMOTED_AT = "2026-01-01T00:00:00Z"
"""When the e2e configs' environments were promoted to their deployment (before any test runs)."""


def replicas_deployment(dep_id: str, urls: list[str]) -> dict[str, Any]:
    """A deployment declaration with one replica per target URL: ``r1`` scraped at ``urls[0]`` …"""
    return {"id": dep_id, "replicas": [{"id": f"r{i + 1}", "targets": [u]} for i, u in enumerate(urls)]}


def promoted(env_name: str, dep_id: str) -> dict[str, Any]:
    """An environment declaration promoted to ``dep_id`` at ``PROMOTED_AT``."""
    return {"name": env_name, "promotions": [{"deployment": dep_id, "at": PROMOTED_AT}]}


def write_service_config(
    tmp: Path,
    port: int,
    organizations: list[dict[str, Any]],
    models: list[dict[str, Any]],
    **more: Any,
) -> None:
    """``tmp / "servemetrics.yaml"``: listen on 127.0.0.1:``port``, data in ``tmp / "data"``, scrape
    every second (1 s timeout), with these ``organizations`` and ``models`` (and ``more`` sections, e.g.
    ``network={"webhooks_allow": ["127.0.0.1"]}``)."""
    cfg = {
        "listen": f"127.0.0.1:{port}",
        "data_dir": str(tmp / "data"),
        "scrape_interval": "1s",
        "scrape_timeout": "1s",
        "organizations": organizations,
        "models": models,
        **more,
    }
    (tmp / "servemetrics.yaml").write_text(yaml.safe_dump(cfg))


def start_service(tmp: Path) -> subprocess.Popen[bytes]:
    """`servemetrics serve` over ``tmp / "servemetrics.yaml"``, output to ``tmp / "serve.log"``."""
    return start(
        ["-m", "servemetrics", "serve", "--config", str(tmp / "servemetrics.yaml")], tmp / "serve.log"
    )


@dataclass(frozen=True)
class OneReplica:
    """A running service (``base``) scraping one replica (``replica``) every second."""

    base: str
    replica: str
    tmp: Path


@contextlib.contextmanager
def one_replica_service(tmp: Path, key: str, replica_args: tuple[str, ...] = ()) -> Iterator[OneReplica]:
    """examples/replica.py plus `servemetrics serve` with model m1, deployment d1, replica r1,
    ``production`` promoted to d1, and ``key`` as a WORKSPACE_MANAGE_ALL key; stops both at the end."""
    rport, sport = free_port(), free_port()
    replica = start(["examples/replica.py", "--port", str(rport), *replica_args], tmp / "replica.log")
    deployment = replicas_deployment("d1", [f"http://127.0.0.1:{rport}/metrics"])
    model = {"id": "m1", "name": "e2e", "organization": "acme"}
    write_service_config(
        tmp,
        sport,
        [{"name": "acme", "api_keys": [{"key": key, "type": "WORKSPACE_MANAGE_ALL"}]}],
        [{**model, "deployments": [deployment], "environments": [promoted("production", "d1")]}],
    )
    service = start_service(tmp)
    try:
        wait_http(f"http://127.0.0.1:{rport}/health")
        wait_http(f"http://127.0.0.1:{sport}/healthz")
        yield OneReplica(f"http://127.0.0.1:{sport}", f"http://127.0.0.1:{rport}", tmp)
    finally:
        stop(service)
        stop(replica)
