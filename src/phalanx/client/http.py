"""HttpClient: the object API over HTTP, speaking Kubernetes paths and Status errors.

Talks to ``phalanx up`` or any Kubernetes API server (``KubeClient`` builds one
from a kubeconfig) through an aiohttp session, over TCP or a unix socket.
Errors come back as the same ``phalanx.objects.errors`` exceptions a
LocalClient raises, with the server's message kept word for word. ``watch``
reconnects by itself when the server ends a stream, resuming after the last
resourceVersion it delivered. Optional, as client-go has them: a token bucket
every request but a stream passes, lists in pages, a field manager on writes,
and credentials that are asked again after a 401.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
import urllib.parse
from pathlib import Path
from typing import Any, AsyncGenerator, AsyncIterator, Protocol

import aiohttp

from phalanx.api.registry import ResourceType
from phalanx.client.interface import Obj, ObjectList
from phalanx.client.ratelimit import TokenBucket
from phalanx.client.wire import PATCH_TYPES as _PATCH_TYPES
from phalanx.client.wire import (
    LineSplitter,
    Unreachable,
    error_from_body,
    error_from_status,
    log_params,
    object_identity,
    parse_event,
    resource_path,
    resource_type,
)
from phalanx.client.wire import label_selector as _label_selector
from phalanx.objects.errors import ApiError, BadRequest
from phalanx.objects.watch import WatchEvent

__all__ = ["HttpClient", "error_from_status"]

_STREAM_TIMEOUT = aiohttp.ClientTimeout(total=None, connect=10, sock_read=None)
UNAUTHORIZED = 401
# One line per request at DEBUG (`-vv`), as httpx logs them: 'HTTP Request: POST <url> "HTTP/1.1 201 Created"'.
request_log = logging.getLogger("phalanx.client.requests")
CONNECTIONS = 256  # a scheduler binds up to WRITE_CONCURRENCY pods at once, on top of its watches


class Credentials(Protocol):
    """Where the Authorization header comes from (a kubeconfig's user)."""

    async def headers(self) -> dict[str, str]:
        """The headers to send now."""
        ...

    async def refresh(self) -> bool:
        """The server answered 401: renew (re-read a token file, re-run an exec
        plugin); True when a retry may succeed."""
        ...


def _unavailable(e: Exception) -> ApiError:
    return Unreachable(e)


def _rv_key(rv: str) -> tuple[int, int | str]:
    return (0, int(rv)) if rv.isdigit() else (1, rv)


class HttpClient:
    """``phalanx.client.interface.Client`` over the Phalanx (Kubernetes-shaped) HTTP API.

    ``base_url`` is ``https://127.0.0.1:<port>``, ``http://...`` or
    ``http+unix://<quoted socket path>`` (what ``server.app.serve`` returns);
    ``unix_socket`` may also be given apart. ``ca_cert`` is the PEM file of the
    CA an https server's certificate must chain to (``phalanx up`` writes it
    under ``$PHALANX_HOME/tls``); without it the system's CAs are trusted.
    Certificates are always verified.
    """

    def __init__(self, base_url: str, token: str | None, unix_socket: str | None = None,
                 ca_cert: str | Path | None = None, *, ssl_context: ssl.SSLContext | None = None,
                 credentials: Credentials | None = None, limiter: TokenBucket | None = None,
                 list_chunk: int | None = None, field_manager: str | None = None, timeout: float = 60.0,
                 trust_env: bool = False, connections: int = CONNECTIONS) -> None:
        """``token``: a bearer token (or ``credentials`` for one that changes); ``ssl_context``
        instead of ``ca_cert`` (e.g. with a client certificate); ``limiter``: every request but
        a stream takes a token; ``list_chunk``: list in pages of that many items (``limit`` and
        ``continue``); ``field_manager``: sent on writes; ``trust_env``: use the proxy
        settings of the environment; ``connections``: at most that many open at once (HTTP/1.1:
        one per request in flight)."""
        if base_url.startswith("http+unix://"):
            unix_socket = unix_socket or urllib.parse.unquote(base_url[len("http+unix://"):])
            base_url = "http://localhost"
        self.base_url = base_url.rstrip("/")
        self.unix_socket = unix_socket
        self._ssl: ssl.SSLContext | None = ssl_context
        if ca_cert is not None:
            self._ssl = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca_cert))
            self._ssl.minimum_version = ssl.TLSVersion.TLSv1_2
        self._headers = {"Accept": "application/json", "User-Agent": "phalanx-client"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._credentials = credentials
        self.limiter = limiter if limiter is not None else TokenBucket(0, 0)
        self.list_chunk = list_chunk
        self._write_params = {"fieldManager": field_manager} if field_manager else None
        self._timeout = aiohttp.ClientTimeout(total=timeout, connect=min(10.0, timeout))
        self._trust_env = trust_env
        self.connections = connections
        self._session: aiohttp.ClientSession | None = None

    # ------------------------------------------------------------------ plumbing

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector: aiohttp.BaseConnector
            if self.unix_socket:
                connector = aiohttp.UnixConnector(path=self.unix_socket, limit=self.connections)
            else:
                connector = aiohttp.TCPConnector(ssl=self._ssl if self._ssl is not None else True,
                                                 limit=self.connections)
            self._session = aiohttp.ClientSession(connector=connector, headers=self._headers,
                                                  trust_env=self._trust_env)
        return self._session

    async def _auth(self) -> dict[str, str] | None:
        return await self._credentials.headers() if self._credentials is not None else None

    async def close(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None

    async def __aenter__(self) -> "HttpClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @staticmethod
    def _rt(kind: str) -> ResourceType:
        return resource_type(kind)

    def _path(self, rt: ResourceType, namespace: str | None, name: str | None = None,
              subresource: str | None = None, collection_ns_required: bool = True) -> str:
        return self.base_url + resource_path(rt, namespace, name, subresource, collection_ns_required)

    async def _request(self, method: str, url: str, *, params: dict[str, str] | None = None,
                       body: Any = None, content_type: str = "application/json", write: bool = False) -> Any:
        data = None
        headers = {}
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode()
            headers["Content-Type"] = content_type
        if write and self._write_params:
            params = {**(params or {}), **self._write_params}
        await self.limiter.acquire()
        retried = False
        while True:
            auth = await self._auth()
            try:
                async with self._get_session().request(method, url, params=params, data=data,
                                                       headers={**headers, **auth} if auth else headers,
                                                       timeout=self._timeout) as resp:
                    raw = await resp.read()
                    status = resp.status
                    _log_request(method, resp)
            except aiohttp.ClientError as e:
                raise _unavailable(e) from None
            except TimeoutError as e:
                raise _unavailable(e) from None
            if status == UNAUTHORIZED and not retried and self._credentials is not None:
                retried = True
                if await self._credentials.refresh():
                    continue
            if status >= 400:
                raise self._error(status, raw)
            if not raw:
                return None
            try:
                return json.loads(raw)
            except ValueError:
                raise ApiError(f"the server sent a response that is not JSON (status {status})") from None

    @staticmethod
    def _error(http_status: int, raw: bytes) -> ApiError:
        return error_from_body(http_status, raw)

    # ------------------------------------------------------------------ Client

    async def get(self, kind: str, name: str, namespace: str | None = None) -> Obj:
        rt = self._rt(kind)
        return await self._request("GET", self._path(rt, namespace, name))

    async def list(
        self,
        kind: str,
        namespace: str | None = None,
        label_selector: str | dict[str, str] | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        rt = self._rt(kind)
        params = {}
        ls = _label_selector(label_selector)
        if ls:
            params["labelSelector"] = ls
        if field_selector:
            params["fieldSelector"] = field_selector
        if self.list_chunk:
            params["limit"] = str(self.list_chunk)
        url = self._path(rt, namespace, collection_ns_required=False)
        items: list[Obj] = []
        rv = ""
        while True:
            body = await self._request("GET", url, params=params)
            body = body if isinstance(body, dict) else {}
            items.extend(i for i in body.get("items") or [] if isinstance(i, dict))
            list_meta = body.get("metadata") or {}
            rv = rv or str(list_meta.get("resourceVersion") or "")  # the first page's: the list's snapshot
            token = list_meta.get("continue")
            if not self.list_chunk or not token:
                break
            params = {**params, "continue": str(token)}
        for item in items:  # a real apiserver leaves kind/apiVersion out of built-in list items
            item.setdefault("kind", rt.kind)
            item.setdefault("apiVersion", rt.api_version)
        return ObjectList(items, rv)

    async def create(self, obj: Obj) -> Obj:
        rt, ns, _ = object_identity(obj, need_name=False)
        return await self._request("POST", self._path(rt, ns), body=obj, write=True)

    async def update(self, obj: Obj) -> Obj:
        rt, ns, name = object_identity(obj, need_name=True)
        return await self._request("PUT", self._path(rt, ns, name), body=obj, write=True)

    async def update_status(self, obj: Obj) -> Obj:
        """PUT ``/status``; for kinds without a status subresource (PodGroup,
        Event) the whole object, as their CRDs/types only allow."""
        rt, ns, name = object_identity(obj, need_name=True)
        return await self._request("PUT", self._path(rt, ns, name, "status" if rt.has_status else None), body=obj,
                                   write=True)

    async def patch(
        self, kind: str, name: str, namespace: str | None, patch: Any,
        patch_type: str = "merge", subresource: str | None = None,
    ) -> Obj:
        rt = self._rt(kind)
        content_type = _PATCH_TYPES.get(patch_type)
        if content_type is None:
            raise BadRequest(f'unsupported patch type "{patch_type}" (supported: "merge", "json", "strategic")')
        if subresource not in (None, "status"):
            raise BadRequest(f'unsupported subresource "{subresource}" (supported: "status")')
        return await self._request("PATCH", self._path(rt, namespace, name, subresource), body=patch,
                                   content_type=content_type, write=True)

    async def delete(
        self, kind: str, name: str, namespace: str | None = None,
        grace_period_seconds: int | None = None,
        preconditions_uid: str | None = None,
        propagation_policy: str | None = None,
    ) -> Obj | None:
        rt = self._rt(kind)
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1",
                                   "propagationPolicy": propagation_policy or "Background"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if preconditions_uid is not None:
            options["preconditions"] = {"uid": preconditions_uid}
        body = await self._request("DELETE", self._path(rt, namespace, name), body=options)
        if not isinstance(body, dict) or body.get("kind") == "Status":
            return None
        return body

    async def bind(self, namespace: str, name: str, node_name: str) -> None:
        rt = self._rt("Pod")
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": namespace},
                   "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}}
        await self._request("POST", self._path(rt, namespace, name, "binding"), body=binding, write=True)

    async def watch(
        self, kind: str, namespace: str | None = None, resource_version: str | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Events after ``resource_version``; without one, ADDED for every current object
        first. Raises Gone (as an ERROR event from the server) when it is too old."""
        rt = self._rt(kind)
        url = self._path(rt, namespace, collection_ns_required=False)
        rv = resource_version or None
        backoff = 0.0
        refreshed = False  # credentials renewed once after a 401, until an event arrives
        while True:
            params = {"watch": "true", "allowWatchBookmarks": "true"}
            if rv:
                params["resourceVersion"] = rv
            if backoff:
                await asyncio.sleep(backoff)  # the server keeps ending streams at once: do not spin
            backoff = min(max(backoff * 2, 0.05), 1.0)
            try:
                async with self._get_session().get(url, params=params, timeout=_STREAM_TIMEOUT,
                                                   headers=await self._auth()) as resp:
                    _log_request("GET", resp)
                    if resp.status == UNAUTHORIZED and not refreshed and self._credentials is not None \
                            and await self._credentials.refresh():
                        refreshed = True
                        continue
                    if resp.status >= 400:
                        raise self._error(resp.status, await resp.read())
                    async for line in _lines(resp.content):
                        ev = parse_event(line)
                        if ev is None:
                            continue
                        backoff, refreshed = 0.0, False
                        obj_rv = (ev.object.get("metadata") or {}).get("resourceVersion")
                        if isinstance(obj_rv, str) and obj_rv and (rv is None or _rv_key(obj_rv) > _rv_key(rv)):
                            rv = obj_rv
                        if ev.type == "BOOKMARK":
                            continue
                        yield ev
            except aiohttp.ClientPayloadError:
                pass  # the server cut the stream: resume from the last resourceVersion seen
            except aiohttp.ClientError as e:
                raise _unavailable(e) from None

    # ------------------------------------------------------------------ logs

    async def logs(self, namespace: str, pod: str, container: str | None = None, follow: bool = False,
                   tail: int | None = None, previous: bool = False) -> AsyncIterator[bytes]:
        """A container's log as it arrives (``follow``: until the container stops).
        A deleted pod's log is served while its job exists."""
        url = self._path(self._rt("Pod"), namespace, pod, "log")
        async with contextlib.aclosing(self._stream_log(url, container, follow, tail, previous)) as chunks:
            async for chunk in chunks:
                yield chunk

    async def job_logs(self, namespace: str, kind: str, name: str, container: str | None = None,
                       follow: bool = False, tail: int | None = None) -> AsyncIterator[bytes]:
        """Every log of a job's pods, current and deleted, each block headed
        ``==> <pod>/<container> (instance <uid>, restart <n>) <==`` (Phalanx's
        ``{plural}/{name}/log``); ``tail`` is per block; ``follow`` until the
        job has finished and none of its pods runs."""
        url = self._path(self._rt(kind), namespace, name, "log")
        async with contextlib.aclosing(self._stream_log(url, container, follow, tail, False)) as chunks:
            async for chunk in chunks:
                yield chunk

    async def _stream_log(self, url: str, container: str | None, follow: bool, tail: int | None,
                          previous: bool) -> AsyncGenerator[bytes, None]:
        params = log_params(container, follow, tail, previous)
        try:
            async with self._get_session().get(url, params=params, timeout=_STREAM_TIMEOUT,
                                               headers=await self._auth()) as resp:
                if resp.status >= 400:
                    raise self._error(resp.status, await resp.read())
                async for chunk in resp.content.iter_any():
                    if chunk:
                        yield chunk
        except aiohttp.ClientPayloadError:
            return
        except aiohttp.ClientError as e:
            raise _unavailable(e) from None


def _log_request(method: str, resp: aiohttp.ClientResponse) -> None:
    if request_log.isEnabledFor(logging.DEBUG):
        v = resp.version
        request_log.debug('HTTP Request: %s %s "HTTP/%s %d %s"', method, resp.url,
                          f"{v.major}.{v.minor}" if v is not None else "1.1", resp.status, resp.reason or "")


async def _lines(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """NDJSON lines of a chunked body (``wire.LineSplitter``)."""
    split = LineSplitter()
    async for chunk in content.iter_any():
        for line in split.feed(chunk):
            yield line
    for line in split.rest():
        yield line
