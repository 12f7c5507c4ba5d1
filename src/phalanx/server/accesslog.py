"""The API server's access log: one line per request once it ends (streams too), as
the kube-apiserver's httplog writes them."""
from __future__ import annotations

import asyncio
import logging
import time
from datetime import datetime, timezone
from typing import Awaitable, Callable

from aiohttp import web

from phalanx.server import streams

ACCESS_LOG: web.AppKey[logging.Logger | None] = web.AppKey("access_log")


@web.middleware
async def access_log_middleware(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                                ) -> web.StreamResponse:
    """One line per request once it ends (streams too, even when the client
    goes away): time, peer, method, path and query, status, seconds, user agent."""
    logger = request.app[ACCESS_LOG]
    if logger is None:
        return await handler(request)
    start = time.monotonic()
    status = 500
    try:
        resp = await handler(request)
        status = resp.status
        return resp
    except asyncio.CancelledError:
        status = request.get(streams.STREAM_STATUS, 499)  # the client went away: what it was sent, or 499
        raise
    except web.HTTPException as e:
        status = e.status_code
        raise
    finally:
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        ua = request.headers.get("User-Agent", "-").replace('"', "'")
        logger.info('%s %s "%s %s" %d %.6f "%s"', stamp, request.remote or "-", request.method, request.path_qs,
                    status, time.monotonic() - start, ua)
