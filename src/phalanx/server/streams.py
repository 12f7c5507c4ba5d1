"""Long-lived responses: watch streams (NDJSON) and pod logs (text/plain).

Both are chunked and end when the client goes away, when ``timeoutSeconds``
passes (watch), when the source ends, or when the server shuts down. A watch
that cannot start from the requested resourceVersion answers 200 and one
``ERROR`` event carrying the 410 Expired Status, as the apiserver does
(golden exchange 34).
"""
from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from typing import Any, AsyncIterator

from aiohttp import web

from phalanx.api.errors import ApiError, BadRequest, NotFound
from phalanx.api.registry import ResourceType
from phalanx.client.selectors import (
    FieldSelector, LabelSelector, match_field_selector, parse_field_selector, parse_label_selector,
)

from .status import dumps, error_status

log = logging.getLogger(__name__)

# How long a followed log may stay silent before its headers go out anyway; an
# error within that time still gets a proper Status.
FIRST_CHUNK_GRACE = 0.5

_DISCONNECTED = (ConnectionError, asyncio.CancelledError)


async def until_stopped(it: AsyncIterator[Any], stop: asyncio.Event) -> AsyncIterator[Any]:
    """Items of ``it`` until it ends or ``stop`` is set (server shutdown).

    A pending read is cancelled on the way out (client gone, shutdown), so the
    source's own clean-up runs and nothing keeps waiting on it.
    """
    stop_wait = asyncio.ensure_future(stop.wait())
    nxt: asyncio.Future | None = None
    try:
        while True:
            nxt = asyncio.ensure_future(it.__anext__())
            done, _ = await asyncio.wait({nxt, stop_wait}, return_when=asyncio.FIRST_COMPLETED)
            if nxt not in done:
                return
            try:
                item = nxt.result()
            except StopAsyncIteration:
                return
            nxt = None
            yield item
    finally:
        stop_wait.cancel()
        if nxt is not None and not nxt.done():
            nxt.cancel()
            with contextlib.suppress(BaseException):
                await nxt


async def _aclose(it: Any) -> None:
    close = getattr(it, "aclose", None)
    if close is not None:
        with contextlib.suppress(Exception):
            await close()


def parse_bool(value: str | None, name: str, default: bool = False) -> bool:
    """Go's strconv.ParseBool, which the apiserver uses for query flags."""
    if value is None or value == "":
        return default
    if value in ("1", "t", "T", "true", "TRUE", "True"):
        return True
    if value in ("0", "f", "F", "false", "FALSE", "False"):
        return False
    raise BadRequest(f'{name}: Invalid value: "{value}": must be a boolean (true or false)')


def parse_int(value: str | None, name: str, minimum: int = 0) -> int | None:
    if value is None or value == "":
        return None
    try:
        n = int(value)
    except ValueError:
        raise BadRequest(f'{name}: Invalid value: "{value}": must be an integer') from None
    if n < minimum:
        raise BadRequest(f"{name}: Invalid value: {n}: must be greater than or equal to {minimum}")
    return n


# --------------------------------------------------------------------------
# watch
# --------------------------------------------------------------------------


class _Filter:
    def __init__(self, rt: ResourceType, label_selector: str | None, field_selector: str | None) -> None:
        self.kind = rt.kind
        self.labels: LabelSelector | None = parse_label_selector(label_selector) if label_selector else None
        self.fields: FieldSelector | None = (parse_field_selector(field_selector, rt.kind)
                                             if field_selector else None)

    def matches(self, obj: Any) -> bool:
        if not isinstance(obj, dict):
            return False
        if self.labels is not None and not self.labels.empty():
            meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
            if not self.labels.matches(meta.get("labels") or {}):
                return False
        if self.fields is not None and not self.fields.empty():
            return match_field_selector(self.fields, self.kind, obj)
        return True


async def watch(request: web.Request, client: Any, rt: ResourceType, namespace: str | None,
                stop: asyncio.Event) -> web.StreamResponse:
    q = request.query
    rv = q.get("resourceVersion") or None
    if rv is not None and not rv.isdigit():
        raise BadRequest(f'resourceVersion: Invalid value: "{rv}": must be a non-negative integer')
    timeout = parse_int(q.get("timeoutSeconds"), "timeoutSeconds")
    bookmarks = parse_bool(q.get("allowWatchBookmarks"), "allowWatchBookmarks")
    flt = _Filter(rt, q.get("labelSelector"), q.get("fieldSelector"))

    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json",
                                                    "Cache-Control": "no-cache, private"})
    resp.enable_chunked_encoding()
    await resp.prepare(request)
    source = client.watch(rt.kind, namespace, resource_version=rv)
    try:
        async with asyncio.timeout(timeout if timeout else None), \
                contextlib.aclosing(until_stopped(source, stop)) as events:
            async for ev in events:
                if ev.type == "BOOKMARK":
                    if not bookmarks:
                        continue
                elif not flt.matches(ev.object):
                    continue
                await resp.write((dumps({"type": ev.type, "object": ev.object}) + "\n").encode())
    except TimeoutError:
        pass
    except ApiError as e:
        with contextlib.suppress(*_DISCONNECTED):
            await resp.write((dumps({"type": "ERROR", "object": error_status(e)}) + "\n").encode())
    except ConnectionError:
        return resp
    except Exception:  # a bug in a source: end this stream, keep the server up
        log.exception("watch of %s failed", rt.kind)
    finally:
        await _aclose(source)
    with contextlib.suppress(ConnectionError):
        await resp.write_eof()
    return resp


# --------------------------------------------------------------------------
# pods/log
# --------------------------------------------------------------------------


def pick_container(pod: dict, container: str | None) -> str:
    """The container to read, as the apiserver resolves it (errors are its 400s)."""
    name = pod.get("metadata", {}).get("name", "")
    spec = pod.get("spec") if isinstance(pod.get("spec"), dict) else {}
    names = [c.get("name") for c in spec.get("containers") or [] if isinstance(c, dict)]
    inits = [c.get("name") for c in spec.get("initContainers") or [] if isinstance(c, dict)]
    if container:
        if container not in names and container not in inits:
            raise BadRequest(f"container {container} is not valid for pod {name}")
        return container
    if len(names) == 1:
        return names[0]
    default = (pod.get("metadata", {}).get("annotations") or {}).get("kubectl.kubernetes.io/default-container")
    if default in names:
        return default
    msg = f"a container name must be specified for pod {name}, choose one of: [{' '.join(map(str, names))}]"
    if inits:
        msg += f" or one of the init containers: [{' '.join(map(str, inits))}]"
    raise BadRequest(msg)


async def _provider_stream(provider: Any, namespace: str, pod: str, container: str, previous: bool,
                           follow: bool, tail: int | None) -> AsyncIterator[bytes]:
    """Adapt a log provider: ``open(ns, pod, container, previous, follow, tail)`` returning an
    async iterator of bytes, or the node's ``read(...) -> str`` / ``follow(...)`` pair."""
    if hasattr(provider, "open"):
        source = provider.open(namespace, pod, container, previous, follow, tail)
        if inspect.isawaitable(source):
            source = await source
    elif follow and not previous and hasattr(provider, "follow"):
        source = provider.follow(namespace, pod, container, tail_lines=tail)
    elif hasattr(provider, "read"):
        source = _single(await provider.read(namespace, pod, container, previous=previous, tail_lines=tail))
    else:
        raise NotFound("pods/log", pod)
    try:
        async for chunk in source:
            if isinstance(chunk, str):
                chunk = chunk.encode("utf-8", "replace")
            if chunk:
                yield bytes(chunk)
    finally:
        await _aclose(source)


async def _single(data: Any) -> AsyncIterator[Any]:
    yield data


async def logs(request: web.Request, client: Any, provider: Any, namespace: str, name: str,
               stop: asyncio.Event) -> web.StreamResponse:
    q = request.query
    follow = parse_bool(q.get("follow"), "follow")
    previous = parse_bool(q.get("previous"), "previous")
    tail = parse_int(q.get("tailLines"), "tailLines")
    limit = parse_int(q.get("limitBytes"), "limitBytes", minimum=1)
    pod = await client.get("Pod", name, namespace)
    container = pick_container(pod, q.get("container") or None)
    if provider is None:
        raise NotFound("pods/log", name)
    if not (pod.get("spec") or {}).get("nodeName"):
        return web.Response(status=204)  # not scheduled yet: no log, as the apiserver answers

    stream = _provider_stream(provider, namespace, name, container, previous, follow, tail)
    first = asyncio.ensure_future(stream.__anext__())
    resp: web.StreamResponse | None = None
    try:
        done, _ = await asyncio.wait({first}, timeout=FIRST_CHUNK_GRACE if follow else None)
        if first in done and first.exception() is not None and not isinstance(first.exception(),
                                                                              StopAsyncIteration):
            raise first.exception()  # an error before any output: a proper Status
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        sent = 0

        async def send(chunk: bytes) -> bool:
            nonlocal sent
            if limit is not None:
                chunk = chunk[: max(0, limit - sent)]
            if chunk:
                await resp.write(chunk)
                sent += len(chunk)
            return limit is None or sent < limit

        try:
            chunk = await first
        except StopAsyncIteration:
            chunk = None
        if chunk is not None and await send(chunk):
            async with contextlib.aclosing(until_stopped(stream, stop)) as rest:
                async for chunk in rest:
                    if not await send(chunk):
                        break
    except ApiError:
        if resp is None:
            raise
    except ConnectionError:
        pass
    except Exception:
        if resp is None:
            raise
        log.exception("log stream of pod %s/%s failed", namespace, name)
    finally:
        if not first.done():
            first.cancel()
            with contextlib.suppress(BaseException):
                await first
        await _aclose(stream)
    if resp is not None:
        with contextlib.suppress(ConnectionError):
            await resp.write_eof()
    return resp if resp is not None else web.Response(status=200)
