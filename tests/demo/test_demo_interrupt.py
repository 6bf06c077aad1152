"""Ctrl-C on `servemetrics demo` (issue 15): one more scrape, then the final tables, exit code 130, every
child stopped; a second Ctrl-C would skip the tables. The tables' windows start when the load does, so
the first SUMMARY's replicas_active is the 2 replicas that served it (a window starting before the service
existed averaged in time without replicas)."""

from __future__ import annotations

import re
import signal

import pytest

from tests.processes import free_port, start, wait_until

pytestmark = pytest.mark.e2e


def _value(table: str, metric: str) -> str:
    """The value column of ``metric``'s row in a printed table."""
    [row] = [line for line in table.splitlines() if re.match(rf"│ {metric}\s+│", line)]
    return row.split("│")[-2].strip()


def test_ctrl_c_prints_the_final_tables(tmp_path):
    port = free_port()
    log = tmp_path / "demo.out"
    args = ["--port", str(port), "--api-key", "k", "--data-dir", str(tmp_path / "d")]
    proc = start(["-m", "servemetrics", "demo", *args], log)
    try:
        # the first tables end with the trainer's (Loops) table
        wait_until(lambda: "Loops trainer" in log.read_text() or proc.poll() is not None, "first tables", 300)
        assert proc.poll() is None, log.read_text()
        first = log.read_text()
        summary = first[first.index("SUMMARY since the load started") :]
        assert _value(summary, "replicas_active") == "2"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = log.read_text()
    after = out[out.index("interrupted: one more scrape") :]
    assert "Tables at the interruption" in after
    for title in ("CURRENT", "SUMMARY since the load started", "SERIES", "ENGINE d1", "Loops trainer"):
        assert title in after, after
    assert "requests counted by the client:" in after
    assert after.rstrip().endswith("stopped every process")
