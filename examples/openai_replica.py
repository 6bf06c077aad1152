"""A scripted replica speaking the OpenAI wire format, for Model APIs (docs/model-apis.md) and tests.

- ``POST /v1/chat/completions`` and ``POST /v1/completions`` answer a completion of made-up tokens
  (``t0 t1 …``, one token = one word), streamed as server-sent events with ``"stream": true`` (chunked,
  ``data: [DONE]`` last), else one JSON body. ``usage``: ``prompt_tokens`` = the words of the prompt
  (``messages[].content`` or ``prompt``), ``completion_tokens`` = the tokens sent; a stream sends it as a
  last event only with ``stream_options.include_usage``, and a running one on every chunk with
  ``stream_options.continuous_usage_stats`` (vLLM's). ``logprobs: true`` adds one ``logprobs.content``
  entry per token of a chunk.
- The body's extra field ``script`` shapes the answer: ``chunks`` (tokens per chunk, default
  ``max_tokens`` chunks of 1, ``max_tokens`` default 5), ``gap_ms`` (before each chunk, default 10),
  ``cached`` (prompt tokens reported as cached, ``prompt_tokens_details.cached_tokens``), ``status``
  (answer that status with an error body instead).
- ``GET /health`` answers 200, ``GET /metrics`` an empty exposition.

    python examples/openai_replica.py --port 9201
    curl -N localhost:9201/v1/chat/completions -d '{"model": "chat", "stream": true,
      "messages": [{"role": "user", "content": "hi there"}], "script": {"chunks": [1, 3, 2]}}'
"""

from __future__ import annotations

import argparse
import json
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def prompt_words(body: dict[str, Any]) -> int:
    """The prompt's tokens: its whitespace-separated words."""
    if isinstance(body.get("prompt"), str):
        return len(body["prompt"].split())
    texts = [m.get("content") for m in body.get("messages") or () if isinstance(m, dict)]
    return sum(len(t.split()) for t in texts if isinstance(t, str))


def usage(prompt: int, cached: int, output: int) -> dict[str, Any]:
    """An OpenAI ``usage`` object."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": output,
        "total_tokens": prompt + output,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


class Handler(BaseHTTPRequestHandler):
    """The routes of the module docstring."""

    protocol_version = "HTTP/1.1"

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        self._send(200, b"ok\n" if self.path == "/health" else b"", "text/plain")

    def do_POST(self) -> None:  # noqa: N802
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        chat = self.path == "/v1/chat/completions"
        if self.path not in ("/v1/chat/completions", "/v1/completions"):
            self._send(404, b'{"error": "no such route"}')
            return
        script = body.get("script") or {}
        if script.get("status", 200) != 200:
            self._send(int(script["status"]), json.dumps({"error": {"message": "scripted failure"}}).encode())
            return
        chunks = script.get("chunks") or [1] * int(body.get("max_tokens") or 5)
        prompt, cached = prompt_words(body), int(script.get("cached", 0))
        gap_s = float(script.get("gap_ms", 10)) / 1000
        if body.get("stream"):
            self._stream(body, chat, chunks, prompt, cached, gap_s)
            return
        time.sleep(gap_s * len(chunks))
        text = " ".join(f"t{i}" for i in range(sum(chunks)))
        choice = {"index": 0, "finish_reason": "length"}
        choice |= {"message": {"role": "assistant", "content": text}} if chat else {"text": text}
        answer = {
            "id": "cmpl-1",
            "object": "chat.completion" if chat else "text_completion",
            "created": int(time.time()),
            "model": body.get("model", ""),
            "choices": [choice],
            "usage": usage(prompt, cached, sum(chunks)),
        }
        self._send(200, json.dumps(answer).encode())

    def _stream(
        self, body: dict[str, Any], chat: bool, chunks: list[int], prompt: int, cached: int, gap_s: float
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        options = body.get("stream_options") or {}
        kind = "chat.completion.chunk" if chat else "text_completion"
        sent = 0
        for n in chunks:
            time.sleep(gap_s)
            words = [f"t{sent + i}" for i in range(n)]
            sent += n
            text = "".join(w + " " for w in words)
            choice: dict[str, Any] = {"index": 0, "finish_reason": None}
            choice |= {"delta": {"content": text}} if chat else {"text": text}
            if body.get("logprobs"):
                choice["logprobs"] = {
                    "content": [
                        {"token": w, "logprob": -0.5, "bytes": None, "top_logprobs": []} for w in words
                    ]
                }
            event: dict[str, Any] = {
                "id": "cmpl-1",
                "object": kind,
                "created": 0,
                "model": "",
                "choices": [choice],
            }
            if options.get("continuous_usage_stats"):
                event["usage"] = usage(prompt, cached, sent)
            self._event(event)
        if options.get("include_usage"):
            self._event(
                {
                    "id": "cmpl-1",
                    "object": kind,
                    "created": 0,
                    "model": "",
                    "choices": [],
                    "usage": usage(prompt, cached, sent),
                }
            )
        self._write(b"data: [DONE]\n\n")
        self.wfile.write(b"0\r\n\r\n")

    def _event(self, event: dict[str, Any]) -> None:
        self._write(b"data: " + json.dumps(event).encode() + b"\n\n")

    def _write(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()


def main() -> None:
    """Serve on ``--port`` until killed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    ThreadingHTTPServer(("127.0.0.1", parser.parse_args().port), Handler).serve_forever()


if __name__ == "__main__":
    main()
