"""A small admission webhook server for the tests: aiohttp over HTTPS with a test CA, in a thread of its own.

Paths: ``/allow`` (allowed, with a warning), ``/deny`` (403 with a message),
``/mutate`` (a JSONPatch adding the label ``mutated=yes``), ``/slow``
(answers after ``SLOW_SECONDS``), ``/bad-uid`` (answers for another request).
Every review received is kept in ``reviews`` as (path, request).
"""
from __future__ import annotations

import asyncio
import base64
import json
import threading
from pathlib import Path
from typing import Any

from aiohttp import web

from phalanx.server.tls import ensure_tls, ssl_context

SLOW_SECONDS = 3.0
DENY_MESSAGE = "configmaps labelled case=deny are refused"
WARNING = "the test webhook saw this object"


class WebhookServer:
    def __init__(self, tls_dir: Path, hosts: tuple[str, ...] = ("127.0.0.1", "hook.default.svc")) -> None:
        self.tls = ensure_tls(tls_dir, hosts=hosts)
        self.reviews: list[tuple[str, dict[str, Any]]] = []
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    @property
    def ca_bundle(self) -> str:
        return base64.b64encode(self.tls.ca_cert.read_bytes()).decode()

    def url(self, path: str) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def paths(self) -> list[str]:
        return [p for p, _ in self.reviews]

    async def _handle(self, request: web.Request) -> web.Response:
        review = await request.json()
        req = review["request"]
        path = request.path
        self.reviews.append((path, req))
        resp: dict[str, Any] = {"uid": req["uid"], "allowed": True}
        if path == "/allow":
            resp["warnings"] = [WARNING]
        elif path == "/deny":
            resp = {"uid": req["uid"], "allowed": False,
                    "status": {"code": 403, "reason": "Forbidden", "message": DENY_MESSAGE}}
        elif path == "/mutate":
            labels = ((req.get("object") or {}).get("metadata") or {}).get("labels")
            patch = ([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}] if labels else
                     [{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
            resp["patchType"] = "JSONPatch"
            resp["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
        elif path == "/slow":
            await asyncio.sleep(SLOW_SECONDS)
        elif path == "/bad-uid":
            resp["uid"] = "not-" + req["uid"]
        return web.json_response({"apiVersion": review["apiVersion"], "kind": "AdmissionReview", "response": resp})

    async def _serve(self) -> None:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._handle)
        runner = web.AppRunner(app, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context(self.tls))
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._stop = asyncio.Event()
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    def start(self) -> "WebhookServer":
        def run() -> None:
            loop = self._loop = asyncio.new_event_loop()
            loop.run_until_complete(self._serve())
            pending = asyncio.all_tasks(loop)  # e.g. a /slow answer still waiting
            for task in pending:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            loop.close()

        self._thread = threading.Thread(target=run, name="test-webhook-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the test webhook server did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stop is not None:
            self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread is not None:
            self._thread.join(10)


def configuration(kind: str, name: str, hooks: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name},
            "webhooks": hooks}


def hook(name: str, client_config: dict[str, Any], *, case: str | None = None, resources: tuple[str, ...] = (
        "configmaps",), operations: tuple[str, ...] = ("CREATE", "UPDATE"), **extra: Any) -> dict[str, Any]:
    """A webhook for configmaps (by default) labelled ``case=<case>``."""
    out: dict[str, Any] = {
        "name": name, "clientConfig": client_config, "sideEffects": "None", "admissionReviewVersions": ["v1"],
        "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": list(operations),
                   "resources": list(resources)}],
        **extra}
    if case is not None:
        out["objectSelector"] = {"matchLabels": {"case": case}}
    return out
