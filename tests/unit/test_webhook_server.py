"""The webhook HTTPS server (controller.webhook.server) in-process, with real TLS: it serves
the cert dir's certificate, reloads it when the files change, waits for files it does not
make (rotation off), and survives a port it cannot bind."""
from __future__ import annotations

import asyncio
import json
import socket
import ssl
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from phalanx.controller.webhook import certs
from phalanx.controller.webhook.certs import Renew
from phalanx.controller.webhook.rotator import write_cert_files
from phalanx.controller.webhook.server import Webhooks, WebhookServer, WebhookSettings
from phalanx.objects.clock import Clock

DNS = certs.service_dns_names("svc", "ns")


def bundle() -> dict[str, bytes]:
    return certs.renewed(None, Renew.ALL, DNS, Clock().now())


async def served_cert(port: int, ca: bytes, path: str = "/validate-kubeflow-org-v1-jaxjob",
                      body: bytes = b"{}") -> tuple[bytes, int, dict]:
    """Handshake verifying against ``ca``, POST ``body``; the peer's DER certificate, the status, the JSON."""
    ctx = ssl.create_default_context(cadata=ca.decode())
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx, server_hostname="127.0.0.1")
    try:
        peer = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        writer.write(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
        await writer.drain()
        raw = await reader.read()
    finally:
        writer.close()
    head, _, payload = raw.partition(b"\r\n\r\n")
    return peer, int(head.split()[1]), json.loads(payload)


def der(pem: bytes) -> bytes:
    return x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)


def test_serves_and_reloads_a_rotated_certificate(tmp_path):
    async def go() -> None:
        first = bundle()
        write_cert_files(tmp_path, first)
        server = WebhookServer("127.0.0.1", 0, str(tmp_path))
        assert await server.start() is True and server.bound_port
        try:
            peer, status, out = await served_cert(server.bound_port, first["ca.crt"])
            assert peer == der(first["tls.crt"]) and status == 400 and out["reason"] == "BadRequest"
            assert server.reload() is False  # unchanged files: nothing loaded
            second = certs.renewed(first, Renew.SERVER, DNS, Clock().now())
            write_cert_files(tmp_path, second)
            assert server.reload() is True
            peer, _, _ = await served_cert(server.bound_port, first["ca.crt"])
            assert peer == der(second["tls.crt"])
            # A broken pair is not loaded: the last good certificate stays.
            (tmp_path / "tls.key").write_bytes(bundle()["tls.key"])
            assert server.reload() is False
            peer, _, _ = await served_cert(server.bound_port, first["ca.crt"])
            assert peer == der(second["tls.crt"])
        finally:
            await server.stop()

    asyncio.run(go())


def test_without_rotation_it_waits_for_the_files(tmp_path):
    async def go() -> None:
        said: list[str] = []
        hooks = Webhooks(None, Clock(), WebhookSettings(port=0, cert_dir=str(tmp_path / "c"), rotate=False,  # type: ignore[arg-type]
                                                        reload_period=0.02), said.append)
        assert hooks.rotator is None
        task = asyncio.create_task(hooks.run())
        try:
            await asyncio.sleep(0.1)
            assert not hooks.serving.is_set()
            data = bundle()
            write_cert_files(tmp_path / "c", data)  # what cert-manager's mounted Secret holds
            await asyncio.wait_for(hooks.serving.wait(), 5)
            assert said == [f"webhook server: serving on https://127.0.0.1:{hooks.server.bound_port}"]
            peer, _, _ = await served_cert(hooks.server.bound_port or 0, data["ca.crt"])
            assert peer == der(data["tls.crt"])
        finally:
            await hooks.stop()
            await asyncio.wait_for(task, 5)

    asyncio.run(go())


def test_a_port_in_use_is_reported_not_fatal(tmp_path):
    async def go() -> None:
        write_cert_files(tmp_path, bundle())
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen()
            server = WebhookServer("127.0.0.1", s.getsockname()[1], str(tmp_path))
            assert await server.start() is False
            assert "cannot listen on 127.0.0.1" in (server.last_error or "")
        await server.stop()

    asyncio.run(go())


def test_unknown_path_is_404(tmp_path):
    async def go() -> None:
        data = bundle()
        write_cert_files(tmp_path, data)
        server = WebhookServer("127.0.0.1", 0, str(tmp_path))
        await server.start()
        try:
            _, status, out = await served_cert(server.bound_port or 0, data["ca.crt"], "/elsewhere")
            assert status == 404 and out["code"] == 404
        finally:
            await server.stop()

    asyncio.run(go())


def test_key_file_is_private(tmp_path):
    write_cert_files(tmp_path, bundle())
    assert (Path(tmp_path) / "tls.key").stat().st_mode & 0o077 == 0
