"""The demo replica's inference engine: what an LLM engine measures, around the character model's real
generation (docs/demo.md "Engine metrics").

A request ``arrive``s (waiting), is ``schedule``d when one of ``max_num_seqs`` slots is free (running: the
replica generates at most that many sequences at once, the rest wait, so queue time is real), gets its
``token``s one by one (the first one is the time to first token, each later one an inter-token gap) and
``finish``es with a reason: ``stop`` (the model produced its end-of-sequence token), ``length``
(``max_tokens`` reached) or ``abort`` (a model fault or a client gone). Times come from ``clock``
(seconds, ``time.monotonic`` by default; a test passes its own). A token is a character of the character
model (``CharModel.tokenize``).

**Modelled**, not measured (the demo has no GPU and no KV cache): the KV cache, a fixed
``kv_capacity_tokens`` of which each running request holds its prompt and generated tokens in blocks of
``block_size`` (``kv_blocks_used``), and the prefix cache (``PrefixCache``), an LRU of the prompts
already prefilled, in which a new prompt's longest cached prefix counts as hit tokens (whole blocks of
``cache_block``: 16, as vLLM's block, or 1, as SGLang's radix tree with page size 1).

The engine-format metrics are a ``Recorder`` (``demo.vllm_metrics``, ``demo.sglang_metrics``), told of
each step.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from servemetrics.demo.busy import BusyMeter

MAX_MODEL_LEN = 32768
"""Context length in tokens (characters): prompt plus ``max_tokens`` may not exceed it (a 400)."""
MAX_NUM_SEQS = 4
"""Sequences one replica generates at once (vLLM's ``max_num_seqs``); more requests wait."""
KV_CAPACITY_TOKENS = 65536
"""Modelled KV-cache capacity of one replica, in tokens (vLLM: 4096 blocks of 16)."""
BLOCK_SIZE = 16
"""Modelled KV-cache block, in tokens (vLLM's default block size)."""
FINISH_REASONS = ("stop", "length", "abort")
"""vLLM's ``finished_reason`` values (exporters.md §1.1 ``vllm:request_success_total``)."""


@dataclass
class Request:
    """One request as the engine sees it; times in seconds of the engine's clock (None: not yet)."""

    prompt: str
    """The prompt as the model reads it (``CharModel.tokenize``): one token per character."""
    max_tokens: int
    arrival: float
    scheduled: float | None = None
    first_token: float | None = None
    last_token: float | None = None
    generated: int = 0
    cached: int = 0
    """Prompt tokens found in the prefix cache when scheduled."""

    @property
    def prompt_tokens(self) -> int:
        return len(self.prompt)

    @property
    def tokens(self) -> int:
        """Tokens the request holds in the KV cache: its prompt and what it generated so far."""
        return self.prompt_tokens + self.generated


class Recorder(Protocol):
    """An engine's metrics, told of each step of a request (``now`` in the engine clock's seconds)."""

    def scheduled(self, req: Request, now: float) -> None: ...

    def token(self, req: Request, now: float, gap: float | None) -> None:
        """A token was produced; ``gap`` is the seconds since the previous one (None for the first)."""

    def finished(self, req: Request, now: float, reason: str) -> None: ...


def _common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of ``a`` and ``b`` (a binary search over slice compares)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


class PrefixCache:
    """Modelled prefix cache: an LRU of prefilled prompts holding at most ``capacity_tokens`` tokens.

    ``lookup(prompt)`` gives the hit tokens: the longest prefix ``prompt`` shares with a cached prompt,
    at most ``len(prompt) - 1`` (the last prompt token is always computed, as in vLLM) and rounded down
    to whole ``block`` tokens."""

    def __init__(self, capacity_tokens: int, block: int, max_entries: int = 256) -> None:
        if capacity_tokens < 1 or block < 1:
            raise ValueError("capacity_tokens and block must be at least 1")
        self.capacity_tokens, self.block, self.max_entries = capacity_tokens, block, max_entries
        self._lru: OrderedDict[str, None] = OrderedDict()
        self._tokens = 0

    def lookup(self, prompt: str) -> int:
        best, match = 0, None
        for cached in self._lru:
            n = _common_prefix(prompt, cached)
            if n > best:
                best, match = n, cached
        if match is not None:
            self._lru.move_to_end(match)
        return min(best, len(prompt) - 1) // self.block * self.block if prompt else 0

    def insert(self, prompt: str) -> None:
        if prompt in self._lru:
            self._lru.move_to_end(prompt)
            return
        self._lru[prompt] = None
        self._tokens += len(prompt)
        while self._lru and (self._tokens > self.capacity_tokens or len(self._lru) > self.max_entries):
            old, _ = self._lru.popitem(last=False)
            self._tokens -= len(old)


class Engine:
    """The lifecycle of requests on one replica, thread-safe; ``recorder`` is told of every step."""

    def __init__(
        self,
        cache_block: int = BLOCK_SIZE,
        clock: Callable[[], float] = time.monotonic,
        max_num_seqs: int = MAX_NUM_SEQS,
        kv_capacity_tokens: int = KV_CAPACITY_TOKENS,
        block_size: int = BLOCK_SIZE,
    ) -> None:
        self.clock = clock
        self.max_num_seqs, self.kv_capacity_tokens, self.block_size = (
            max_num_seqs,
            kv_capacity_tokens,
            block_size,
        )
        self.prefix_cache = PrefixCache(kv_capacity_tokens, cache_block)
        self.recorder: Recorder | None = None
        self.waiting = 0
        self.running: list[Request] = []
        self._lock = threading.Lock()
        self._slots = threading.Semaphore(max_num_seqs)
        self.busy = BusyMeter(clock)
        """Time with at least one request running (the DCGM replay's utilisation, ``GET /busy``)."""

    def kv_blocks_used(self) -> int:
        """Modelled KV blocks held by the running requests (each request's tokens in whole blocks)."""
        with self._lock:
            return sum(-(-r.tokens // self.block_size) for r in self.running)

    def kv_tokens_used(self) -> int:
        """Modelled KV tokens held by the running requests."""
        with self._lock:
            return sum(r.tokens for r in self.running)

    def arrive(self, prompt: str, max_tokens: int) -> Request:
        """A request arrived (waiting): ``prompt`` as the model reads it."""
        with self._lock:
            self.waiting += 1
            return Request(prompt, max_tokens, self.clock())

    def schedule(self, req: Request) -> None:
        """Wait for a free slot, then run ``req``: its prefix-cache hit is looked up now."""
        self._slots.acquire()
        with self._lock:
            now = self.clock()
            self.waiting -= 1
            self.running.append(req)
            req.scheduled = now
            req.cached = self.prefix_cache.lookup(req.prompt)
        self.busy.enter()
        if self.recorder is not None:
            self.recorder.scheduled(req, now)

    def token(self, req: Request) -> None:
        """``req`` produced one token (the stream sends it now)."""
        now = self.clock()
        gap = None if req.last_token is None else now - req.last_token
        if req.first_token is None:
            req.first_token = now
        req.last_token = now
        req.generated += 1
        if self.recorder is not None:
            self.recorder.token(req, now, gap)

    def finish(self, req: Request, reason: str) -> None:
        """``req`` ended with ``reason`` (``FINISH_REASONS``): its slot is free, its prompt cached when
        it was prefilled (it produced a token)."""
        if reason not in FINISH_REASONS:
            raise ValueError(f"finish reason {reason!r} is not one of {FINISH_REASONS}")
        with self._lock:
            now = self.clock()
            self.running.remove(req)
            if req.first_token is not None:
                self.prefix_cache.insert(req.prompt)
        self.busy.leave()
        self._slots.release()
        if self.recorder is not None:
            self.recorder.finished(req, now, reason)
