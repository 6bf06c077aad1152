"""The OpenAI wire format of the demo replica's ``POST /v1/chat/completions`` and ``POST /v1/completions``
(docs/demo.md "The Model API"): reading a request, building the answer, its stream events and errors.

A token is a character of the character model (``CharModel.tokenize``), so ``usage`` counts characters:
``prompt_tokens`` of the prompt as the model reads it (chat: the messages' text contents joined by one
space), ``completion_tokens`` of the output, ``prompt_tokens_details.cached_tokens`` the prompt tokens
the replica's modelled prefix cache held (``Request.cached``). Read of a request: ``model`` (echoed),
``messages`` (chat: a list of ``{"role", "content"}``, content a string or a list of ``{"type": "text",
"text"}`` parts) or ``prompt`` (completions: a string or a list of one), ``max_tokens`` (chat also
``max_completion_tokens``; 1-256, default 16), ``temperature`` (0-5, default 0.8; below 0.05 samples
as 0.05), ``n`` (only 1), ``stream``, ``stream_options.include_usage``. Other fields are ignored.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"
MAX_TOKENS = 256
"""The most tokens (characters) one answer may ask for, as ``/predict``."""


class OpenAIBadRequest(ValueError):
    """A request the replica answers 400 (``error_body``), naming the field at fault (``param``)."""

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class Completion:
    """A parsed completion request: ``prompt`` as sent (the model tokenizes it), limits and options."""

    chat: bool
    model: str
    prompt: str
    max_tokens: int
    temperature: float
    stream: bool
    include_usage: bool
    id: str
    created: int
    """The answer's ``id`` and ``created`` (epoch seconds)."""


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text") for p in content if isinstance(p, dict) and p.get("type") == "text"]
        if all(isinstance(t, str) for t in parts):
            return " ".join(str(t) for t in parts)
    raise OpenAIBadRequest("a message's content must be a string or a list of text parts", "messages")


def _prompt(req: dict[str, Any], chat: bool) -> str:
    if chat:
        messages = req.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise OpenAIBadRequest("messages must be a non-empty list of {role, content} objects", "messages")
        text = " ".join(_text_of(m.get("content", "")) for m in messages)
    else:
        prompt = req.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1:
            prompt = prompt[0]
        if not isinstance(prompt, str):
            raise OpenAIBadRequest("prompt must be a string (or a list of one string)", "prompt")
        text = prompt
    if not text.strip():
        raise OpenAIBadRequest("the prompt is empty", "messages" if chat else "prompt")
    return text


def _number(req: dict[str, Any], name: str, default: float, low: float, high: float) -> float:
    value = req.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float) or not low <= value <= high:
        raise OpenAIBadRequest(f"{name} must be a number from {low:g} to {high:g}", name)
    return float(value)


def parse_completion(body: bytes, chat: bool) -> Completion:
    """The request of a chat (``chat``) or completions body; OpenAIBadRequest saying what is wrong."""
    try:
        req = json.loads(body or b"null")
    except ValueError:
        raise OpenAIBadRequest("the body is not JSON") from None
    if not isinstance(req, dict):
        raise OpenAIBadRequest("send a JSON object")
    name = "max_completion_tokens" if chat and "max_completion_tokens" in req else "max_tokens"
    tokens = req.get(name, 16)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 1 <= tokens <= MAX_TOKENS:
        raise OpenAIBadRequest(f"{name} must be an integer from 1 to {MAX_TOKENS}", name)
    if req.get("n", 1) != 1:
        raise OpenAIBadRequest("n must be 1: the demo model answers one choice", "n")
    stream = req.get("stream", False)
    if not isinstance(stream, bool):
        raise OpenAIBadRequest("stream must be true or false", "stream")
    options = req.get("stream_options")
    include_usage = bool(options.get("include_usage")) if isinstance(options, dict) else False
    return Completion(
        chat=chat,
        model=str(req.get("model", "")),
        prompt=_prompt(req, chat),
        max_tokens=tokens,
        temperature=max(0.05, _number(req, "temperature", 0.8, 0.0, 5.0)),
        stream=stream,
        include_usage=stream and include_usage,
        id=f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex[:24]}",
        created=int(time.time()),
    )


def usage(prompt_tokens: int, cached_tokens: int, completion_tokens: int) -> dict[str, Any]:
    """The OpenAI ``usage`` object (token counts: characters)."""
    return {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
        "prompt_tokens_details": {"cached_tokens": cached_tokens},
    }


def answer(c: Completion, text: str, finish_reason: str, use: dict[str, Any]) -> dict[str, Any]:
    """The non-streamed answer: one choice of ``text`` ended by ``finish_reason`` (stop, length)."""
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish_reason, "logprobs": None}
    if c.chat:
        choice["message"] = {"role": "assistant", "content": text}
    else:
        choice["text"] = text
    return {
        "id": c.id,
        "object": "chat.completion" if c.chat else "text_completion",
        "created": c.created,
        "model": c.model,
        "choices": [choice],
        "usage": use,
    }


def chunk(c: Completion, text: str | None, finish_reason: str | None = None) -> bytes:
    """One stream event (``data: …\\n\\n``): a choice with new ``text`` (chat: the first event has
    ``text`` None and the assistant role), or the last one with ``finish_reason`` and no text."""
    choice: dict[str, Any] = {"index": 0, "finish_reason": finish_reason, "logprobs": None}
    if c.chat:
        choice["delta"] = {"role": "assistant", "content": ""} if text is None else {"content": text}
        if finish_reason is not None:
            choice["delta"] = {}
    else:
        choice["text"] = text or ""
    event: dict[str, Any] = {
        "id": c.id,
        "object": "chat.completion.chunk" if c.chat else "text_completion",
        "created": c.created,
        "model": c.model,
        "choices": [choice],
    }
    if c.include_usage:
        event["usage"] = None  # as OpenAI: null on every event but the last
    return _event(event)


def usage_chunk(c: Completion, use: dict[str, Any]) -> bytes:
    """The last event of a stream with ``stream_options.include_usage``: no choices, the ``usage``."""
    kind = "chat.completion.chunk" if c.chat else "text_completion"
    return _event(
        {"id": c.id, "object": kind, "created": c.created, "model": c.model, "choices": [], "usage": use}
    )


DONE = b"data: [DONE]\n\n"


def _event(event: dict[str, Any]) -> bytes:
    return b"data: " + json.dumps(event).encode() + b"\n\n"


def error_body(message: str, param: str | None = None) -> dict[str, Any]:
    """OpenAI's error answer (the clients raise ``BadRequestError`` with this message)."""
    return {"error": {"message": message, "type": "invalid_request_error", "param": param, "code": None}}
