"""Limits of one scrape, as Prometheus' ``scrape_config`` has them (docs/security.md "Limits").

- ``body_size_limit``: the answer's body, counted decompressed while it streams; reading stops at the
  first byte past the limit (a gzip bomb is stopped after ``limit + 1`` inflated bytes: the body is
  inflated here, in steps of at most what is left of the limit, not by httpx).
- ``sample_limit``: samples after the adapters (what would be stored), as Prometheus counts after
  ``metric_relabel_configs``; 0 turns it off. The scraper counts them while the body is parsed and
  stops parsing once they are over the limit (``check_sample_count``), so a scrape over it costs about
  the limit's worth of parsing, not the body's.
- ``label_limit``, ``label_name_length_limit``, ``label_value_length_limit``: per sample after the
  adapters (target labels included, the metric name not counted); 0 turns each off.

- ``custom_series_limit``: custom series (the unmapped series of a replica's target, kept under their own
  names: ``adapters.custom``) kept per scrape; the rest are dropped and counted, the scrape does not fail.

A scrape over any other limit fails whole (``ScrapeLimitError``): ``up`` = 0 with the reason, nothing of it
stored, the target's previous series marked stale, as for any failed scrape.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import httpx

from servemetrics.samples import Sample

ACCEPT_ENCODING = "gzip"
"""What a scrape asks for: the body is inflated here (``read_body``), and gzip is the one coding read."""
_GZIP_WBITS = 16 + zlib.MAX_WBITS


class ScrapeLimitError(Exception):
    """A scrape over one of its limits (or in a content coding it cannot count); the message says which,
    by its config key."""


@dataclass(frozen=True)
class ScrapeLimits:
    """Limits of one scrape (config: the top-level keys of the same names; docs/configuration.md).

    Attributes:
        body_size_limit: bytes of the decompressed body at most.
        sample_limit: samples at most after the adapters (0: no limit).
        label_limit: labels per sample at most, the name not counted (0: no limit).
        label_name_length_limit: characters per label name at most (0: no limit).
        label_value_length_limit: characters per label value at most (0: no limit).
        custom_series_limit: custom series kept per scrape of a replica's target (0: none kept).
    """

    body_size_limit: int = 64 << 20
    sample_limit: int = 1_000_000
    label_limit: int = 64
    label_name_length_limit: int = 1024
    label_value_length_limit: int = 16384
    custom_series_limit: int = 1000


def _too_large(limit: int) -> ScrapeLimitError:
    return ScrapeLimitError(
        f"body_size_limit exceeded: the answer is over {limit} bytes (decompressed); the limit is {limit}"
    )


async def read_body(resp: httpx.Response, limit: int) -> bytes:
    """The body of the streamed ``resp``, decompressed (``Content-Encoding`` gzip or none), reading and
    inflating no more than ``limit + 1`` bytes.

    Raises:
        ScrapeLimitError: the body is over ``limit`` bytes decompressed, or has another content coding.
        httpx.HTTPError: reading failed; zlib.error: a damaged gzip body.
    """
    try:
        body = resp.content  # read already (an answer made in memory, e.g. by a mock transport)
    except httpx.ResponseNotRead:
        return await _read_stream(resp, limit)
    if len(body) > limit:
        raise _too_large(limit)
    return body


async def _read_stream(resp: httpx.Response, limit: int) -> bytes:
    """``read_body`` of a response not read yet: its raw bytes inflated here, ``limit + 1`` at most."""
    coding = resp.headers.get("content-encoding", "identity").strip().lower()
    if coding not in ("", "identity", "gzip", "x-gzip"):
        raise ScrapeLimitError(f"the answer's Content-Encoding {coding!r} is not read; send gzip or none")
    inflate = zlib.decompressobj(_GZIP_WBITS) if "gzip" in coding else None
    parts: list[bytes] = []
    size = 0
    async for chunk in resp.aiter_raw():
        while chunk:
            if inflate is None:
                out, chunk = chunk, b""
            else:
                out = inflate.decompress(chunk, limit + 1 - size)
                chunk = b"" if inflate.eof else inflate.unconsumed_tail
            size += len(out)
            if size > limit:
                raise _too_large(limit)
            parts.append(out)
        if inflate is not None and inflate.eof:
            break  # bytes after the gzip member are not read
    if inflate is not None and not inflate.eof:
        raise zlib.error("the gzip body ends before its end")
    return b"".join(parts)


def _series(s: Sample) -> str:
    """The series of ``s`` for an error message, cut to 100 characters."""
    text = s.name + "{" + ",".join(f'{k}="{v}"' for k, v in s.labels) + "}"
    return text if len(text) <= 100 else text[:100] + "…"


def check_sample_count(count: int, limits: ScrapeLimits, *, finished: bool = True) -> None:
    """Nothing when ``count`` samples (adapted) are within ``limits.sample_limit`` (0: no limit).

    Args:
        count: the samples of the scrape, or with ``finished=False`` of the part parsed so far.

    Raises:
        ScrapeLimitError: ``sample_limit exceeded: N samples, the limit is L``; ``N samples before
            parsing stopped`` when the body was not parsed to its end.
    """
    if limits.sample_limit and count > limits.sample_limit:
        where = "" if finished else " before parsing stopped"
        raise ScrapeLimitError(
            f"sample_limit exceeded: {count} samples{where}, the limit is {limits.sample_limit}"
        )


def check_samples(samples: Sequence[Sample], limits: ScrapeLimits) -> None:
    """Nothing when ``samples`` (one scrape, adapted) are within ``limits``.

    Raises:
        ScrapeLimitError: naming the limit exceeded, the count and the limit (and the series).
    """
    check_sample_count(len(samples), limits)
    n_labels, name_len, value_len = (
        limits.label_limit or 1 << 62,
        limits.label_name_length_limit or 1 << 62,
        limits.label_value_length_limit or 1 << 62,
    )
    for s in samples:
        if len(s.labels) > n_labels:
            raise ScrapeLimitError(
                f"label_limit exceeded: series {_series(s)} has {len(s.labels)} labels, the limit is "
                f"{n_labels}"
            )
        for k, v in s.labels:
            if len(k) > name_len:
                raise ScrapeLimitError(
                    f"label_name_length_limit exceeded: series {_series(s)} has a label name of {len(k)} "
                    f"characters, the limit is {name_len}"
                )
            if len(v) > value_len:
                raise ScrapeLimitError(
                    f"label_value_length_limit exceeded: label {k} of series {_series(s)} has a value of "
                    f"{len(v)} characters, the limit is {value_len}"
                )
