"""The demo's parts in process: the model, the replica's input check, the promotion plan (the replica's
engine metrics: test_engine_metrics.py; the DCGM replay: test_gpu_replay.py)."""

from __future__ import annotations

import pytest

from servemetrics.demo.loops_report import _fmt
from servemetrics.demo.model import STOP, CharModel, ModelSize
from servemetrics.demo.processes import free_ports
from servemetrics.demo.replica import BadInput, parse_request
from servemetrics.demo.run import promotion_plan


def test_the_model_trains_and_streams_characters():
    model = CharModel(ModelSize(context=3, embed=8, hidden=32, steps=150), text="the boat came home. " * 40)
    assert model.loss < 1.5  # from ln(9) = 2.2 at random
    tokens = list(model.generate("the", 5))
    assert 1 <= len(tokens) <= 5 and all(len(t) == 1 for t in tokens)
    assert STOP not in tokens[:-1] and (len(tokens) == 5 or tokens[-1] == STOP)
    assert set(tokens) <= set(model.chars)
    # about 20 characters a sentence: 200 tokens end with the end-of-sequence token
    assert list(model.generate("the boat came home", 200))[-1] == STOP
    assert model.tokenize(" the\n boat  ") == "the boat"


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1]",
        b'{"text": "x"}',
        b'{"prompt": " "}',
        b'{"prompt": "x", "max_tokens": 0}',
        b'{"prompt": "x", "max_tokens": true}',
        b'{"prompt": "x", "temperature": 0}',
    ],
)
def test_malformed_requests_are_bad_input(body):
    with pytest.raises(BadInput):
        parse_request(body)


def test_a_valid_request_gets_defaults():
    assert parse_request(b'{"prompt": "hi"}') == {
        "prompt": "hi",
        "max_tokens": 16,
        "temperature": 0.8,
        "fault": None,
    }


def test_promotion_plan():
    assert promotion_plan(120) == [
        (60, "promote", 25),
        (80, "promotion_percent", 50),
        (100, "promotion_percent", 100),
    ]
    assert promotion_plan(None)[0] == (60.0, "promote", 25)


def test_the_loops_table_never_prints_an_exponent():
    assert [_fmt(2320.0), _fmt(4.13e9, 2**20), _fmt(0.00466), _fmt(24.2231e9, 1e9, 4), _fmt(None)] == [
        "2,320",
        "3,939",
        "0.00466",
        "24.22",
        "–",
    ]


def test_free_ports_are_distinct_and_skip_the_services_port():
    """The demo's replica ports (issue: a CI run's service could not listen on the port it was given)."""
    first = free_ports(40)
    assert len(set(first)) == 40
    taken = frozenset(first[:20])
    again = free_ports(40, taken=taken)
    assert len(set(again)) == 40 and not taken & set(again)
