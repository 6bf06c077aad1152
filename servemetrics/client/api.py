"""HTTP calls to a running service and the exit codes of their failures (platform-facts §5 "Error
responses": the platform CLI's ``WrapHTTPStatus``).

Every request sends ``Authorization: Api-Key <key>``, as the platform CLI does (platform-facts §3
"Auth"). An error answer's ``{"error": …}`` message is kept for the one-line message the CLI prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

EXIT_USAGE = 2
"""A bad flag or flag combination (Typer's own code for usage errors)."""
EXIT_AUTH = 3
EXIT_NOT_FOUND = 4
EXIT_VALIDATION = 5
EXIT_SERVER = 6
EXIT_UNREACHABLE = 1
"""No answer at all (connection refused, timeout): not an HTTP status, so none of 3-6."""
TIMEOUT_S = 120.0
"""Seconds to wait for an answer: a 7-day SERIES query of many metrics can take a while."""

Params = Mapping[str, str | int | Sequence[str]]


def exit_code_for(status: int) -> int:
    """The exit code of an HTTP error ``status``: 3 for 401/403, 4 for 404, 5 for another 4xx, 6 for a
    5xx (platform-facts §5, the platform CLI's ``cmd/errors.go``); 1 for anything else that is not a
    success (a 3xx the client did not follow)."""
    if status in (401, 403):
        return EXIT_AUTH
    if status == 404:
        return EXIT_NOT_FOUND
    if 400 <= status < 500:
        return EXIT_VALIDATION
    if status >= 500:
        return EXIT_SERVER
    return EXIT_UNREACHABLE


class ClientError(Exception):
    """A call that failed: ``message`` (one line, what happened and what to do) and ``exit_code``."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.message = message
        self.exit_code = exit_code


def _error_message(resp: httpx.Response) -> str:
    """The answer's ``error`` field, else its text (cut at 300 characters), else the reason phrase."""
    try:
        body = resp.json()
    except ValueError:
        body = None
    if isinstance(body, dict) and isinstance(body.get("error"), str):
        return str(body["error"])
    return resp.text.strip()[:300] or resp.reason_phrase


@dataclass(frozen=True)
class Service:
    """A running service: its base ``url`` (``http://host:port``) and the API ``key`` sent."""

    url: str
    key: str

    def call(self, method: str, path: str, params: Params | None = None, body: Any = None) -> Any:
        """``method path`` (``GET`` / ``POST``, a path under the URL, query ``params``, a JSON ``body``)
        → the decoded JSON answer.

        Raises:
            ClientError: no answer (exit 1) or an error status (``exit_code_for``), with the service's
                message.
        """
        headers = {"Authorization": f"Api-Key {self.key}"}
        url = self.url.rstrip("/") + path
        try:
            resp = httpx.request(method, url, params=params, json=body, headers=headers, timeout=TIMEOUT_S)
        except httpx.HTTPError as exc:
            raise ClientError(f"cannot reach {self.url}: {exc}", EXIT_UNREACHABLE) from exc
        if resp.status_code != 200:
            message = f"the service answered {resp.status_code}: {_error_message(resp)}"
            raise ClientError(message, exit_code_for(resp.status_code))
        try:
            return resp.json()
        except ValueError as exc:
            raise ClientError(f"{url} answered 200 but not JSON: is it a servemetrics service?", 1) from exc
