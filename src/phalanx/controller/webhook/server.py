"""The webhook HTTPS server: AdmissionReviews POSTed to the webhook paths, answered by
``review.handle``, with the serving certificate reloaded from the cert dir when it changes.

``Webhooks`` runs it with the certificate rotator (or, rotation off, with certificates a
user mounts there, e.g. cert-manager's): the server starts once ``tls.crt`` and
``tls.key`` exist; a failure to bind or to load them is logged and retried, never fatal
to the operator.
"""
from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from aiohttp import web

from phalanx.client.interface import Client
from phalanx.controller.webhook import review
from phalanx.controller.webhook.certs import TLS_CERT, TLS_KEY
from phalanx.controller.webhook.rotator import DEFAULT_CERT_DIR, CertRotator, CertSettings
from phalanx.objects.clock import Clock

log = logging.getLogger(__name__)
DEFAULT_PORT = 9443  # the original's --webhook-server-port


@dataclass(frozen=True)
class WebhookSettings:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    cert_dir: str = DEFAULT_CERT_DIR
    rotate: bool = True
    certs: CertSettings | None = None  # with rotate
    reload_period: float = 2.0


async def _handle(request: web.Request) -> web.Response:
    if request.method != "POST":
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 405,
                                  "reason": "MethodNotAllowed", "message": "webhooks take POST"}, status=405)
    try:
        body = await request.read()
    except web.HTTPRequestEntityTooLarge:
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 413,
                                  "reason": "RequestEntityTooLarge", "message": "request body too large"},
                                 status=413)
    # Off the event loop: a large job's admission must not stall the controller beside it.
    status, payload = await asyncio.to_thread(review.handle, request.path, body)
    return web.json_response(payload, status=status)


def make_app() -> web.Application:
    app = web.Application(client_max_size=review.MAX_BODY_BYTES)
    app.router.add_route("*", "/{tail:.*}", _handle)
    return app


def _fingerprint(paths: list[Path]) -> tuple[tuple[int, int, int], ...] | None:
    try:
        return tuple((p.stat().st_mtime_ns, p.stat().st_size, p.stat().st_ino) for p in paths)
    except OSError:
        return None


class WebhookServer:
    """``start()`` binds (once the cert files exist); ``reload()`` loads changed cert files
    into the live TLS context (new connections get them)."""

    def __init__(self, host: str, port: int, cert_dir: str) -> None:
        self.host, self.port = host, port
        self.cert_path, self.key_path = Path(cert_dir) / TLS_CERT, Path(cert_dir) / TLS_KEY
        self.ssl = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ssl.minimum_version = ssl.TLSVersion.TLSv1_2
        self._loaded: tuple[tuple[int, int, int], ...] | None = None
        self._runner: web.AppRunner | None = None
        self.bound_port: int | None = None
        self.last_error: str | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.bound_port or self.port}"

    def reload(self) -> bool:
        """Load the cert files if they changed since the last load; True when loaded."""
        fp = _fingerprint([self.cert_path, self.key_path])
        if fp is None or fp == self._loaded:
            return False
        try:
            self.ssl.load_cert_chain(self.cert_path, self.key_path)
        except (ssl.SSLError, OSError) as e:  # half-written or mismatched pair: keep serving the last one
            log.warning("webhook: cannot load %s/%s: %s", self.cert_path, self.key_path.name, e)
            return False
        self._loaded = fp
        log.info("webhook: serving certificate loaded from %s", self.cert_path)
        return True

    async def start(self) -> bool:
        """Bind if not bound yet and a certificate is loaded; True once serving."""
        if self._runner is not None:
            return True
        self.reload()
        if self._loaded is None:
            return False
        runner = web.AppRunner(make_app(), access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port, ssl_context=self.ssl, reuse_address=True)
        try:
            await site.start()
        except OSError as e:
            await runner.cleanup()
            why = f"cannot listen on {self.host}:{self.port}: {e}"
            if why != self.last_error:  # retried every period: said once
                log.error("webhook: %s", why)
            self.last_error = why
            return False
        self.last_error = None
        self._runner = runner
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        self.bound_port = sockets[0].getsockname()[1] if sockets else self.port
        return True

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


class Webhooks:
    """The rotator (when rotating) and the server, until ``stop()``. ``serving`` is set
    once the server listens; ``say`` is told its URL then."""

    def __init__(self, client: Client, clock: Clock, settings: WebhookSettings,
                 say: Callable[[str], None] | None = None) -> None:
        self.settings = settings
        self.server = WebhookServer(settings.host, settings.port, settings.cert_dir)
        self.rotator = (CertRotator(client, clock, settings.certs)
                        if settings.rotate and settings.certs is not None else None)
        self.serving = asyncio.Event()
        self._stopped = asyncio.Event()
        self._say = say

    async def run(self) -> None:
        tasks = [asyncio.create_task(self._serve())]
        if self.rotator is not None:
            tasks.append(asyncio.create_task(self.rotator.run()))
        try:
            await asyncio.gather(*tasks)
        finally:
            for t in tasks:
                t.cancel()
            await self.server.stop()

    async def _serve(self) -> None:
        waited = False
        while not self._stopped.is_set():
            if not self.serving.is_set():
                if await self.server.start():
                    self.serving.set()
                    where = f"webhook server: serving on {self.server.url}"
                    log.info(where)
                    if self._say is not None:
                        self._say(where)
                elif not waited and self.rotator is None:
                    log.warning("webhook: waiting for %s and %s", self.server.cert_path, self.server.key_path)
                    waited = True
            else:
                self.server.reload()
            await self._pause()

    async def _pause(self) -> None:
        """A reload period, cut short by ``stop()`` or by the rotator's first certificates."""
        waits = [asyncio.create_task(self._stopped.wait())]
        if self.rotator is not None and not self.rotator.ready.is_set() and not self.serving.is_set():
            waits.append(asyncio.create_task(self.rotator.ready.wait()))
        try:
            await asyncio.wait(waits, timeout=self.settings.reload_period, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def stop(self) -> None:
        self._stopped.set()
        if self.rotator is not None:
            await self.rotator.stop()
