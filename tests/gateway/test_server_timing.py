"""``gateway.server_timing``: the inference time read from a replica's ``Server-Timing`` header (W3C
Server Timing syntax; ``dur`` in milliseconds). Values computed by hand; malformed input is skipped,
never raised."""

from __future__ import annotations

import pytest

from servemetrics.api.service import gateway_options_of
from servemetrics.config import ConfigError, parse_config
from servemetrics.gateway.server_timing import duration_s, entries


def _s(*values: str | bytes, metric: str = "inference") -> float | None:
    raw = [(b"Server-Timing", v if isinstance(v, bytes) else v.encode("latin-1")) for v in values]
    return duration_s([(b"Content-Type", b"text/plain"), *raw], metric)


def test_one_entry_is_its_dur_in_seconds():
    assert _s("inference;dur=123.4") == pytest.approx(0.1234, abs=1e-12)
    assert _s("inference;dur=0") == 0.0
    assert _s('inference;dur="12"') == pytest.approx(0.012, abs=1e-12)  # a quoted value is a value too


def test_only_the_named_entries_count_and_add_up():
    # other entries (overlapping spans such as "total") never count; a quoted desc may hold , and ;
    header = 'total;dur=500, db;dur=53, inference;dur=47.2;desc="model, run; v2", app;dur=100'
    assert _s(header) == pytest.approx(0.0472, abs=1e-12)
    # entries of the name in two header lines (one list) and twice in one line: 10 + 2.5 + 0.5 ms
    assert _s("inference;dur=10, pre;dur=1", "inference;dur=2.5,inference;dur=0.5") == pytest.approx(
        0.013, abs=1e-12
    )
    assert _s("pre;dur=3, post;dur=4", metric="pre") == pytest.approx(0.003, abs=1e-12)
    assert _s("Inference;dur=5") is None  # names are compared exactly
    assert _s("inference;dur=5", metric="") is None  # reading is off


def test_spaces_around_separators_are_allowed():
    assert _s("  inference ; dur = 7.5 ; desc = gpu  ,x") == pytest.approx(0.0075, abs=1e-12)
    assert entries(['a;desc="x \\"y\\" z";dur=1, b']) == [("a", {"desc": 'x "y" z', "dur": "1"}), ("b", {})]


def test_the_first_dur_of_an_entry_wins():
    assert _s("inference;dur=5;dur=7") == pytest.approx(0.005, abs=1e-12)
    assert _s("inference;DUR=9") == pytest.approx(0.009, abs=1e-12)  # parameter names are case-insensitive


@pytest.mark.parametrize(
    "header",
    [
        "inference;dur=abc",
        "inference;dur=-3",
        "inference;dur=nan",
        "inference;dur=inf",
        "inference;dur=1e400",  # overflows to inf
        "inference;dur",  # no value
        "inference;dur=",
        "inference",
        "inference dur=5",  # no ';'
        "inference;dur=5 6",
        "inference;=5",
        ";;;,,,",
        "",
        b"inference;dur=1;desc=\xff",  # not a token
        'inference;dur=4;desc="never closed',
    ],
)
def test_malformed_entries_are_skipped(header):
    assert _s(header) is None


def test_a_malformed_entry_does_not_hide_the_next():
    assert _s("garbage here, inference;dur=4") == pytest.approx(0.004, abs=1e-12)
    assert _s('"unterminated, inference;dur=4') == pytest.approx(0.004, abs=1e-12)
    assert _s('a;desc="1, inference;dur=99", inference;dur=2') == pytest.approx(0.002, abs=1e-12)
    assert _s("inference;dur=oops, inference;dur=3") == pytest.approx(0.003, abs=1e-12)


def test_no_header_is_none():
    assert duration_s([(b"content-type", b"text/plain")], "inference") is None


def test_the_config_key_names_the_entry_and_refuses_what_is_not_a_name():
    assert gateway_options_of(parse_config({})).server_timing_metric == "inference"
    chosen = parse_config({"gateway": {"server_timing_metric": "model-run"}})
    assert gateway_options_of(chosen).server_timing_metric == "model-run"
    assert (
        gateway_options_of(parse_config({"gateway": {"server_timing_metric": ""}})).server_timing_metric == ""
    )
    for bad in ("model run", "a;dur=1", 'q"', "a,b"):
        with pytest.raises(ConfigError) as err:
            parse_config({"gateway": {"server_timing_metric": bad}})
        assert "`gateway.server_timing_metric`" in str(err.value) and "as the replica does" in str(err.value)
