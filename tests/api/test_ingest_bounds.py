"""C15: one normalisation of bucket bounds serves scrape, remote_write and import (issue 11, rule 4).

The same histogram, its bounds spelled in different ways, goes through the real paths: the scraper
(``httpx.MockTransport``, OpenMetrics and Prometheus text), remote_write (``encode_write_request`` into
``POST /api/v1/write``), import through the API (``POST /v1/import``) and from a file (``iter_backfill``,
as ``servemetrics import`` calls it; the CLI's data-dir path itself is C15's first test).
"""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from servemetrics import cli
from servemetrics.ingest.backfill import BackfillError, iter_backfill
from servemetrics.ingest.scraper import Scraper, Target
from servemetrics.remote_write import encode_write_request
from servemetrics.samples import Sample, SampleBatch
from servemetrics.store import open_store
from servemetrics.store.memory import MemoryStore
from servemetrics.types import labels_of
from tests.api.conftest import Serve
from tests.apptools import auth, org
from tests.query.helpers import T0, at

E2E = "baseten_end_to_end_response_time_seconds"
MANAGE, READ = "manage-key", "read-key"
REPLICA = {"model_id": "m1", "model_name": "M", "deployment_id": "d1", "replica": "r1"}
DECLARATIONS = {
    "organizations": [org("acme", {MANAGE: "WORKSPACE_MANAGE_ALL", READ: "WORKSPACE_EXPORT_METRICS"})],
    "models": [{"id": "m1", "name": "M", "organization": "acme", "deployments": [{"id": "d1"}]}],
}
CONFIG = f"""
data_dir: {{data}}
organizations:
  - name: acme
    api_keys:
      - {{{{key: {MANAGE}, type: WORKSPACE_MANAGE_ALL}}}}
      - {{{{key: {READ}, type: WORKSPACE_EXPORT_METRICS}}}}
models:
  - {{{{id: m1, name: M, organization: acme, deployments: [{{{{id: d1}}}}]}}}}
"""
C6_POINTS = ((0, (0, 0, 0), 0.0), (15, (3, 8, 10), 7.2))
"""C6 (cases/core.md): seconds after T0, the counts of the buckets 0.5, 1 and +Inf, and the sum."""


def _exposition(bounds: tuple[str, str, str], counts: tuple[int, int, int], total: float, ts: str) -> str:
    """One point of the C6 histogram with its bounds spelled as ``bounds``; ``ts`` is appended to every
    line (``""``: no timestamp)."""
    lines = [f'{E2E}_bucket{{le="{le}"}} {n}{ts}' for le, n in zip(bounds, counts, strict=True)]
    return "\n".join([*lines, f"{E2E}_count {counts[-1]}{ts}", f"{E2E}_sum {total}{ts}"]) + "\n"


def _openmetrics_file(bounds: tuple[str, str, str]) -> str:
    """The two points of C6 as an OpenMetrics file for import (timestamps in seconds)."""
    points = [_exposition(bounds, c, s, f" {(T0 + 1000 * t) / 1000:.3f}") for t, c, s in C6_POINTS]
    return f"# TYPE {E2E} histogram\n" + "".join(points) + "# EOF\n"


def _read(client: TestClient, start_s: float, end_s: float) -> list[float | None]:
    body = client.get(
        "/v1/models/m1/deployments/d1/metrics",
        headers=auth(READ),
        params={"mode": "SUMMARY", "start_epoch_millis": at(start_s), "end_epoch_millis": at(end_s)}
        | {"metrics": E2E},
    ).json()
    [values] = body["metric_values"][0]["values"]
    return values  # type: ignore[no-any-return]


def test_c15_import_accepts_lower_case_inf(tmp_path: Path, serve: Serve) -> None:
    """``servemetrics import --config`` of the C6 data with ``le="+inf"`` into the data directory.

    By hand, over [T0+1 s, T0+30 s): the increases are 3 (le 0.5), 8 (le 1.0) and 10 (+Inf), sum 7.2.
    p50 is rank 0.5 * 10 = 5, in the bucket (0.5, 1.0] holding ranks 3 to 8: 0.5 + (5 - 3) / (8 - 3) *
    0.5 = 0.7; the mean is 7.2 / 10 = 0.72 (C6's answer for the scraped data).
    """
    config = tmp_path / "sm.yaml"
    config.write_text(CONFIG.format(data=tmp_path))
    om = tmp_path / "c6.om"
    om.write_text(_openmetrics_file(("0.5", "1.0", "+inf")))
    args = [
        "import",
        str(om),
        "--model",
        "m1",
        "--deployment",
        "d1",
        "--replica",
        "r1",
        "--config",
        str(config),
    ]
    result = CliRunner().invoke(cli.app, args)
    assert result.exit_code == 0, result.stderr
    assert "stored 10 samples" in result.stderr
    store = open_store(tmp_path)  # the DuckDB file the import wrote; the service closes it
    client = serve(DECLARATIONS, clock=lambda: at(600), store=store)
    assert sorted(store.label_values(E2E + "_bucket", "le")) == ["+Inf", "0.5", "1.0"]
    values = _read(client, 1, 30)
    assert values[0] == pytest.approx(0.7)
    assert values[4] == pytest.approx(0.72)


class _Recording(MemoryStore):
    """A MemoryStore that also keeps every appended sample (in order), except ``up``."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[Sample] = []

    def append(self, batch: SampleBatch) -> int:
        self.rows.extend(s for s in batch.samples() if s.name != "up")
        return super().append(batch)

    def take(self) -> set[Sample]:
        rows, self.rows = set(self.rows), []
        return rows


def _scraped(bounds: tuple[str, str, str], openmetrics: bool) -> set[Sample]:
    """The C6 points scraped at T0 and T0 + 15 s by one scraper (no timestamps in the bodies)."""
    store = _Recording()
    content_type = (
        "application/openmetrics-text; version=1.0.0" if openmetrics else "text/plain; version=0.0.4"
    )
    bodies = [_exposition(bounds, c, s, "") for _, c, s in C6_POINTS]
    if openmetrics:
        bodies = [f"# TYPE {E2E} histogram\n{b}# EOF\n" for b in bodies]
    else:
        bodies = [f"# TYPE {E2E} histogram\n{b}" for b in bodies]
    transport = httpx.MockTransport(
        lambda req: httpx.Response(
            200, text=bodies[int(req.url.params["n"])], headers={"content-type": content_type}
        )
    )

    async def go() -> None:
        async with httpx.AsyncClient(transport=transport) as client:
            scraper = Scraper(client, store.append)
            for n, (t, _, _) in enumerate(C6_POINTS):
                result = await scraper.scrape_once(
                    Target(f"http://r1/metrics?n={n}", labels_of(REPLICA)), at(t)
                )
                assert result.up, result.error

    anyio.run(go)
    return store.take()


def _remote_write_body(bounds: tuple[str, str, str]) -> bytes:
    samples = []
    for t, counts, total in C6_POINTS:
        for le, n in zip(bounds, counts, strict=True):
            samples.append(Sample(E2E + "_bucket", labels_of({**REPLICA, "le": le}), float(n), at(t)))
        samples.append(Sample(E2E + "_count", labels_of(REPLICA), float(counts[-1]), at(t)))
        samples.append(Sample(E2E + "_sum", labels_of(REPLICA), total, at(t)))
    return encode_write_request(sorted(samples, key=lambda s: (s.name, s.labels, s.ts_ms)))


def _imported(client: TestClient, body: str) -> httpx.Response:
    return client.post(
        "/v1/import",
        params={"model_id": "m1", "deployment_id": "d1", "replica": "r1"},
        content=body.encode(),
        headers=auth(MANAGE),
    )


def _canonical() -> set[Sample]:
    """The C6 points as the scraper has always stored them: bounds ``0.5``, ``1.0``, ``+Inf``."""
    lab = labels_of(REPLICA)
    out = set()
    for t, counts, total in C6_POINTS:
        for le, n in zip(("0.5", "1.0", "+Inf"), counts, strict=True):
            out.add(Sample(E2E + "_bucket", labels_of({**REPLICA, "le": le}), float(n), at(t)))
        out.add(Sample(E2E + "_count", lab, float(counts[-1]), at(t)))
        out.add(Sample(E2E + "_sum", lab, total, at(t)))
    return out


SPELLINGS = [
    ("0.5", "1.0", "+Inf"),
    ("0.5", "1", "+inf"),
    ("5e-1", "1e0", "Inf"),
    ("0.50", "1.000", "inf"),
    (".5", "1.", "+Infinity"),
    ("0.5", "1E0", "INF"),
]


@pytest.mark.parametrize("bounds", SPELLINGS, ids="/".join)
def test_every_ingest_path_stores_the_same_bounds(
    tmp_path: Path, serve: Serve, bounds: tuple[str, str, str]
) -> None:
    store = _Recording()
    client = serve(DECLARATIONS, clock=lambda: at(600), store=store)
    stored: dict[str, set[Sample]] = {
        "scrape OpenMetrics": _scraped(bounds, openmetrics=True),
        "scrape text": _scraped(bounds, openmetrics=False),
    }
    resp = client.post("/api/v1/write", content=_remote_write_body(bounds), headers=auth(MANAGE))
    assert resp.status_code == 204, resp.text
    stored["remote_write"] = store.take()
    resp = _imported(client, _openmetrics_file(bounds))
    assert resp.status_code == 200, resp.text
    stored["import (API)"] = store.take()
    path = tmp_path / "h.om"
    path.write_text(_openmetrics_file(bounds))
    stored["import (file)"] = {s for b in iter_backfill(path, REPLICA) for s in b.samples()}
    assert stored == dict.fromkeys(stored, _canonical())


NOT_A_NUMBER = ["abc", "NaN", "1,5", ""]


@pytest.mark.parametrize("bad", NOT_A_NUMBER)
def test_a_bound_that_is_not_a_number_is_refused_on_every_path(
    tmp_path: Path, serve: Serve, bad: str
) -> None:
    """Line 3 of the file holds the bad bound (line 2 of a scrape body without ``# TYPE``...)."""
    bounds = ("0.5", bad, "+Inf")
    message = f"sample {E2E}_bucket: bucket bound le={bad!r} is not a number"
    store = _Recording()
    client = serve(DECLARATIONS, clock=lambda: at(600), store=store)
    for openmetrics in (True, False):
        with pytest.raises(AssertionError, match=re.escape("failed: line 3: " + message)):
            _scraped(bounds, openmetrics)
    resp = client.post("/api/v1/write", content=_remote_write_body(bounds), headers=auth(MANAGE))
    assert resp.status_code == 400
    assert f"series {E2E}_bucket{{" in resp.json()["error"]
    assert resp.json()["error"].endswith(f": bucket bound le={bad!r} is not a number")
    resp = _imported(client, _openmetrics_file(bounds))
    assert resp.status_code == 400
    assert resp.json()["error"] == f"import stopped after 0 samples: line 3: {message}"
    assert store.take() == set()
    path = tmp_path / "h.om"
    path.write_text(_openmetrics_file(bounds))
    with pytest.raises(BackfillError) as exc:
        list(iter_backfill(path, REPLICA))
    assert str(exc.value) == f"line 3: {message}"
