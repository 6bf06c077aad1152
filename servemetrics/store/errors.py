"""Errors a store raises when the engine behind it fails (the API answers them 503, never 500)."""

from __future__ import annotations


class StoreUnavailableError(RuntimeError):
    """The sample store cannot answer now: the engine is down, timed out, refused the query or answered
    something that is not a valid Prometheus HTTP API response. The message names the engine URL and
    what to check."""


class BufferLockedError(RuntimeError):
    """Another process holds the remote_write buffer directory (two services on one ``buffer_dir``)."""
