"""The demo replica's OpenAI routes, driven by the official ``openai`` client: the model's real tokens
(characters), the ``usage`` object (prompt tokens as the model reads them, cached tokens from the
modelled prefix cache) and the stream's events, streamed and not, chat and completions."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from servemetrics.demo.model import STOP
from tests.demo.conftest import wait_engine_idle

VLLM = {"model_name": "m", "engine": "0"}
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "the  boat"}]
"""Read as "be brief the boat": the contents joined by a space, whitespace runs collapsed (17 tokens)."""


@pytest.fixture
def client(served) -> Iterator[openai.OpenAI]:
    """The official client on the served replica (no retries), closed after the test."""
    with openai.OpenAI(api_key="unused", base_url=f"{served[0]}/v1", max_retries=0, timeout=10) as c:
        yield c


def test_chat_answers_the_models_characters_with_usage(served, client):
    _, reg = served
    first = client.chat.completions.create(model="demo-chat", messages=MESSAGES, max_tokens=12)
    wait_engine_idle()
    text = first.choices[0].message.content or ""
    assert first.object == "chat.completion" and first.model == "demo-chat"
    assert first.choices[0].message.role == "assistant"
    assert 1 <= len(text) <= 12
    assert first.choices[0].finish_reason == ("stop" if text.endswith(STOP) else "length")
    assert len(text) == 12 or text.endswith(STOP)
    assert first.usage is not None
    assert (first.usage.prompt_tokens, first.usage.completion_tokens) == (17, len(text))
    assert first.usage.total_tokens == 17 + len(text)
    assert first.usage.prompt_tokens_details is not None
    assert first.usage.prompt_tokens_details.cached_tokens == 0  # nothing prefilled yet
    assert reg.get_sample_value("vllm:generation_tokens_total", VLLM) == len(text)
    assert reg.get_sample_value("vllm:prompt_tokens_total", VLLM) == 17
    again = client.chat.completions.create(model="demo-chat", messages=MESSAGES, max_tokens=3)
    wait_engine_idle()
    assert again.usage is not None and again.usage.prompt_tokens_details is not None
    # the same prompt again: its 16-token block is in the modelled prefix cache (at most 16 of 17)
    assert again.usage.prompt_tokens_details.cached_tokens == 16


def test_a_chat_stream_sends_a_token_a_chunk_and_the_usage_last(served, client):
    _, reg = served
    stream = client.chat.completions.create(
        model="demo-chat",
        messages=MESSAGES,
        max_tokens=10,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    wait_engine_idle()
    assert chunks[0].choices[0].delta.role == "assistant" and chunks[0].choices[0].delta.content == ""
    tokens = [c.choices[0].delta.content for c in chunks[1:-2]]
    assert all(t is not None and len(t) == 1 for t in tokens)  # one character a chunk
    text = "".join(t or "" for t in tokens)
    assert chunks[-2].choices[0].finish_reason == ("stop" if text.endswith(STOP) else "length")
    assert [c.usage for c in chunks[:-1]] == [None] * (len(chunks) - 1)
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (17, len(text))
    assert reg.get_sample_value("vllm:generation_tokens_total", VLLM) == len(text)


def test_completions_stream_and_not(client):
    stream = client.completions.create(model="demo-chat", prompt="the boat came", max_tokens=6, stream=True)
    chunks = list(stream)
    wait_engine_idle()
    text = "".join(c.choices[0].text for c in chunks)
    assert 1 <= len(text) <= 6 and all(c.usage is None for c in chunks)  # no usage unless asked
    assert chunks[-1].choices[0].finish_reason == ("stop" if text.endswith(STOP) else "length")
    one = client.completions.create(model="demo-chat", prompt=["the boat came"], max_tokens=5)
    wait_engine_idle()
    assert one.object == "text_completion" and one.usage is not None
    assert (one.usage.prompt_tokens, one.usage.completion_tokens) == (13, len(one.choices[0].text))


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"max_tokens": 0}, "max_tokens must be an integer from 1 to 256"),
        ({"max_tokens": 4, "n": 2}, "n must be 1"),
        ({"max_tokens": 4, "temperature": 9}, "temperature must be a number from 0 to 5"),
    ],
)
def test_bad_requests_are_openai_400s(client, kwargs, says):
    with pytest.raises(openai.BadRequestError) as err:
        client.chat.completions.create(model="demo-chat", messages=MESSAGES, **kwargs)
    assert err.value.status_code == 400 and says in err.value.message
    with pytest.raises(openai.BadRequestError) as empty:
        client.completions.create(model="demo-chat", prompt="   ", max_tokens=3)
    assert "the prompt is empty" in empty.value.message
