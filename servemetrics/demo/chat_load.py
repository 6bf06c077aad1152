"""The demo's Model API load: each team calls ``demo-chat`` with the official ``openai`` client.

Per team (its own key, so its own ``team_id`` and rate limits), Poisson arrivals at ``rate`` a second,
each a call of one kind of ``KINDS`` (weights): a chat completion streamed with
``stream_options.include_usage`` or not streamed, or a completion, the same two ways; so every answer
carries a ``usage`` object, which the load sums per team (``tokens``: ``input_cached``,
``input_uncached``, ``output``, the series' token types). Prompts are 40-400 characters of the corpus,
``REPEAT`` of them one of ``REPEATED`` fixed prompts (cached tokens in the replicas' prefix caches),
``max_tokens`` 8-24. The client does not retry (``max_retries=0``): every answer is counted once
(``counts`` per team: ``2xx`` / ``4xx`` / ``5xx`` by status class, ``rate limited`` for the 429s the
gateway gives for the team's limit, also in ``4xx``; ``error <type>`` without an answer).
"""

from __future__ import annotations

import random
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai

from servemetrics.demo.model import CORPUS

KINDS = {"chat stream": 40, "chat": 30, "completion stream": 15, "completion": 15}
REPEAT = 0.3
"""Share of the prompts that are one of the ``REPEATED`` fixed ones."""
REPEATED = 4
LIMITED = "over its rate limit on Model API"
"""In the message of the gateway's 429 for a team's rate limit (not a deployment's backpressure)."""
TOKEN_TYPES = ("input_cached", "input_uncached", "output")


class ChatLoad:
    """Calls Model API ``model_api`` at ``base`` with one ``openai.OpenAI`` client per team of ``keys``
    (team id -> API key), ``rate`` calls a second per team, until ``stop``."""

    def __init__(self, base: str, keys: dict[str, str], model_api: str, rate: float, seed: int = 2) -> None:
        self.model_api = model_api
        self.rate = rate
        self.rng = random.Random(seed)
        self.text = " ".join(Path(CORPUS).read_text().split())
        self.repeated = [self._new_prompt() for _ in range(REPEATED)]
        self.clients = {
            team: openai.OpenAI(api_key=key, base_url=f"{base}/v1", max_retries=0, timeout=60)
            for team, key in keys.items()
        }
        self.counts: dict[str, Counter[str]] = {team: Counter() for team in keys}
        self.tokens: dict[str, Counter[str]] = {team: Counter() for team in keys}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=16, thread_name_prefix="demo-chat")
        self._threads = [threading.Thread(target=self._arrivals, args=(t,), daemon=True) for t in keys]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        """Stop arrivals and wait for the calls in flight."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._pool.shutdown(wait=True, cancel_futures=True)
        for client in self.clients.values():
            client.close()

    def snapshot(self) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
        """``(counts, tokens)`` per team, copied (keys as in the module docstring)."""
        with self._lock:
            return (
                {t: dict(c) for t, c in self.counts.items()},
                {t: {k: c[k] for k in TOKEN_TYPES} for t, c in self.tokens.items()},
            )

    def _new_prompt(self) -> str:
        size = self.rng.randint(40, 400)
        start = self.rng.randrange(len(self.text))
        return ((self.text + " ") * 2)[start : start + size]

    def _arrivals(self, team: str) -> None:
        rng = random.Random(f"{team}-{self.rng.random()}")
        kinds, weights = list(KINDS), list(KINDS.values())
        while not self._stop.wait(rng.expovariate(self.rate)):
            kind = rng.choices(kinds, weights)[0]
            prompt = rng.choice(self.repeated) if rng.random() < REPEAT else self._new_prompt()
            self._pool.submit(self._call, team, kind, prompt, rng.randint(8, 24))

    def _call(self, team: str, kind: str, prompt: str, max_tokens: int) -> None:
        try:
            usage = self._send(self.clients[team], kind, prompt, max_tokens)
        except openai.APIStatusError as exc:
            # the gateway's body is {"error": "<message>", "retry_after": s}: the client keeps its error
            limited = exc.status_code == 429 and LIMITED in f"{exc.message} {exc.body}"
            self._count(team, f"{exc.status_code // 100}xx", limited)
            return
        except openai.APIError as exc:  # no answer: connection or timeout
            self._count(team, f"error {type(exc).__name__}", False)
            return
        self._count(team, "2xx", False, usage)

    def _send(self, client: openai.OpenAI, kind: str, prompt: str, max_tokens: int) -> Any:
        """One call of ``kind``; the answer's ``usage`` (the last event's, for a stream)."""
        stream = kind.endswith("stream")
        extra: dict[str, Any] = {"stream_options": {"include_usage": True}} if stream else {}
        if kind.startswith("chat"):
            messages: Any = [{"role": "user", "content": prompt}]
            out: Any = client.chat.completions.create(
                model=self.model_api, messages=messages, max_tokens=max_tokens, stream=stream, **extra
            )
        else:
            out = client.completions.create(
                model=self.model_api, prompt=prompt, max_tokens=max_tokens, stream=stream, **extra
            )
        if not stream:
            return out.usage
        usage = None
        for event in out:
            usage = event.usage or usage
        return usage

    def _count(self, team: str, outcome: str, limited: bool, usage: Any = None) -> None:
        with self._lock:
            self.counts[team][outcome] += 1
            if limited:
                self.counts[team]["rate limited"] += 1
            if usage is not None:
                details = usage.prompt_tokens_details
                cached = (details.cached_tokens or 0) if details is not None else 0
                tokens = self.tokens[team]
                tokens["input_cached"] += cached
                tokens["input_uncached"] += usage.prompt_tokens - cached
                tokens["output"] += usage.completion_tokens
