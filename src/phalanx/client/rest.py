"""RestClient: the object API over HTTPS, blocking, standard library only.

For short-lived commands (the CLI's get/apply/describe/logs/delete): one
keep-alive connection, no event loop, no aiohttp, so a command starts in
kubectl's time. Same paths, errors and log/watch semantics as ``HttpClient``.
"""
from __future__ import annotations

import http.client
import json
import socket
import ssl
import urllib.parse
from pathlib import Path
from typing import Any, Iterator

from phalanx.client.interface import Obj, ObjectList
from phalanx.client.wire import (
    PATCH_TYPES,
    LineSplitter,
    Unreachable,
    error_from_body,
    log_params,
    object_identity,
    parse_event,
    resource_path,
    resource_type,
)
from phalanx.client.wire import label_selector as _selector
from phalanx.objects.errors import ApiError, BadRequest
from phalanx.objects.watch import WatchEvent

REQUEST_TIMEOUT = 60.0  # seconds for a whole request; streams wait for data as long as it takes
_CHUNK = 64 * 1024


class RestClient:
    """Talks to ``https://127.0.0.1:<port>`` (or ``http://``) with a bearer token;
    ``ca_cert`` is the PEM file of the CA the server's certificate must chain to
    (without it the system's CAs). Certificates and host names are always verified."""

    def __init__(self, base_url: str, token: str, ca_cert: str | Path | None = None,
                 user_agent: str = "phalanx-cli") -> None:
        url = urllib.parse.urlsplit(base_url)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ValueError(f"unsupported API server URL {base_url!r}: want http(s)://host:port")
        self.base_url = base_url.rstrip("/")
        self._https = url.scheme == "https"
        self._host = url.hostname
        self._port = url.port or (443 if self._https else 80)
        self._ssl: ssl.SSLContext | None = None
        if self._https:
            self._ssl = ssl.create_default_context(ssl.Purpose.SERVER_AUTH,
                                                   cafile=str(ca_cert) if ca_cert else None)
            self._ssl.minimum_version = ssl.TLSVersion.TLSv1_2
        self._headers = {"Authorization": f"Bearer {token}", "Accept": "application/json",
                         "User-Agent": user_agent}
        self._conn: http.client.HTTPConnection | None = None

    # ------------------------------------------------------------------ plumbing

    def _connect(self, timeout: float | None) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=self._ssl)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> "RestClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _send(self, method: str, path: str, params: dict[str, str] | None, body: Any,
              content_type: str, stream: bool) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        target = path + ("?" + urllib.parse.urlencode(params) if params else "")
        headers = dict(self._headers)
        data = None
        if body is not None:
            data = json.dumps(body, separators=(",", ":")).encode()
            headers["Content-Type"] = content_type
        # A stream gets a connection of its own (no read timeout); requests share one, kept alive.
        for attempt in (0, 1):
            if stream:
                conn = self._connect(None)
            else:
                if self._conn is None:
                    self._conn = self._connect(REQUEST_TIMEOUT)
                conn = self._conn
            try:
                conn.request(method, target, body=data, headers=headers)
                return conn, conn.getresponse()
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError) as e:
                conn.close()
                if not stream:
                    self._conn = None
                if attempt or stream:  # a kept-alive connection the server closed: one fresh try
                    raise Unreachable(e) from None
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                if not stream:
                    self._conn = None
                raise Unreachable(_reason(e)) from None
        raise AssertionError("unreachable")  # pragma: no cover

    def request(self, method: str, path: str, *, params: dict[str, str] | None = None, body: Any = None,
                content_type: str = "application/json") -> Any:
        """One request; the decoded JSON body (None when empty), or the server's error raised."""
        conn, resp = self._send(method, path, params, body, content_type, stream=False)
        try:
            raw = resp.read()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise Unreachable(_reason(e)) from None
        if resp.will_close:
            self.close()
        if resp.status >= 400:
            raise error_from_body(resp.status, raw)
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            raise ApiError(f"the server sent a response that is not JSON (status {resp.status})") from None

    def _stream(self, path: str, params: dict[str, str]) -> Iterator[bytes]:
        conn, resp = self._send("GET", path, params, None, "application/json", stream=True)
        try:
            if resp.status >= 400:
                raise error_from_body(resp.status, resp.read())
            while True:
                try:
                    chunk = resp.read1(_CHUNK)
                except http.client.IncompleteRead as e:  # the server cut the stream
                    if e.partial:
                        yield e.partial
                    return
                except OSError as e:
                    raise Unreachable(_reason(e)) from None
                if not chunk:
                    return
                yield chunk
        finally:
            conn.close()

    # ------------------------------------------------------------------ objects

    def version(self) -> dict:
        """``/version`` of the server."""
        body = self.request("GET", "/version")
        return body if isinstance(body, dict) else {}

    def get(self, kind: str, name: str, namespace: str | None = None) -> Obj:
        return self.request("GET", resource_path(resource_type(kind), namespace, name))

    def list(self, kind: str, namespace: str | None = None, label_selector: str | dict[str, str] | None = None,
             field_selector: str | None = None) -> ObjectList:
        rt = resource_type(kind)
        params: dict[str, str] = {}
        ls = _selector(label_selector)
        if ls:
            params["labelSelector"] = ls
        if field_selector:
            params["fieldSelector"] = field_selector
        body = self.request("GET", resource_path(rt, namespace, collection_ns_required=False), params=params)
        body = body if isinstance(body, dict) else {}
        items = [i for i in body.get("items") or [] if isinstance(i, dict)]
        for item in items:  # a real apiserver leaves kind/apiVersion out of built-in list items
            item.setdefault("kind", rt.kind)
            item.setdefault("apiVersion", rt.api_version)
        rv = (body.get("metadata") or {}).get("resourceVersion") or ""
        return ObjectList(items, str(rv))

    def create(self, obj: Obj, params: dict[str, str] | None = None) -> Obj:
        rt, ns, _ = object_identity(obj, need_name=False)
        return self.request("POST", resource_path(rt, ns), params=params, body=obj)

    def update(self, obj: Obj, params: dict[str, str] | None = None) -> Obj:
        rt, ns, name = object_identity(obj, need_name=True)
        return self.request("PUT", resource_path(rt, ns, name), params=params, body=obj)

    def patch(self, kind: str, name: str, namespace: str | None, patch: Any, patch_type: str = "merge",
              params: dict[str, str] | None = None) -> Obj:
        content_type = PATCH_TYPES.get(patch_type)
        if content_type is None:
            raise BadRequest(f'unsupported patch type "{patch_type}" (supported: "merge", "json", "strategic")')
        return self.request("PATCH", resource_path(resource_type(kind), namespace, name), params=params,
                            body=patch, content_type=content_type)

    def delete(self, kind: str, name: str, namespace: str | None = None,
               propagation_policy: str | None = None) -> Obj | None:
        options = {"kind": "DeleteOptions", "apiVersion": "v1",
                   "propagationPolicy": propagation_policy or "Background"}
        body = self.request("DELETE", resource_path(resource_type(kind), namespace, name), body=options)
        if not isinstance(body, dict) or body.get("kind") == "Status":
            return None
        return body

    def watch(self, kind: str, namespace: str | None = None, resource_version: str | None = None,
              label_selector: str | None = None) -> Iterator[WatchEvent]:
        """Events after ``resource_version`` (BOOKMARKs left out); reconnects when the
        server ends the stream, resuming after the last resourceVersion seen."""
        path = resource_path(resource_type(kind), namespace, collection_ns_required=False)
        rv = resource_version or None
        while True:
            params = {"watch": "true", "allowWatchBookmarks": "true"}
            if rv:
                params["resourceVersion"] = rv
            if label_selector:
                params["labelSelector"] = label_selector
            for line in _lines(self._stream(path, params)):
                ev = parse_event(line)
                if ev is None:
                    continue
                obj_rv = (ev.object.get("metadata") or {}).get("resourceVersion")
                if isinstance(obj_rv, str) and obj_rv:
                    rv = obj_rv
                if ev.type != "BOOKMARK":
                    yield ev

    # ------------------------------------------------------------------ logs

    def logs(self, namespace: str, pod: str, container: str | None = None, follow: bool = False,
             tail: int | None = None, previous: bool = False) -> Iterator[bytes]:
        """A container's log as it arrives (``follow``: until the container stops)."""
        path = resource_path(resource_type("Pod"), namespace, pod, "log")
        return self._stream(path, log_params(container, follow, tail, previous))

    def job_logs(self, namespace: str, kind: str, name: str, container: str | None = None,
                 follow: bool = False, tail: int | None = None) -> Iterator[bytes]:
        """Every log of a job's pods, current and deleted (Phalanx's ``{plural}/{name}/log``)."""
        path = resource_path(resource_type(kind), namespace, name, "log")
        return self._stream(path, log_params(container, follow, tail, False))


def _reason(e: BaseException) -> str:
    if isinstance(e, ssl.SSLCertVerificationError):
        return f"certificate verification failed: {e.verify_message}"
    if isinstance(e, socket.timeout):
        return "timed out"
    return str(e) or type(e).__name__


def _lines(chunks: Iterator[bytes]) -> Iterator[bytes]:
    """NDJSON lines of a chunked body (``wire.LineSplitter``)."""
    split = LineSplitter()
    for chunk in chunks:
        yield from split.feed(chunk)
    yield from split.rest()
