"""Query-string checks shared by the routes: a parameter an endpoint does not take is a 400 naming it, so
a misspelt or misplaced parameter (``?step_seconds=1`` on an endpoint that reads its body) is never
silently ignored."""

from __future__ import annotations

from collections.abc import Collection

from fastapi import Request

from servemetrics.api.errors import bad_request

MAX_LISTED_CHARS = 200
"""At most this many characters of the unknown names are echoed back in the message."""


def reject_unknown_params(request: Request, allowed: Collection[str], hint: str = "") -> None:
    """Refuse query parameters of ``request`` outside ``allowed``.

    Args:
        request: the request whose query string is checked.
        allowed: the parameter names the endpoint takes (empty: it takes none).
        hint: appended to the message, e.g. where the fields go instead ("; send ... in the JSON body").

    Raises:
        ApiError: 400 ``unknown query parameter(s): a, b; this endpoint takes x, y`` (or ``takes no query
            parameters``), the names sorted and cut at ``MAX_LISTED_CHARS`` characters.
    """
    unknown = sorted(set(request.query_params) - set(allowed))
    if not unknown:
        return
    takes = ", ".join(sorted(allowed)) if allowed else "no query parameters"
    raise bad_request(
        f"unknown query parameter(s): {', '.join(unknown)[:MAX_LISTED_CHARS]}; this endpoint takes {takes}"
        + hint
    )
