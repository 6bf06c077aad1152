"""Reading tokens and token timings out of an OpenAI-format answer as the gateway relays it.

The Model API paths (docs/model-apis.md "Serving") may read the answer, unlike ``…/predict``. Rules:

- **Tokens**: the OpenAI ``usage`` object (``prompt_tokens``, ``completion_tokens``; cached input
  tokens from ``prompt_tokens_details.cached_tokens``, the rest of the prompt uncached). A non-streamed
  answer carries it in its body; a stream carries it in its last event when the client asked
  ``stream_options.include_usage`` (or the server sends it anyway). A stream without one: output tokens
  are the counted token chunks (below), input tokens unknown (0).
- **Token chunks** of a stream: the events whose choices carry new output (chat ``delta.content`` /
  ``delta.reasoning_content`` / ``delta.tool_calls``, completions ``text``). The new tokens of one:
  the rise of ``usage.completion_tokens`` when the event carries a running usage (vLLM's
  ``continuous_usage_stats``), else the entries of ``logprobs.content`` (one per token) when given, else 1.
- **Time to first token**: arrival to the first token chunk (a non-streamed answer: its first body byte).
- **Time per output token** (metrics-dashboard.md "LLM token speed", the platform's rule): every token
  chunk after the first is one observation, the time since the previous token chunk divided by its new
  tokens; a chunk of several tokens weighs as much as a chunk of one. Decode tokens/s is 1 / their mean
  (``catalog.llm``'s ``Formula.INVERSE``, computed by the query layer).

Times are seconds since the request's arrival, as ``proxy.Relay`` measures them. Events split across
network reads are joined; events that arrive in one read share its time.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

MAX_BODY_BYTES = 4 << 20
"""A non-streamed answer is kept whole for its ``usage`` up to this many bytes (beyond: its tail only)."""
TAIL_BYTES = 64 << 10
"""Of a longer non-streamed answer, the last this many bytes are kept: servers write ``usage`` after
``choices`` (vLLM, SGLang, OpenAI), so a long answer is still counted and charged to its team's
``tokens_per_minute`` (without this, a caller asking for a long answer spent tokens no limit saw)."""
MAX_EVENT_BYTES = 1 << 20
"""A stream event longer than this is skipped, not parsed (the relay still passes it on)."""


@dataclass(frozen=True)
class Usage:
    """Tokens of one answer: input served from the prompt cache, the rest of the input, output."""

    input_cached: int = 0
    input_uncached: int = 0
    output: int = 0

    @property
    def total(self) -> int:
        """Input and output tokens together (what ``tokens_per_minute`` counts)."""
        return self.input_cached + self.input_uncached + self.output


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def usage_of(obj: Any) -> Usage | None:
    """The ``Usage`` of an OpenAI ``usage`` object (None when ``obj`` is not a mapping); cached tokens
    above the prompt's count are capped at it."""
    if not isinstance(obj, dict):
        return None
    prompt = _int(obj.get("prompt_tokens"))
    details = obj.get("prompt_tokens_details")
    cached = min(_int(details.get("cached_tokens")) if isinstance(details, dict) else 0, prompt)
    return Usage(cached, prompt - cached, _int(obj.get("completion_tokens")))


def _has_output(choice: dict[str, Any]) -> bool:
    delta = choice.get("delta")
    if isinstance(delta, dict):
        return any(delta.get(k) for k in ("content", "reasoning_content", "tool_calls"))
    return bool(choice.get("text"))


def _logprob_tokens(choice: dict[str, Any]) -> int:
    logprobs = choice.get("logprobs")
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    if isinstance(content, list):
        return len(content)
    tokens = logprobs.get("tokens") if isinstance(logprobs, dict) else None  # completions' format
    return len(tokens) if isinstance(tokens, list) else 0


@dataclass
class StreamMeter:
    """Fed the body chunks of one answer (``feed``) and then ``result`` read; ``stream`` False keeps
    the body (up to ``MAX_BODY_BYTES``) to read its ``usage`` at the end."""

    stream: bool
    first_token_s: float | None = None
    tpot_s: list[float] = field(default_factory=list)
    """The time-per-output-token observations, seconds per token, in arrival order."""
    counted: int = 0
    """Output tokens counted from the token chunks."""
    usage: Usage | None = None
    """The last ``usage`` the answer carried (None: none)."""
    _buffer: bytes = b""
    _last_token_s: float | None = None
    _running: int = 0  # the last running usage.completion_tokens of the stream
    _too_long: bool = False

    def feed(self, chunk: bytes, at_s: float) -> None:
        """One body chunk that reached the client ``at_s`` seconds after arrival."""
        if not self.stream:
            if self.first_token_s is None:
                self.first_token_s = at_s
            self._buffer += chunk
            if len(self._buffer) > MAX_BODY_BYTES:
                self._too_long = True
            if self._too_long:
                self._buffer = self._buffer[-TAIL_BYTES:]
            return
        self._buffer += chunk
        new = 0
        while True:
            end, size = _event_end(self._buffer)
            if end < 0:
                break
            event, self._buffer = self._buffer[:end], self._buffer[end + size :]
            new += self._event(event)
        if len(self._buffer) > MAX_EVENT_BYTES:
            self._buffer = b""  # an endless event: skipped
        self._tokens_at(new, at_s)

    def _tokens_at(self, new: int, at_s: float) -> None:
        """``new`` output tokens reached the client ``at_s`` s after arrival, in one chunk (the events of
        one read are one chunk: their tokens arrived together, no time apart)."""
        if not new:
            return
        self.counted += new
        if self._last_token_s is None:
            self.first_token_s = at_s
        else:
            self.tpot_s.append((at_s - self._last_token_s) / new)
        self._last_token_s = at_s

    def _event(self, event: bytes) -> int:
        """Read one SSE event; the new output tokens it carries."""
        data = b"\n".join(
            line[5:].lstrip(b" ")
            for line in event.replace(b"\r\n", b"\n").split(b"\n")
            if line.startswith(b"data:")
        )
        if not data or data.strip() == b"[DONE]":
            return 0
        try:
            obj = json.loads(data)
        except (ValueError, RecursionError):  # not JSON, or nested past Python's recursion limit
            return 0
        return self._chunk(obj) if isinstance(obj, dict) else 0

    def _chunk(self, obj: dict[str, Any]) -> int:
        """The new output tokens of one stream chunk: by its running ``usage`` when it carries one (what
        it adds to the last), else its logprobs' tokens or 1 per chunk with content."""
        usage = usage_of(obj.get("usage"))
        raw = obj.get("choices")
        choices = [c for c in raw if isinstance(c, dict)] if isinstance(raw, list) else []
        new = 0
        if any(_has_output(c) for c in choices):
            if usage is not None:
                new = max(0, usage.output - self._running)
            else:
                new = sum(_logprob_tokens(c) for c in choices) or 1
        if usage is not None:
            self.usage = usage
            self._running = max(self._running, usage.output)
        return new

    def result(self) -> Usage:
        """The answer's tokens: its ``usage`` when it carried one, else (a stream) the counted output."""
        if self.stream and self._buffer.strip():  # a last event the stream ended without a blank line after
            event, self._buffer = self._buffer, b""
            self.counted += self._event(event)  # its tokens count; its time is unknown (no TPOT)
        if not self.stream and self._too_long:
            return _usage_in_tail(self._buffer) or Usage()
        if not self.stream:
            try:
                body = json.loads(self._buffer)
            except (ValueError, RecursionError):
                body = None
            found = usage_of(body.get("usage")) if isinstance(body, dict) else None
            return found or Usage()
        if self.usage is not None:
            return self.usage
        return Usage(output=self.counted)


def _usage_in_tail(tail: bytes) -> Usage | None:
    """The ``Usage`` of the last ``"usage": {...}`` member in ``tail`` (the end of a JSON answer too long
    to keep whole); None when the tail has none that parses."""
    at = len(tail)
    while (at := tail.rfind(b'"usage"', 0, at)) >= 0:
        rest = tail[at + len(b'"usage"') :].lstrip()
        if rest.startswith(b":"):
            try:
                obj, _ = json.JSONDecoder().raw_decode(rest[1:].lstrip().decode("utf-8", "replace"))
            except (ValueError, RecursionError):
                continue
            if (found := usage_of(obj)) is not None:
                return found
    return None


def _event_end(buffer: bytes) -> tuple[int, int]:
    """Where the first complete SSE event of ``buffer`` ends (a blank line) and the separator's size;
    (-1, 0) when none is complete."""
    found = [(i, len(sep)) for sep in (b"\n\n", b"\r\n\r\n", b"\r\r") if (i := buffer.find(sep)) >= 0]
    return min(found) if found else (-1, 0)
