"""``parse_exposition`` with ``on_samples`` (the scraper's ``sample_limit`` counted while parsing, issue 12):
text-format families split into pieces give the same samples, and what ``on_samples`` raises stops the
parse early. ``adapters.Adapted`` fed in pieces gives what ``adapt`` gives."""

from __future__ import annotations

import pytest

from servemetrics.ingest import exposition
from servemetrics.ingest.adapters import Adapted, adapt
from servemetrics.ingest.exposition import ExpositionError, parse_exposition
from servemetrics.samples import Sample
from servemetrics.types import labels_of
from tests.ingest.fixtures import SCRAPE_MS, fixture_files

TEXT = "text/plain; version=0.0.4"
BODY = b"""# HELP a_total Requests.
# TYPE a_total counter
a_total{x="1"} 1
a_total{x="2"} 2
a_total{x="3"} 3
# TYPE b counter
# HELP b Declared without _total.
b{y="1"} 5
b{y="1"} 6
b{y="2"} 7
loose 8
# TYPE h histogram
h_bucket{le="1"} 1
h_bucket{le="+inf"} 2
h_sum 3
h_count 2
"""


class _Stop(Exception):
    pass


def _pieces(body: bytes, chunk: int, monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], object]:
    """Parse ``body`` with ``PARSE_CHUNK = chunk``: the sizes of the pieces ``on_samples`` got, and the
    result (the pieces and the rest must be the result's samples in order)."""
    monkeypatch.setattr(exposition, "PARSE_CHUNK", chunk)
    got: list[Sample] = []
    sizes: list[int] = []

    def more(samples: list[Sample]) -> None:
        sizes.append(len(samples))
        got.extend(samples)

    result = parse_exposition(body, TEXT, SCRAPE_MS, more)
    assert result.samples[: len(got)] == got
    return sizes, result


def test_a_text_body_in_pieces_gives_the_samples_of_the_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    whole = parse_exposition(BODY, TEXT, SCRAPE_MS)
    sizes, pieces = _pieces(BODY, 2, monkeypatch)
    assert pieces == whole
    assert [s.name for s in whole.samples] == ["a_total"] * 3 + ["b", "b", "loose"] + ["h_bucket"] * 2 + [
        "h_sum",
        "h_count",
    ]
    assert [s.value for s in whole.samples] == [1, 2, 3, 5, 7, 8, 1, 2, 3, 2]
    assert whole.duplicates == 1  # b{y="1"} 6
    assert dict(whole.samples[7].labels) == {"le": "+Inf"}
    # every piece holds 2 sample lines at most; a call when 2 or more are new: a_total's first 2; its 3rd
    # and b's first (its duplicate dropped); b's last and loose; h's 2 buckets. h_sum and h_count come
    # after the text's end: they are the caller's
    assert sizes == [2, 2, 2, 2]


@pytest.mark.parametrize("path", fixture_files(), ids=lambda p: p.name)
def test_every_fixture_in_pieces_of_3_lines_is_parsed_as_a_whole(
    path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = path.read_bytes()  # type: ignore[attr-defined]
    assert _pieces(body, 3, monkeypatch)[1] == parse_exposition(body, TEXT, SCRAPE_MS)


def test_what_on_samples_raises_stops_the_parse(monkeypatch: pytest.MonkeyPatch) -> None:
    """100 gauges in pieces of 10: raising once over 25 stops after the third piece (30 samples); the
    malformed last line is never read."""
    monkeypatch.setattr(exposition, "PARSE_CHUNK", 10)
    body = b"# TYPE g gauge\n" + b"".join(b'g{i="%d"} %d\n' % (i, i) for i in range(100)) + b"bad line\n"
    seen: list[Sample] = []

    def more(samples: list[Sample]) -> None:
        seen.extend(samples)
        if len(seen) > 25:
            raise _Stop

    with pytest.raises(_Stop):
        parse_exposition(body, TEXT, SCRAPE_MS, more)
    assert [s.value for s in seen] == list(range(30))
    with pytest.raises(ExpositionError, match="^line 102: invalid Prometheus text exposition"):
        parse_exposition(body, TEXT, SCRAPE_MS)


def test_a_malformed_line_after_a_refused_sample_is_still_the_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """A timestamp out of range on line 2 and a malformed line 5: parsed whole the library's error on line
    5 is raised (the parse ends before the samples are checked); in pieces of 1 too."""
    body = b"# TYPE g gauge\ng 1 99999999999999999\n# TYPE k gauge\nk 2\nk{ 3\n"
    for chunk in (1, 4096):
        monkeypatch.setattr(exposition, "PARSE_CHUNK", chunk)
        with pytest.raises(ExpositionError, match="^line 5: invalid Prometheus text exposition"):
            parse_exposition(body, TEXT, SCRAPE_MS, lambda _: None)
    with pytest.raises(ExpositionError, match=r"^sample g: timestamp 100000000000000\.0 is out of range"):
        parse_exposition(body[: body.index(b"k{")], TEXT, SCRAPE_MS, lambda _: None)


def test_adapted_in_pieces_is_adapt_of_the_whole() -> None:
    """DCGM's PROF utilisation outranks DEV for the same canonical series (a later, higher-priority sample
    replaces one in place), across pieces too; the length never drops."""
    gpu = labels_of({"gpu": "0", "UUID": "GPU-1"})
    samples = [
        Sample("DCGM_FI_DEV_GPU_UTIL", gpu, 50.0, SCRAPE_MS),
        Sample("vllm:num_requests_running", labels_of({"i": "1"}), 1.0, SCRAPE_MS),
        Sample("DCGM_FI_PROF_GR_ENGINE_ACTIVE", gpu, 0.25, SCRAPE_MS),
        Sample("not_a_known_metric", (), 1.0, SCRAPE_MS),
    ]
    labels = {"model_id": "m1", "deployment_id": "d1", "replica": "r1"}
    whole = adapt(samples, labels)
    adapted, lengths = Adapted(labels), []
    for piece in (samples[:1], samples[1:3], samples[3:]):
        adapted.add(piece)
        lengths.append(len(adapted.samples))
    assert adapted.samples == whole and adapted.fed == 4
    assert [(s.name, s.value) for s in whole] == [
        ("baseten_gpu_utilization", 0.25),
        ("vllm:num_requests_running", 1.0),
    ]
    assert lengths == [1, 2, 2]
