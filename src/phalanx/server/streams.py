"""Long-lived responses: watch streams (NDJSON), pod and job logs (text/plain).

Both are chunked and end when the client goes away, when ``timeoutSeconds``
passes (watch), when the source ends, or when the server shuts down. A watch
that cannot start from the requested resourceVersion answers 200 and one
``ERROR`` event carrying the 410 Expired Status, as the apiserver does
(docs/REFERENCE.md golden 34). A watch writes plain objects or one-row Tables
(``WatchFormat``) and, when allowed, BOOKMARKs after a quiet interval. A log
with ``timestamps`` has each line prefixed with the time the server reads it.
"""
from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, AsyncGenerator, AsyncIterator, Callable

from aiohttp import web

from phalanx.api.registry import ResourceType
from phalanx.client.interface import Client
from phalanx.objects.clock import parse_time
from phalanx.objects.errors import ApiError, BadRequest, NotFound
from phalanx.objects.names import is_dns_label
from phalanx.objects.selectors import (
    FieldSelector,
    LabelSelector,
    match_field_selector,
    parse_field_selector,
    parse_label_selector,
)
from phalanx.server import tables
from phalanx.server.status import dumps, error_status

log = logging.getLogger(__name__)

# How long a followed log may stay silent before its headers go out anyway; an
# error within that time still gets a proper Status.
FIRST_CHUNK_GRACE = 0.5

_DISCONNECTED = (ConnectionError, asyncio.CancelledError)
STREAM_STATUS = web.RequestKey("stream_status", int)  # the status of a stream already started


def until_stopped(it: AsyncIterator[Any], stop: asyncio.Event) -> AsyncGenerator[Any, None]:
    """Items of ``it`` until it ends or ``stop`` is set (server shutdown).

    A pending read is cancelled on the way out (client gone, shutdown), so the
    source's own clean-up runs and nothing keeps waiting on it.
    """
    return with_ticks(it, stop, None)


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
            meta = obj.get("metadata")
            if not isinstance(meta, dict):
                meta = {}
            if not self.labels.matches(meta.get("labels") or {}):
                return False
        if self.fields is not None and not self.fields.empty():
            return match_field_selector(self.fields, self.kind, obj)
        return True


TICK = object()  # no event for a bookmark interval
_END = object()  # the source ended
READ_AHEAD = 256  # items a stream's pump may hold before it stops reading its source


class _Failed:
    """The source raised: the consumer re-raises ``error`` after the items before it."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


async def _pump(it: AsyncIterator[Any], q: "asyncio.Queue[Any]") -> None:
    try:
        async for item in it:
            await q.put(item)  # no suspension while there is room
    except Exception as e:
        await q.put(_Failed(e))
        return
    await q.put(_END)


async def with_ticks(it: AsyncIterator[Any], stop: asyncio.Event, interval: float | None
                      ) -> AsyncGenerator[Any, None]:
    """Items of ``it`` until it ends or ``stop`` is set, and ``TICK`` after every
    ``interval`` seconds without one (None: never).

    One task reads the source into a bounded queue and the consumer drains what
    is there without waiting: a busy event loop then still moves a whole backlog
    per turn, instead of one event per turn (a watch would fall minutes behind
    under load). Once the queue is full the source is not read, so a slow client
    leaves its events with the source, which bounds them."""
    q: asyncio.Queue[Any] = asyncio.Queue(maxsize=READ_AHEAD)
    pump = asyncio.ensure_future(_pump(it, q))
    stop_wait = asyncio.ensure_future(stop.wait())
    getter: asyncio.Future | None = None
    try:
        while not stop.is_set():
            try:
                item = q.get_nowait()
            except asyncio.QueueEmpty:
                getter = asyncio.ensure_future(q.get())
                done, _ = await asyncio.wait({getter, stop_wait}, timeout=interval,
                                             return_when=asyncio.FIRST_COMPLETED)
                if getter not in done:
                    getter.cancel()
                    getter = None
                    if stop_wait in done:
                        return
                    yield TICK
                    continue
                item = getter.result()
                getter = None
            if item is _END:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item
    finally:
        stop_wait.cancel()
        if getter is not None:
            getter.cancel()
        if not pump.done():
            pump.cancel()
        with contextlib.suppress(BaseException):
            await pump


def _rv_of(obj: Any) -> int | None:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    rv = meta.get("resourceVersion") if isinstance(meta, dict) else None
    return int(rv) if isinstance(rv, str) and rv.isdigit() else None


@dataclass(frozen=True)
class WatchFormat:
    """How events are written: plain objects, or one-row Tables (``table`` is the
    Table version) rendered with ``now()``."""

    table: str | None = None
    include_object: str = "Metadata"
    now: Callable[[], datetime] = lambda: datetime.now(timezone.utc)

    def event(self, rt: ResourceType, type_: str, obj: Any) -> dict[str, Any]:
        if self.table is None:
            return {"type": type_, "object": obj}
        return tables.table_watch_event(type_, rt.kind, obj, self.now(), self.include_object, version=self.table)


async def watch(request: web.Request, client: Client, rt: ResourceType, namespace: str | None,
                stop: asyncio.Event, fmt: WatchFormat | None = None,
                bookmark_interval: float | None = None) -> web.StreamResponse:
    """A chunked NDJSON watch. With ``allowWatchBookmarks`` a BOOKMARK carrying the
    newest resourceVersion seen on this stream (selected or not) goes out after
    ``bookmark_interval`` seconds without an event, when the client does not have
    it yet, so a client resumes close to now."""
    fmt = fmt or WatchFormat()
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
    request[STREAM_STATUS] = resp.status
    source = client.watch(rt.kind, namespace, resource_version=rv)
    seen = int(rv) if rv is not None else None
    sent_bookmark = seen
    interval = bookmark_interval if bookmarks else None

    async def write(event: dict[str, Any]) -> None:
        await resp.write((dumps(event) + "\n").encode())

    try:
        async with asyncio.timeout(timeout if timeout else None), \
                contextlib.aclosing(with_ticks(source, stop, interval)) as events:
            async for ev in events:
                if ev is TICK:
                    if seen is not None and seen != sent_bookmark:
                        bookmark = {"kind": rt.kind, "apiVersion": rt.api_version,
                                    "metadata": {"resourceVersion": str(seen)}}
                        await write(fmt.event(rt, "BOOKMARK", bookmark))
                        sent_bookmark = seen
                    continue
                ev_rv = _rv_of(ev.object)
                if ev_rv is not None and (seen is None or ev_rv > seen):
                    seen = ev_rv
                if ev.type == "BOOKMARK":
                    if not bookmarks:
                        continue
                    sent_bookmark = seen
                elif not flt.matches(ev.object):
                    continue
                await write(fmt.event(rt, ev.type, ev.object))
                sent_bookmark = seen  # the client knows this resourceVersion now
    except TimeoutError:
        pass
    except ApiError as e:
        with contextlib.suppress(*_DISCONNECTED):
            await write({"type": "ERROR", "object": error_status(e)})
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


def container_param(q: Any) -> str | None:
    """The ``container`` query parameter, a DNS label (it names a directory of
    the node's logs) or BadRequest naming it; None when absent."""
    c = q.get("container") or None
    if c is not None and not is_dns_label(c):
        shown = c if len(c) <= 64 else c[:64] + "..."
        raise BadRequest(f'container: Invalid value: "{shown}": a container name must be a lowercase RFC 1123 '
                         "label (lower case alphanumeric characters or '-', at most 63)")
    return c


def pick_container(pod: dict[str, Any], container: str | None) -> str:
    """The container to read, as the apiserver resolves it (errors are its 400s)."""
    name = pod.get("metadata", {}).get("name", "")
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        spec = {}
    names: list[Any] = [c.get("name") for c in spec.get("containers") or [] if isinstance(c, dict)]
    inits: list[Any] = [c.get("name") for c in spec.get("initContainers") or [] if isinstance(c, dict)]
    if container:
        if container not in names and container not in inits:
            raise BadRequest(f"container {container} is not valid for pod {name}")
        return container
    if len(names) == 1:
        return names[0]
    default: Any = (pod.get("metadata", {}).get("annotations") or {}).get("kubectl.kubernetes.io/default-container")
    if default in names:
        return default
    msg = f"a container name must be specified for pod {name}, choose one of: [{' '.join(map(str, names))}]"
    if inits:
        msg += f" or one of the init containers: [{' '.join(map(str, inits))}]"
    raise BadRequest(msg)


async def _provider_stream(provider: Any, namespace: str, pod: str, container: str | None, previous: bool,
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


def format_log_time(t: datetime) -> str:
    """RFC 3339 with nanoseconds, as ``kubectl logs --timestamps`` shows it."""
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f") + "000Z"


async def timestamped(stream: AsyncIterator[bytes], now: Callable[[], datetime]) -> AsyncIterator[bytes]:
    """Each line prefixed with the time the server reads it (the logs on disk
    carry no per-line time, so earlier lines get the time of the read)."""
    at_line_start = True
    try:
        async for chunk in stream:
            stamp = (format_log_time(now()) + " ").encode()
            out = bytearray()
            for line in chunk.splitlines(keepends=True):
                if at_line_start:
                    out += stamp
                out += line
                at_line_start = line.endswith(b"\n")
            if out:
                yield bytes(out)
    finally:
        await _aclose(stream)


def _log_options(q: Any) -> None:
    """Validate what is accepted but not applied: ``sinceSeconds``/``sinceTime``
    (the logs on disk carry no per-line time, so the whole log is sent)."""
    parse_int(q.get("sinceSeconds"), "sinceSeconds", minimum=1)
    since = q.get("sinceTime")
    if since:
        try:
            parse_time(since)
        except ValueError:
            raise BadRequest(f'sinceTime: Invalid value: "{since}": must be an RFC 3339 time') from None
    if q.get("sinceSeconds") and since:
        raise BadRequest("sinceTime: Invalid value: at most one of sinceTime or sinceSeconds may be specified")


async def logs(request: web.Request, client: Client, provider: Any, namespace: str, name: str,
               stop: asyncio.Event, now: Callable[[], datetime] | None = None) -> web.StreamResponse:
    q = request.query
    follow = parse_bool(q.get("follow"), "follow")
    previous = parse_bool(q.get("previous"), "previous")
    stamps = parse_bool(q.get("timestamps"), "timestamps")
    tail = parse_int(q.get("tailLines"), "tailLines")
    limit = parse_int(q.get("limitBytes"), "limitBytes", minimum=1)
    _log_options(q)
    now = now or (lambda: datetime.now(timezone.utc))

    def shaped(stream: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        return timestamped(stream, now) if stamps else stream
    try:
        pod = await client.get("Pod", name, namespace)
    except NotFound:
        # A deleted pod's logs stay readable while its job exists (docs/SEMANTICS.md S5):
        # a provider that keeps them picks the container from what it recorded.
        if not getattr(provider, "serves_deleted_pods", False):
            raise
        stream = _provider_stream(provider, namespace, name, container_param(q), previous, follow, tail)
        return await _send(request, shaped(stream), follow, limit, stop, f"pod {namespace}/{name}")
    container = pick_container(pod, container_param(q))
    if provider is None:
        raise NotFound("pods/log", name)
    if not (pod.get("spec") or {}).get("nodeName"):
        return web.Response(status=204)  # not scheduled yet: no log, as the apiserver answers
    stream = _provider_stream(provider, namespace, name, container, previous, follow, tail)
    return await _send(request, shaped(stream), follow, limit, stop, f"pod {namespace}/{name}")


async def job_logs(request: web.Request, provider: Any, rt: ResourceType, namespace: str, name: str,
                   stop: asyncio.Event) -> web.StreamResponse:
    """Every log of a job's pods, current and deleted (a Phalanx extension)."""
    q = request.query
    if parse_bool(q.get("previous"), "previous"):
        raise BadRequest("previous: Invalid value: true: a job's log already holds every earlier container "
                         "and pod instance")
    follow = parse_bool(q.get("follow"), "follow")
    tail = parse_int(q.get("tailLines"), "tailLines")
    limit = parse_int(q.get("limitBytes"), "limitBytes", minimum=1)
    container = container_param(q)
    if provider is None or not hasattr(provider, "job_logs"):
        raise NotFound(f"{rt.plural}/log", name)
    stream = _encoded(provider.job_logs(namespace, rt.kind, name, container, follow=follow, tail_lines=tail))
    return await _send(request, stream, follow, limit, stop, f"{rt.kind} {namespace}/{name}")


async def _encoded(source: AsyncIterator[Any]) -> AsyncIterator[bytes]:
    try:
        async for chunk in source:
            if isinstance(chunk, str):
                chunk = chunk.encode("utf-8", "replace")
            if chunk:
                yield bytes(chunk)
    finally:
        await _aclose(source)


async def _send(request: web.Request, stream: AsyncIterator[bytes], follow: bool, limit: int | None,
                stop: asyncio.Event, what: str) -> web.StreamResponse:
    """Stream a log as text/plain; an error before the first output (within
    FIRST_CHUNK_GRACE when following) is answered with a proper Status."""
    first = asyncio.ensure_future(stream.__anext__())
    resp: web.StreamResponse | None = None
    try:
        done, _ = await asyncio.wait({first}, timeout=FIRST_CHUNK_GRACE if follow else None)
        early = first.exception() if first in done else None
        if early is not None and not isinstance(early, StopAsyncIteration):
            raise early  # an error before any output: a proper Status
        resp = web.StreamResponse(status=200, headers={"Content-Type": "text/plain"})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        request[STREAM_STATUS] = resp.status
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
        log.exception("log stream of %s failed", what)
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
