"""Trainer-node sources: the kubelet Summary API (JSON) and node_exporter filesystem series, from the
repository's fixtures (tests/fixtures/README.md), through ``adapt`` and through the scraper over real HTTP."""

from __future__ import annotations

import anyio
import httpx
import pytest

from servemetrics.ingest.adapters import adapt
from servemetrics.ingest.exposition import parse_exposition
from servemetrics.ingest.kubelet_summary import SummaryError, parse_summary
from servemetrics.ingest.scraper import Scraper, Target
from servemetrics.store.base import Reducer, Selection, ValueSet
from servemetrics.store.memory import MemoryStore
from servemetrics.types import labels_of
from tests.ingest.fixtures import REPO_ROOT, SCRAPE_MS
from tests.scrape.test_scraper import Exporter

FIXTURES = REPO_ROOT / "tests" / "fixtures"
NODE = {"deployment_id": "t1", "node_id": "leader-0"}
USED, CAPACITY, AVAILABLE = (
    "baseten_ephemeral_storage_used_bytes",
    "baseten_ephemeral_storage_capacity_bytes",
    "baseten_ephemeral_storage_available_bytes",
)


def table(samples) -> dict[tuple[str, str], float]:
    """``(canonical name, pod or "") -> value``; every sample carries the node's labels and a source."""
    out = {}
    for s in samples:
        lab = dict(s.labels)
        assert lab.items() >= NODE.items() and lab["source"] in ("kubelet_summary", "node_exporter")
        assert s.ts_ms == SCRAPE_MS
        out[(s.name, lab.get("pod", ""))] = s.value
    return out


def test_summary_fixture_gives_each_pods_ephemeral_storage():
    raw = parse_summary((FIXTURES / "kubelet_stats_summary.json").read_bytes(), SCRAPE_MS)
    assert table(adapt(raw, NODE)) == {
        # trainer-0: rootfs 1 GiB + logs 50 MiB + emptyDir 20 GiB = 22,601,007,104 B
        (USED, "trainer-0"): 22_601_007_104,
        (CAPACITY, "trainer-0"): 502_921_060_352,
        (AVAILABLE, "trainer-0"): 317_827_579_904,
        (USED, "nvidia-dcgm-exporter-ml2wh"): 118_784,
        (CAPACITY, "nvidia-dcgm-exporter-ml2wh"): 502_921_060_352,
        (AVAILABLE, "nvidia-dcgm-exporter-ml2wh"): 317_827_579_904,
        # kube-proxy has no ephemeral-storage: nothing
    }
    trainer = next(s for s in adapt(raw, NODE) if s.name == USED)
    assert dict(trainer.labels) == {
        **NODE,
        "namespace": "loops",
        "pod": "trainer-0",
        "source": "kubelet_summary",
    }


@pytest.mark.parametrize(
    ("body", "message"),
    [(b"{not json", "invalid JSON"), (b"[]", "no `pods` list"), (b'{"node": {}}', "no `pods` list")],
)
def test_a_body_that_is_not_a_summary_is_an_error(body, message):
    with pytest.raises(SummaryError, match=message):
        parse_summary(body, SCRAPE_MS)


def test_bad_fields_and_pods_give_no_sample():
    body = (
        b'{"pods": [7, {"podRef": {}}, {"podRef": {"name": "p", "namespace": "n"}, "ephemeral-storage": '
        b'{"usedBytes": -1, "capacityBytes": "9", "availableBytes": true}}, '
        b'{"podRef": {"name": "q"}, "ephemeral-storage": {"usedBytes": 5}}]}'
    )
    out = parse_summary(body, SCRAPE_MS)
    assert [(s.name, dict(s.labels), s.value) for s in out] == [
        ("kubelet_summary_pod_ephemeral_storage_used_bytes", {"namespace": "", "pod": "q"}, 5.0)
    ]


def test_node_exporter_root_filesystem_only():
    text = (FIXTURES / "node_exporter_filesystem.prom").read_bytes()
    out = adapt(parse_exposition(text, "text/plain; version=0.0.4", SCRAPE_MS).samples, NODE)
    # "/" on ext4 only: the rootfs pseudo-entry, /boot/efi and the tmpfs are skipped
    assert table(out) == {(CAPACITY, ""): 502_921_060_352, (AVAILABLE, ""): 317_827_579_904}


def _scrape(store: MemoryStore, url: str, ts: int):
    async def go():
        async with httpx.AsyncClient() as client:
            return await Scraper(client, store.append).scrape_once(Target(url, labels_of(NODE)), ts)

    return anyio.run(go)


def _last(store: MemoryStore, name: str, **matchers: str) -> float | None:
    vs = ValueSet(SCRAPE_MS, SCRAPE_MS + 1, frozenset({"t1"}))
    cells = store.select(Selection(name, Reducer.LAST, (vs,), matchers=tuple(matchers.items())))
    cell = next(iter(cells.values()))[0] if cells else None
    return cell.total if cell is not None else None


def test_scraper_reads_a_json_target_as_the_summary_api():
    exporter = Exporter()
    try:
        exporter.content_type = "application/json"
        exporter.body = (FIXTURES / "kubelet_stats_summary.json").read_bytes()
        store = MemoryStore()
        result = _scrape(store, exporter.url, SCRAPE_MS)
        assert result.up and result.stored == 7  # six Summary samples and `up`
        assert _last(store, USED, pod="trainer-0") == 22_601_007_104
        assert _last(store, "up", node_id="leader-0") == 1.0

        exporter.body = b'{"kind": "Status", "message": "Unauthorized"}'
        result = _scrape(store, exporter.url, SCRAPE_MS + 15_000)
        assert not result.up and "no `pods` list" in (result.error or "")
    finally:
        exporter.server.shutdown()
        exporter.server.server_close()
