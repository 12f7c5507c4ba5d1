"""Bearer-token authentication for the HTTP API: every request, no exceptions.

The token is compared in constant time; a missing or wrong token gets the
apiserver's 401 Status (docs/REFERENCE.md golden 63) and nothing else is revealed.
"""
from __future__ import annotations

import hmac
from typing import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware

from phalanx.server.status import failure

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def check_token(header: str | None, token: bytes) -> bool:
    """True when ``header`` is ``Bearer <token>`` (scheme case-insensitive)."""
    if not header:
        return False
    scheme, _, presented = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(presented.strip().encode("utf-8", "surrogateescape"), token)


def bearer_auth(token: str) -> Middleware:
    """An aiohttp middleware refusing any request that does not carry ``token``."""
    if not token:
        raise ValueError("the API token must not be empty: the server never runs unauthenticated")
    expected = token.encode("utf-8")

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if not check_token(request.headers.get("Authorization"), expected):
            return failure(401, "Unauthorized", "Unauthorized")
        return await handler(request)

    return middleware
