"""``RemoteWriteClient``: send canonical samples to an engine by Prometheus remote_write 1.0.

``append`` only queues a batch in memory (it never touches the network or the disk). One sender thread
takes up to ``max_samples_per_send`` samples at a time, encodes them (``remote_write.encode_batch``),
compresses them
(snappy block format) and POSTs them with the headers of the remote_write 1.0 spec
(``Content-Encoding: snappy``, ``Content-Type: application/x-protobuf``,
``X-Prometheus-Remote-Write-Version: 0.1.0``).

- 2xx: sent. 5xx, 429 and connection errors / timeouts: retried with exponential backoff
  (``min_backoff_s`` doubling up to ``max_backoff_s``), as the spec asks of senders.
- Any other 4xx, or a 5xx whose text is one of Prometheus' sample refusals (``PERMANENT_5XX``): the
  engine refuses something in the body (an out-of-bounds timestamp, a bad label).
  The body is split in halves and each half sent again, down to single samples, so one bad sample does
  not lose its neighbours; a single sample refused is dropped, logged and counted as failed.
- While a send fails, everything queued in memory is spilled to the ``SegmentBuffer`` in ``buffer_dir``
  (fsync'd), and sending resumes from the buffer, oldest first, when the engine answers again; so does a
  restart of the service (``close`` spills what it could not send). Memory above
  ``memory_limit_samples`` is spilled too.

Counters (``stats()``): samples queued (memory + buffer + in flight), sent, failed, retries, buffer bytes.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import cramjam
import httpx

from servemetrics.remote_write import decode_write_request, encode_batch, encode_write_request
from servemetrics.samples import SampleBatch
from servemetrics.store.spill import SegmentBuffer
from servemetrics.types import SeriesKey, escape_log

log = logging.getLogger(__name__)

REMOTE_WRITE_HEADERS = {
    "Content-Encoding": "snappy",
    "Content-Type": "application/x-protobuf",
    "X-Prometheus-Remote-Write-Version": "0.1.0",
    "User-Agent": "servemetrics-remote-write",
}
"""Headers of every remote_write 1.0 request (Prometheus remote write spec 1.0, "Protocol")."""


@dataclass(frozen=True)
class WriterOptions:
    """Where and how to send.

    Attributes:
        url: the engine's remote_write endpoint (``http://host:9090/api/v1/write``).
        buffer_dir: directory of the on-disk buffer (created if missing).
        headers: extra headers (bearer token, tenant header).
        basic_auth: ``(username, password)`` or None.
        max_samples_per_send: samples per request.
        memory_limit_samples: queued samples kept in memory before they are spilled to disk.
        timeout_s: per-request timeout in seconds.
        min_backoff_s / max_backoff_s: retry delays in seconds (doubling from min to max).
    """

    url: str
    buffer_dir: Path
    headers: Mapping[str, str] = field(default_factory=dict)
    basic_auth: tuple[str, str] | None = None
    max_samples_per_send: int = 5000
    memory_limit_samples: int = 1_000_000
    timeout_s: float = 10.0
    min_backoff_s: float = 0.2
    max_backoff_s: float = 5.0


class _Retry(Exception):
    """A send failed in a way worth retrying (5xx, 429, connection error, timeout)."""


class RemoteWriteClient:
    """Queue samples and send them to ``options.url`` from a background thread (see module docstring).

    Raises:
        BufferLockedError: another process holds ``options.buffer_dir``.
    """

    def __init__(self, options: WriterOptions) -> None:
        self.options = options
        self._buffer = SegmentBuffer(options.buffer_dir)
        self._http = httpx.Client(
            timeout=options.timeout_s,
            headers={**REMOTE_WRITE_HEADERS, **options.headers},
            auth=options.basic_auth,
        )
        self._labels: dict[SeriesKey, bytes] = {}
        self._mem: collections.deque[SampleBatch] = collections.deque()
        self._mem_samples = 0
        self._in_flight = 0
        self._cond = threading.Condition()
        self._closing = False
        self._stop = threading.Event()
        self.sent = self.failed = self.retries = 0
        self._thread = threading.Thread(target=self._run, name="remote-write", daemon=True)
        self._thread.start()

    # -- the caller's side -----------------------------------------------------------------------

    def append(self, batch: SampleBatch) -> int:
        """Queue ``batch`` (never blocks on the network); return the number of samples queued."""
        n = len(batch)
        if not n:
            return 0
        with self._cond:
            if self._closing:
                raise RuntimeError("the remote_write client is closed")
            self._mem.append(batch)
            self._mem_samples += n
            self._cond.notify()
        return n

    def queued(self) -> int:
        """Samples not yet acknowledged by the engine: in memory, in flight and in the disk buffer."""
        with self._cond:
            return self._mem_samples + self._in_flight + self._buffer.samples

    def stats(self) -> dict[str, float]:
        """``queue_samples``, ``sent_samples``, ``failed_samples``, ``retries``, ``buffer_bytes``."""
        with self._cond:
            return {
                "queue_samples": float(self._mem_samples + self._in_flight + self._buffer.samples),
                "sent_samples": float(self.sent),
                "failed_samples": float(self.failed),
                "retries": float(self.retries),
                "buffer_bytes": float(self._buffer.bytes),
            }

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until everything queued so far is sent (or dropped as refused); False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._mem_samples or self._in_flight or self._buffer.samples:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._cond.wait(min(left, 0.05))
        return True

    def close(self, timeout_s: float = 10.0) -> None:
        """Try to send what is queued for up to ``timeout_s``, then spill the rest to ``buffer_dir``
        (sent on the next start) and stop the sender."""
        with self._cond:
            if self._closing:
                return
            self._closing = True
        self.flush(timeout_s)
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self._thread.join()
        self._spill_memory()
        self._buffer.close()
        self._http.close()

    # -- the sender thread -----------------------------------------------------------------------

    def _take(self) -> SampleBatch | None:
        """Up to ``max_samples_per_send`` samples from the front of the memory queue, as one batch
        (pieces of several batches are encoded separately and concatenated)."""
        with self._cond:
            if not self._mem:
                return None
            first = self._mem[0]
            limit = self.options.max_samples_per_send
            if len(first) <= limit:
                self._mem.popleft()
                piece = first
            else:
                piece = _slice(first, 0, limit)
                self._mem[0] = _slice(first, limit, len(first))
            self._mem_samples -= len(piece)
            self._in_flight = len(piece)
            return piece

    def _encode(self, batch: SampleBatch) -> tuple[int, bytes]:
        raw, n = encode_batch(batch, self._labels)
        if len(self._labels) > 100_000:
            self._labels.clear()
        return n, bytes(cramjam.snappy.compress_raw(raw))

    def _spill_memory(self, first: tuple[int, bytes] | None = None) -> None:
        """Move ``first`` (a record taken from memory) and everything in memory to the disk buffer."""
        records = [first] if first is not None and first[0] else []
        while (batch := self._take()) is not None:
            records.append(self._encode(batch))
            if len(records) >= 64:
                self._write_records(records)
                records = []
        self._write_records(records)

    def _write_records(self, records: list[tuple[int, bytes]]) -> None:
        with self._cond:
            self._buffer.write([r for r in records if r[0]])
            self._in_flight = 0
            self._cond.notify_all()

    def _next(self) -> tuple[tuple[int, bytes], bool] | None:
        """The next record to send and whether it comes from the disk buffer (oldest first)."""
        with self._cond:
            spill = self._mem_samples > self.options.memory_limit_samples
        if spill:
            self._spill_memory()
        record = self._buffer.peek()
        if record is not None:
            return record, True
        batch = self._take()
        if batch is None:
            with self._cond:
                if not self._mem and not self._stop.is_set():
                    self._cond.wait(0.5)
            return None
        return self._encode(batch), False

    def _run(self) -> None:
        backoff = self.options.min_backoff_s
        while not self._stop.is_set():
            nxt = self._next()
            if nxt is None:
                continue
            record, from_disk = nxt
            try:
                self._deliver(*record)
            except _Retry:
                self._spill_memory(None if from_disk else record)  # durable while the engine is down
                self._stop.wait(backoff)
                backoff = min(backoff * 2, self.options.max_backoff_s)
                continue
            backoff = self.options.min_backoff_s
            with self._cond:
                if from_disk:
                    self._buffer.ack()
                self._in_flight = 0
                self._cond.notify_all()

    def _post(self, body: bytes) -> httpx.Response:
        try:
            return self._http.post(self.options.url, content=body)
        except httpx.HTTPError as exc:
            self._count_retry(f"{type(exc).__name__}: {exc}")
            raise _Retry from exc

    def _count_retry(self, why: str) -> None:
        with self._cond:
            self.retries += 1
        log.warning(
            "remote_write to %s failed (%s); retrying with backoff", self.options.url, escape_log(why)
        )

    def _deliver(self, samples: int, body: bytes) -> None:
        """Send one body; raise ``_Retry`` to try it again later; split it when the engine refuses it."""
        if not samples:
            return
        resp = self._post(body)
        if resp.is_success:
            with self._cond:
                self.sent += samples
            return
        if resp.status_code == 429 or (resp.status_code >= 500 and not _refusal(resp.text)):
            self._count_retry(f"HTTP {resp.status_code}: {resp.text[:200]}")
            raise _Retry
        self._split(samples, body, f"HTTP {resp.status_code}: {resp.text[:300]}")

    def _split(self, samples: int, body: bytes, why: str) -> None:
        """Send the halves of a refused body (retrying each until it is sent or refused)."""
        rows = decode_write_request(body)
        if len(rows) <= 1:
            with self._cond:
                self.failed += samples
            log.error(
                "the engine at %s refused %s; dropped (%s)",
                self.options.url,
                rows or "a body",
                escape_log(why),
            )
            return
        half = len(rows) // 2
        for part in (rows[:half], rows[half:]):
            piece = bytes(encode_write_request(part))
            backoff = self.options.min_backoff_s
            while True:
                try:
                    self._deliver(len(part), piece)
                    break
                except _Retry:
                    if self._stop.wait(backoff):
                        raise
                    backoff = min(backoff * 2, self.options.max_backoff_s)


PERMANENT_5XX = ("too old sample", "out of bounds", "out of order sample", "duplicate sample for timestamp")
"""Prometheus 2.42 answers some refusals of a sample with a 500 (``too old sample``: older than the
out-of-order window); retrying those would block the queue forever, so they are treated like a 400."""


def _refusal(text: str) -> bool:
    return any(p in text for p in PERMANENT_5XX)


def _slice(batch: SampleBatch, lo: int, hi: int) -> SampleBatch:
    return SampleBatch(batch.series, batch.series_index[lo:hi], batch.ts_ms[lo:hi], batch.values[lo:hi])
