"""The certificate rotator: keeps the webhook's CA and serving certificate valid in a
Secret, writes them into the cert dir, and injects the CA into the webhook configurations.

As the original's cert controller: every replica runs it; the Secret is the one truth
(a write that loses a race re-reads it), so replicas converge on one certificate. The
period is short (a minute, the original's is 12 h with a watch) because it also puts
back a ``caBundle`` someone removed, e.g. by re-applying the install output.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import logging
import os
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from phalanx.client.interface import Client
from phalanx.controller.webhook import certs
from phalanx.controller.webhook.review import MUTATING_CONFIG_NAME, VALIDATING_CONFIG_NAME
from phalanx.objects.clock import Clock
from phalanx.objects.errors import AlreadyExists, ApiError, Conflict, NotFound

log = logging.getLogger(__name__)
DEFAULT_CERT_DIR = "/tmp/k8s-webhook-server/serving-certs"  # controller-runtime's
# The original's Service and Secret are training-operator and training-operator-webhook-cert.
DEFAULT_SERVICE_NAME = "phalanx-operator-webhook"
DEFAULT_SECRET_NAME = "phalanx-operator-webhook-cert"


@dataclass(frozen=True)
class CertSettings:
    namespace: str
    secret_name: str = DEFAULT_SECRET_NAME
    service_name: str = DEFAULT_SERVICE_NAME
    cert_dir: str = DEFAULT_CERT_DIR
    validating_config: str | None = VALIDATING_CONFIG_NAME
    mutating_config: str | None = MUTATING_CONFIG_NAME
    lookahead: timedelta = certs.LOOKAHEAD
    period: float = 60.0
    labels: dict[str, str] = field(default_factory=lambda: {"app.kubernetes.io/part-of": "phalanx"})

    @property
    def dns_names(self) -> list[str]:
        return certs.service_dns_names(self.service_name, self.namespace)


def decode_data(secret: dict[str, Any] | None) -> dict[str, bytes]:
    """A Secret's ``data``, decoded; values that are not base64 are left out."""
    out: dict[str, bytes] = {}
    data = (secret or {}).get("data")
    if not isinstance(data, dict):
        return out
    for k, v in data.items():
        if isinstance(v, str):
            try:
                out[k] = base64.b64decode(v, validate=True)
            except (binascii.Error, ValueError):
                continue
    return out


def encode_data(data: dict[str, bytes]) -> dict[str, str]:
    return {k: base64.b64encode(v).decode("ascii") for k, v in sorted(data.items())}


def write_cert_files(cert_dir: str | Path, data: dict[str, bytes]) -> bool:
    """``tls.crt``, ``tls.key`` and ``ca.crt`` into ``cert_dir`` (each replaced whole, the
    key readable by its owner only); True when any file changed."""
    d = Path(cert_dir)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    changed = False
    for name in (certs.CA_CERT, certs.TLS_KEY, certs.TLS_CERT):  # the cert last: the server reloads on it
        content = data[name]
        path = d / name
        try:
            if path.read_bytes() == content:
                continue
        except OSError:
            pass
        tmp = d / f".{name}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if name == certs.TLS_KEY else 0o644)
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        os.replace(tmp, path)
        changed = True
    return changed


def inject_ca_bundle(config: dict[str, Any], ca_pem: bytes) -> bool:
    """Set every webhook's ``clientConfig.caBundle``; True when anything changed."""
    bundle = base64.b64encode(ca_pem).decode("ascii")
    changed = False
    for hook in config.get("webhooks") or []:
        if not isinstance(hook, dict):
            continue
        client_config = hook.setdefault("clientConfig", {})
        if client_config.get("caBundle") != bundle:
            client_config["caBundle"] = bundle
            changed = True
    return changed


class CertRotator:
    """``refresh()`` once; ``run()`` refreshes every ``settings.period`` until ``stop()``."""

    def __init__(self, client: Client, clock: Clock, settings: CertSettings) -> None:
        self.client = client
        self.clock = clock
        self.settings = settings
        self._stopped = asyncio.Event()
        self.ready = asyncio.Event()  # set once the cert files are in place
        self.last_error: str | None = None

    async def refresh(self) -> bool:
        """Make the Secret, the files and the caBundles right; False (and ``last_error``)
        when the API server refused something. Never raises an ``ApiError``."""
        try:
            data = await self._ensure_secret()
            if write_cert_files(self.settings.cert_dir, data):
                log.info("webhook: certificates written to %s", self.settings.cert_dir)
            self.ready.set()
            await self._inject(data[certs.CA_CERT])
        except ApiError as e:
            self.last_error = e.message
            log.error("webhook: certificate rotation: %s", e.message)
            return False
        except OSError as e:
            self.last_error = f"cert dir {self.settings.cert_dir}: {e}"
            log.error("webhook: certificate rotation: %s", self.last_error)
            return False
        except Exception as e:  # a bug or a Secret no rule foresaw: retried next period, never fatal
            self.last_error = f"{type(e).__name__}: {e}"
            log.exception("webhook: certificate rotation failed")
            return False
        self.last_error = None
        return True

    async def _ensure_secret(self) -> dict[str, bytes]:
        s = self.settings
        for _ in range(5):
            try:
                secret: dict[str, Any] | None = await self.client.get("Secret", s.secret_name, s.namespace)
            except NotFound:
                secret = None
            data = decode_data(secret)
            renew, why = certs.renewal(data, s.dns_names[0], self.clock.now(), s.lookahead)
            if renew is certs.Renew.NOTHING:
                return data
            log.warning("webhook: renewing %s certificates in Secret %s/%s: %s",
                        "the CA and serving" if renew is certs.Renew.ALL else "the serving", s.namespace,
                        s.secret_name, why)
            new = await asyncio.to_thread(certs.renewed, data, renew, s.dns_names, self.clock.now())
            try:
                if secret is None:
                    await self.client.create({
                        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                        "metadata": {"name": s.secret_name, "namespace": s.namespace, "labels": dict(s.labels)},
                        "data": encode_data(new)})
                else:
                    secret["data"] = encode_data(new)
                    await self.client.update(secret)
            except (AlreadyExists, Conflict):
                continue  # another replica wrote it first: read theirs
            return new
        raise Conflict("secrets", s.secret_name)  # it kept changing under the rotator: next period

    async def _inject(self, ca_pem: bytes) -> None:
        kinds = (("ValidatingWebhookConfiguration", self.settings.validating_config),
                 ("MutatingWebhookConfiguration", self.settings.mutating_config))
        for kind, name in kinds:
            if not name:
                continue
            for _ in range(3):
                try:
                    config = await self.client.get(kind, name)
                except NotFound:
                    log.info("webhook: no %s %s to inject the CA into", kind, name)
                    break
                if not inject_ca_bundle(config, ca_pem):
                    break
                try:
                    await self.client.update(config)
                    log.info("webhook: CA injected into %s %s", kind, name)
                    break
                except Conflict:
                    continue

    async def run(self) -> None:
        while not self._stopped.is_set():
            await self.refresh()
            try:
                await asyncio.wait_for(self._stopped.wait(), self.settings.period)
            except asyncio.TimeoutError:
                pass

    async def stop(self) -> None:
        self._stopped.set()
