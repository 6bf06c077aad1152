"""``openai_meter``: tokens and token timings read from OpenAI answers, hand-checked on scripted streams
(the platform's time-per-output-token rule: one observation per chunk with new tokens after the first,
time since the previous such chunk / its new tokens)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from servemetrics.gateway.openai_meter import MAX_BODY_BYTES, StreamMeter, Usage, usage_of


def _event(obj: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(obj).encode() + b"\n\n"


def _chat(text: str, **more: Any) -> bytes:
    return _event({"choices": [{"index": 0, "delta": {"content": text}}], **more})


def _usage(prompt: int, output: int, cached: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def test_multi_token_chunks_by_running_usage_give_one_observation_each() -> None:
    """Chunks of 1, 3 and 2 tokens at 0.10, 0.16 and 0.20 s (vLLM's continuous usage): TTFT 0.10;
    observations (0.16 - 0.10) / 3 = 0.02 and (0.20 - 0.16) / 2 = 0.02; decode speed 1 / mean = 50/s."""
    meter = StreamMeter(stream=True)
    meter.feed(_event({"choices": [{"delta": {"role": "assistant"}}]}), 0.05)  # no tokens: not a chunk
    meter.feed(_chat("a", usage=_usage(7, 1)), 0.10)
    meter.feed(_chat("b c d", usage=_usage(7, 4)), 0.16)
    meter.feed(_chat("e f", usage=_usage(7, 6)), 0.20)
    meter.feed(_event({"choices": [], "usage": _usage(7, 6, cached=5)}) + b"data: [DONE]\n\n", 0.21)
    assert meter.first_token_s == 0.10
    assert meter.tpot_s == pytest.approx([0.02, 0.02])
    assert 1 / (sum(meter.tpot_s) / len(meter.tpot_s)) == pytest.approx(50.0)
    assert meter.result() == Usage(input_cached=5, input_uncached=2, output=6)


def test_logprobs_count_the_tokens_of_a_chunk_when_no_usage_runs() -> None:
    def chunk(n: int) -> bytes:
        lp = {"content": [{"token": "x", "logprob": 0.0} for _ in range(n)]}
        return _event({"choices": [{"delta": {"content": "x" * n}, "logprobs": lp}]})

    meter = StreamMeter(stream=True)
    for at, n in ((0.5, 2), (0.9, 4), (1.0, 1)):
        meter.feed(chunk(n), at)
    assert meter.tpot_s == pytest.approx([0.1, 0.1])  # (0.9 - 0.5) / 4, (1.0 - 0.9) / 1
    assert meter.counted == 7 and meter.result() == Usage(output=7)  # no usage: counted chunks, no input


def test_without_usage_every_content_chunk_is_one_token_and_events_may_split() -> None:
    """Completions' ``text`` chunks, events cut across network reads and two in one read: one chunk, one
    observation of the time since the previous chunk over its 2 tokens (not a second of 0 s)."""
    stream = b"".join(_event({"choices": [{"text": t}]}) for t in ("x", "y", "z")) + b"data: [DONE]\n\n"
    meter = StreamMeter(stream=True)
    meter.feed(stream[:10], 1.0)
    meter.feed(stream[10:40], 2.0)  # completes the first event
    meter.feed(stream[40:], 3.0)  # the other two, arriving together
    assert meter.first_token_s == 2.0
    assert meter.tpot_s == [0.5]  # (3.0 - 2.0) / 2
    assert meter.result() == Usage(output=3)


def test_a_non_streamed_answer_is_read_for_its_usage_at_the_end() -> None:
    body = json.dumps(
        {"choices": [{"message": {"content": "hi"}}], "usage": _usage(12, 3, cached=4)}
    ).encode()
    meter = StreamMeter(stream=False)
    meter.feed(body[:5], 0.3)
    meter.feed(body[5:], 0.4)
    assert meter.first_token_s == 0.3 and meter.tpot_s == []
    assert meter.result() == Usage(input_cached=4, input_uncached=8, output=3)
    broken = StreamMeter(stream=False)
    broken.feed(b"<html>bad gateway</html>", 0.1)
    assert broken.result() == Usage()


def test_an_answer_over_4_mib_is_still_counted_from_the_usage_at_its_end() -> None:
    """A 6 MiB answer (fed in 64 KiB reads) whose ``usage`` follows ``choices``: its tokens are counted,
    so a caller cannot get past ``tokens_per_minute`` by asking for a long answer (before: Usage())."""
    text = 'say \\"usage\\": {\\"completion_tokens\\": 1} ' + "x" * (6 << 20)  # a decoy inside the content
    body = json.dumps(
        {"choices": [{"message": {"content": text}}], "usage": _usage(7000, 1_500_000, cached=2000)}
    )
    raw = body.encode()
    assert len(raw) > MAX_BODY_BYTES
    meter = StreamMeter(stream=False)
    for i in range(0, len(raw), 64 << 10):
        meter.feed(raw[i : i + (64 << 10)], 0.5)
    assert meter.result() == Usage(input_cached=2000, input_uncached=5000, output=1_500_000)
    no_usage = StreamMeter(stream=False)
    no_usage.feed(b'{"choices": [{"text": "' + b"y" * (5 << 20) + b'"}]}', 0.5)
    assert no_usage.result() == Usage()


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (_usage(10, 2, cached=3), Usage(3, 7, 2)),
        ({"prompt_tokens": 4, "completion_tokens": 1}, Usage(0, 4, 1)),
        ({"prompt_tokens": 4, "prompt_tokens_details": {"cached_tokens": 9}}, Usage(4, 0, 0)),  # capped
        ({"prompt_tokens": -1, "completion_tokens": True}, Usage(0, 0, 0)),
        ("nope", None),
    ],
)
def test_usage_objects(obj: Any, expected: Usage | None) -> None:
    assert usage_of(obj) == expected


def test_a_malformed_or_deeply_nested_event_is_skipped_and_a_last_event_without_its_blank_line_counts() -> (
    None
):
    """Events the meter cannot read never break the relay (``choices`` not a list, JSON nested past
    Python's recursion limit); a usage event the stream ends on without a blank line still gives the
    answer's usage; a running usage that does not rise adds no token."""
    meter = StreamMeter(stream=True)
    meter.feed(b'data: {"choices": 5}\n\n', 0.1)
    meter.feed(b"data: " + b"[" * 100_000 + b"\n\n", 0.2)
    meter.feed(_event({"choices": [{"delta": {"content": "ab"}}], "usage": _usage(3, 2)}), 0.3)
    meter.feed(_event({"choices": [{"delta": {"content": "c"}}], "usage": _usage(3, 2)}), 0.4)
    meter.feed(b'data: {"choices": [], "usage": ' + json.dumps(_usage(3, 5)).encode() + b"}", 0.5)
    assert (meter.first_token_s, meter.counted, meter.tpot_s) == (0.3, 2, [])
    assert meter.result() == Usage(input_uncached=3, output=5)
