"""The demo's child processes: start them with their output in a log file, stop all of them on exit.

On Linux every child asks the kernel for SIGTERM when the demo dies (``PR_SET_PDEATHSIG``), so even a
demo killed with SIGKILL leaves no orphan behind. ``Children.stop_all`` sends SIGTERM, waits, then kills.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

_PR_SET_PDEATHSIG = 1


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    return free_ports(1)[0]


def free_ports(n: int, taken: frozenset[int] = frozenset()) -> list[int]:
    """``n`` distinct TCP ports free on 127.0.0.1 right now, none of them in ``taken``.

    Every socket stays bound until all ``n`` are found, so the kernel cannot hand out one port twice;
    ``taken`` holds ports chosen but not bound yet (the service's own ``--port``, which a replica given
    the same port would take from it while the service still starts)."""
    held: list[socket.socket] = []  # every socket bound so far, ports in ``taken`` too
    ports: list[int] = []
    try:
        while len(ports) < n:
            s = socket.socket()
            held.append(s)
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
            if port not in taken:
                ports.append(port)
        return ports
    finally:
        for s in held:
            s.close()


def _die_with_parent() -> None:  # runs in the child between fork and exec
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


class Children:
    """The processes the demo started, stopped in reverse order by ``stop_all``."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        """Run ``python args...`` as ``name``; stdout and stderr go to ``<log_dir>/<name>.log``."""
        with open(self.log_dir / f"{name}.log", "wb") as out:
            proc = subprocess.Popen(
                [sys.executable, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
                preexec_fn=_die_with_parent if sys.platform == "linux" else None,  # noqa: PLW1509
                start_new_session=True,  # Ctrl-C reaches the demo only; it stops the children in order
            )
        self.procs.append((name, proc))
        return proc

    def check(self) -> None:
        """RuntimeError naming a child that exited (with the end of its log)."""
        for name, proc in self.procs:
            if proc.poll() is not None:
                log = (self.log_dir / f"{name}.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"{name} exited with code {proc.returncode}:\n{log}")

    def stop_all(self, timeout: float = 10.0) -> None:
        """SIGTERM every child still running, wait up to ``timeout`` s in all, SIGKILL the rest."""
        for _, proc in reversed(self.procs):
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for _, proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def wait_http(url: str, children: Children, timeout: float = 60.0) -> None:
    """Until ``url`` answers 2xx; RuntimeError after ``timeout`` s or when a child exits first."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        children.check()
        try:
            if httpx.get(url, timeout=1.0).status_code < 300:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout:g} s")
