"""Real processes for end-to-end tests: free ports, start / stop, wait for HTTP, and one replica behind
`servemetrics serve` (the shape several e2e tests use)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import yaml

from tests.conftest import REPO_ROOT


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


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
    target = {"id": "r1", "targets": [f"http://127.0.0.1:{rport}/metrics"]}
    production = {"name": "production", "promotions": [{"deployment": "d1", "at": "2026-01-01T00:00:00Z"}]}
    cfg = {
        "listen": f"127.0.0.1:{sport}",
        "data_dir": str(tmp / "data"),
        "scrape_interval": "1s",
        "scrape_timeout": "1s",
        "organizations": [{"name": "acme", "api_keys": [{"key": key, "type": "WORKSPACE_MANAGE_ALL"}]}],
        "models": [{"id": "m1", "name": "e2e", "organization": "acme",
                    "deployments": [{"id": "d1", "replicas": [target]}], "environments": [production]}],
    }  # fmt: skip
    (tmp / "servemetrics.yaml").write_text(yaml.safe_dump(cfg))
    service = start(
        ["-m", "servemetrics", "serve", "--config", str(tmp / "servemetrics.yaml")], tmp / "serve.log"
    )
    try:
        wait_http(f"http://127.0.0.1:{rport}/health")
        wait_http(f"http://127.0.0.1:{sport}/healthz")
        yield OneReplica(f"http://127.0.0.1:{sport}", f"http://127.0.0.1:{rport}", tmp)
    finally:
        stop(service)
        stop(replica)
