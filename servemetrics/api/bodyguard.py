"""``BodyGuard``: the ASGI middleware in front of the whole app that stands between a caller and the
request body (docs/security.md "Request bodies").

- Every body is capped before it is read: a ``Content-Length`` over the path's limit is a 413 before a
  byte is read, and the bytes of a chunked (or any) body are counted as they arrive, the read failing
  with ``BodyTooLarge`` (a 413) at the first chunk past the limit. The limits (``BodyLimits``, config
  ``limits``): ``/api/v1/write`` and ``/v1/import`` have their own, the gateway's inference paths
  (``…/predict``, ``…/async_predict``, ``…/sync/…``) theirs, every other path ``max_body_bytes``.
- A request that carries a body to a keyed route must name a stored key before the body is read:
  FastAPI reads and parses a route's JSON body before it runs the route's dependencies, so without this
  a caller without a key had its body read and parsed (a 400 for bad JSON) before the 401. The key found
  here is kept in the request's state for ``deps.authenticate``. The inference paths are left to their
  endpoints, which check the key before they read the body.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import anyio
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from servemetrics.api.deps import KEY_STATE, key_of
from servemetrics.api.errors import ApiError
from servemetrics.api.routes.gateway import count_refused, is_inference_path
from servemetrics.gateway.errors import error_response

_BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})


class BodyTooLarge(HTTPException):
    """A request body over its limit (a 413; an ``HTTPException`` so that FastAPI's body reading lets it
    through to the error handlers instead of making it a 400)."""

    def __init__(self, message: str) -> None:
        super().__init__(413, message)


@dataclass(frozen=True)
class BodyLimits:
    """Request body limits in bytes (config ``limits``; docs/configuration.md)."""

    max_body_bytes: int = 1 << 20
    inference_body_bytes: int = 32 << 20
    remote_write_body_bytes: int = 32 << 20
    import_body_bytes: int = 1 << 30

    def for_path(self, path: str) -> tuple[int, str]:
        """``(limit in bytes, its config key)`` of a body sent to ``path``."""
        if path == "/api/v1/write":
            return self.remote_write_body_bytes, "limits.remote_write_body_bytes"
        if path == "/v1/import":
            return self.import_body_bytes, "limits.import_body_bytes"
        if is_inference(path):
            return self.inference_body_bytes, "limits.inference_body_bytes"
        return self.max_body_bytes, "limits.max_body_bytes"


BODY_LIMITS = frozenset(f.name for f in fields(BodyLimits))
"""The keys of config ``limits`` that ``BodyLimits`` takes (the others count samples and series)."""


def is_inference(path: str) -> bool:
    """The gateway's paths whose endpoints check the key before they read the body."""
    return is_inference_path(path) or path.endswith("/async_predict")


def too_large(size: str, limit: int, setting: str) -> str:
    """The 413 message: the body's ``size`` (as known), the limit and the setting that raises it."""
    return (
        f"the request body is {size} bytes; this path takes at most {limit} bytes "
        f"({setting} in the service's config file)"
    )


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return str(value.decode("latin-1"))
    return None


class BodyGuard:
    """ASGI middleware: caps request bodies and checks the key before a keyed route reads a body (module
    docstring); ``limits`` are the byte limits."""

    def __init__(self, app: ASGIApp, limits: BodyLimits | None = None) -> None:
        self.app = app
        self.limits = limits or BodyLimits()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path: str = scope["path"]
        limit, setting = self.limits.for_path(path)
        declared = _header(scope, b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            if is_inference(path):
                count_refused(Request(scope), path, 413)
            await error_response(413, too_large(declared, limit, setting))(scope, receive, send)
            return
        has_body = (declared not in (None, "0")) or _header(scope, b"transfer-encoding") is not None
        if has_body and scope["method"] not in _BODILESS and not is_inference(path):
            try:
                await _authenticate_first(scope)
            except ApiError as exc:
                await error_response(exc.status, exc.message)(scope, receive, send)
                return
        await self._guarded(scope, receive, send, limit, setting)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send, limit: int, setting: str) -> None:
        """Run the app with ``receive`` counting the body; a ``BodyTooLarge`` no route rendered (the
        inference router's) becomes the 413 here when nothing was sent yet."""
        size = 0
        started = False

        async def counting() -> Message:
            nonlocal size
            message = await receive()
            if message["type"] == "http.request":
                size += len(message.get("body", b""))
                if size > limit:
                    raise BodyTooLarge(too_large(f"more than {limit}", limit, setting))
            return message

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counting, sending)
        except BodyTooLarge as exc:
            if started:
                raise
            if is_inference(scope["path"]):
                count_refused(Request(scope), scope["path"], 413)
            await error_response(413, str(exc.detail))(scope, receive, send)


async def _authenticate_first(scope: Scope) -> None:
    """Check the request's key (``deps.key_of``: a 401 ``ApiError`` when missing, malformed or unknown,
    429 over the failed-authentication limit) and keep it in the request's state for
    ``deps.authenticate``."""
    service = scope["app"].state.service
    header = _header(scope, b"authorization")
    checked = await anyio.to_thread.run_sync(key_of, service, scope.get("client"), header)
    scope.setdefault("state", {})[KEY_STATE] = checked
