"""The webhook's certificates (controller.webhook.certs) with real keys, the rotation
decisions on a fake clock, and the rotator against an in-process store."""
from __future__ import annotations

import asyncio
import base64
import ipaddress
import stat
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from phalanx.api.admission import admit
from phalanx.client.local import LocalClient
from phalanx.controller.webhook import certs
from phalanx.controller.webhook.certs import Renew, renewal
from phalanx.controller.webhook.rotator import CertRotator, CertSettings, decode_data, inject_ca_bundle
from phalanx.objects.clock import FakeClock
from phalanx.objects.errors import Conflict, Forbidden
from phalanx.store.store import Store

DNS = certs.service_dns_names("phalanx-operator-webhook", "phalanx-system")
NOW = FakeClock().now()


@pytest.fixture(scope="module")
def bundle() -> dict[str, bytes]:
    return certs.renewed(None, Renew.ALL, DNS, NOW)


def test_fresh_certificates_are_valid_and_name_the_service(bundle):
    assert renewal(bundle, DNS[0], NOW) == (Renew.NOTHING, "valid")
    cert = x509.load_pem_x509_certificate(bundle[certs.TLS_CERT])
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.DNSName) == [
        "phalanx-operator-webhook.phalanx-system.svc", "phalanx-operator-webhook.phalanx-system.svc.cluster.local",
        "phalanx-operator-webhook.phalanx-system", "phalanx-operator-webhook", "localhost"]
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1")]
    assert cert.not_valid_before_utc == NOW - timedelta(hours=1)
    assert cert.not_valid_after_utc == NOW + timedelta(days=365)
    ca = x509.load_pem_x509_certificate(bundle[certs.CA_CERT])
    assert ca.not_valid_after_utc == NOW + timedelta(days=3650)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert bundle[certs.TLS_KEY].startswith(b"-----BEGIN RSA PRIVATE KEY-----")  # PKCS#1, as the original
    cert.verify_directly_issued_by(ca)


def test_serving_certificate_renewed_within_the_lookahead(bundle):
    expires = NOW + timedelta(days=365)
    assert renewal(bundle, DNS[0], expires - timedelta(days=90, seconds=1))[0] is Renew.NOTHING
    renew, why = renewal(bundle, DNS[0], expires - timedelta(days=90) + timedelta(seconds=1))
    assert renew is Renew.SERVER and "serving certificate" in why and "not valid" in why


def test_ca_renewed_within_the_lookahead(bundle):
    ca_expires = NOW + timedelta(days=3650)
    renew, why = renewal(bundle, DNS[0], ca_expires - timedelta(days=89))
    assert renew is Renew.ALL and why.startswith("CA:")


def test_renewing_the_serving_certificate_keeps_the_ca(bundle):
    later = NOW + timedelta(days=300)
    assert renewal(bundle, DNS[0], later)[0] is Renew.SERVER
    new = certs.renewed(bundle, Renew.SERVER, DNS, later)
    assert new[certs.CA_CERT] == bundle[certs.CA_CERT] and new[certs.CA_KEY] == bundle[certs.CA_KEY]
    assert new[certs.TLS_CERT] != bundle[certs.TLS_CERT]
    assert renewal(new, DNS[0], later) == (Renew.NOTHING, "valid")


def test_a_serving_certificate_never_outlives_its_ca(bundle):
    late = NOW + timedelta(days=3650 - 100)
    new = certs.renewed(bundle, Renew.SERVER, DNS, late)
    cert = x509.load_pem_x509_certificate(new[certs.TLS_CERT])
    assert cert.not_valid_after_utc == NOW + timedelta(days=3650)


@pytest.mark.parametrize("broken, expected", [
    ({}, Renew.ALL),
    ({certs.CA_CERT: b"garbage"}, Renew.ALL),
    ({certs.CA_KEY: b""}, Renew.ALL),
    ({certs.TLS_CERT: b""}, Renew.SERVER),
    ({certs.TLS_KEY: b"-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n"}, Renew.SERVER),
])
def test_missing_or_broken_parts(bundle, broken, expected):
    data = dict(bundle) if broken else {}
    data.update(broken)
    assert renewal(data, DNS[0], NOW)[0] is expected


def test_mismatched_keys_and_foreign_issuers(bundle):
    other = certs.renewed(None, Renew.ALL, DNS, NOW)
    # the CA key of another CA: the CA is renewed
    assert renewal({**bundle, certs.CA_KEY: other[certs.CA_KEY]}, DNS[0], NOW)[0] is Renew.ALL
    # a serving certificate of another CA, or another certificate's key: the serving one is renewed
    renew, why = renewal({**bundle, certs.TLS_CERT: other[certs.TLS_CERT], certs.TLS_KEY: other[certs.TLS_KEY]},
                         DNS[0], NOW)
    assert renew is Renew.SERVER and "not issued by the CA" in why
    renew, why = renewal({**bundle, certs.TLS_KEY: other[certs.TLS_KEY]}, DNS[0], NOW)
    assert renew is Renew.SERVER and "key does not match" in why
    # the CA as serving certificate: it does not name the service
    renew, why = renewal({**bundle, certs.TLS_CERT: bundle[certs.CA_CERT], certs.TLS_KEY: bundle[certs.CA_KEY]},
                         DNS[0], NOW)
    assert renew is Renew.SERVER and "does not name" in why


def test_another_service_name_renews_the_serving_certificate(bundle):
    renew, why = renewal(bundle, "other.phalanx-system.svc", NOW)
    assert renew is Renew.SERVER and "does not name other.phalanx-system.svc" in why


def test_inject_ca_bundle_sets_every_webhook_once():
    config = {"webhooks": [{"name": "a", "clientConfig": {"service": {"name": "s"}}}, {"name": "b"}, "junk"]}
    assert inject_ca_bundle(config, b"CA") is True
    assert [h["clientConfig"]["caBundle"] for h in config["webhooks"][:2]] == [base64.b64encode(b"CA").decode()] * 2
    assert inject_ca_bundle(config, b"CA") is False


def test_decode_data_skips_what_is_not_base64():
    assert decode_data({"data": {"a": base64.b64encode(b"x").decode(), "b": "%%%", "c": 3}}) == {"a": b"x"}
    assert decode_data(None) == {} and decode_data({"data": "x"}) == {}


# --- the rotator against a store -------------------------------------------------------

def _config(kind: str, name: str) -> dict:
    return {"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind, "metadata": {"name": name},
            "webhooks": [{"name": f"{k}.training-operator.kubeflow.org", "sideEffects": "None",
                          "admissionReviewVersions": ["v1"],
                          "clientConfig": {"service": {"namespace": "phalanx-system", "name": "svc"}}}
                         for k in ("a", "b")]}


class Harness:
    def __init__(self, tmp: Path) -> None:
        self.clock = FakeClock()
        self.client = LocalClient(Store(None, self.clock, admission=admit))
        self.settings = CertSettings(namespace="phalanx-system", cert_dir=str(tmp / "certs"))
        self.rotator = CertRotator(self.client, self.clock, self.settings)

    async def secret(self) -> dict[str, bytes]:
        return decode_data(await self.client.get("Secret", self.settings.secret_name, "phalanx-system"))

    async def bundles(self) -> list[str]:
        out = []
        for kind, name in (("ValidatingWebhookConfiguration", self.settings.validating_config),
                           ("MutatingWebhookConfiguration", self.settings.mutating_config)):
            cfg = await self.client.get(kind, name)
            out += [h["clientConfig"].get("caBundle") for h in cfg["webhooks"]]
        return out


def test_rotator_creates_writes_injects_and_rotates(tmp_path):
    async def go() -> None:
        h = Harness(tmp_path)
        await h.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "phalanx-system"}})
        await h.client.create(_config("ValidatingWebhookConfiguration", h.settings.validating_config))
        await h.client.create(_config("MutatingWebhookConfiguration", h.settings.mutating_config))
        assert await h.rotator.refresh() is True and h.rotator.ready.is_set()
        data = await h.secret()
        assert renewal(data, DNS[0], h.clock.now()) == (Renew.NOTHING, "valid")
        d = Path(h.settings.cert_dir)
        assert (d / "tls.crt").read_bytes() == data["tls.crt"] and (d / "tls.key").read_bytes() == data["tls.key"]
        assert stat.S_IMODE((d / "tls.key").stat().st_mode) == 0o600
        ca_b64 = base64.b64encode(data["ca.crt"]).decode()
        assert await h.bundles() == [ca_b64] * 4

        # Nothing to do: the Secret is not written again.
        rv = (await h.client.get("Secret", h.settings.secret_name, "phalanx-system"))["metadata"]["resourceVersion"]
        assert await h.rotator.refresh() is True
        assert (await h.client.get("Secret", h.settings.secret_name, "phalanx-system"))["metadata"][
            "resourceVersion"] == rv

        # 276 days on, the serving certificate is inside the lookahead: renewed, same CA.
        h.clock.advance(276 * 86400)
        assert await h.rotator.refresh() is True
        new = await h.secret()
        assert new["ca.crt"] == data["ca.crt"] and new["tls.crt"] != data["tls.crt"]
        assert (d / "tls.crt").read_bytes() == new["tls.crt"]

        # A removed caBundle (the install output re-applied) is put back.
        cfg = _config("MutatingWebhookConfiguration", h.settings.mutating_config)
        cfg["metadata"]["resourceVersion"] = (await h.client.get(
            "MutatingWebhookConfiguration", h.settings.mutating_config))["metadata"]["resourceVersion"]
        await h.client.update(cfg)
        assert await h.rotator.refresh() is True
        assert await h.bundles() == [ca_b64] * 4

        # Secret deleted: a new CA, injected everywhere.
        await h.client.delete("Secret", h.settings.secret_name, "phalanx-system")
        assert await h.rotator.refresh() is True
        third = await h.secret()
        assert third["ca.crt"] != data["ca.crt"]
        assert await h.bundles() == [base64.b64encode(third["ca.crt"]).decode()] * 4

    asyncio.run(go())


def test_rotator_refused_then_allowed_and_without_configurations(tmp_path):
    async def go() -> None:
        h = Harness(tmp_path)
        real_create = h.client.create

        async def forbidden(obj):
            raise Forbidden('secrets is forbidden: User "x" cannot create resource "secrets"')

        h.client.create = forbidden  # type: ignore[method-assign]
        assert await h.rotator.refresh() is False
        assert "forbidden" in (h.rotator.last_error or "") and not h.rotator.ready.is_set()
        h.client.create = real_create  # type: ignore[method-assign]
        assert await h.rotator.refresh() is True and h.rotator.last_error is None  # no configurations: fine
        assert h.rotator.ready.is_set()

    asyncio.run(go())


def test_rotator_losing_a_race_takes_the_winners_certificate(tmp_path):
    async def go() -> None:
        h = Harness(tmp_path)
        await h.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "phalanx-system"}})
        other = CertRotator(h.client, h.clock, h.settings)
        real_update = h.client.update
        raced = []

        async def update_after_the_other(obj):  # the other replica writes between our read and our write
            if obj["kind"] == "Secret" and not raced:
                raced.append(1)
                h.clock.advance(300 * 86400)
                await other.refresh()
                raise Conflict("secrets", obj["metadata"]["name"])
            return await real_update(obj)

        await h.rotator.refresh()
        first = await h.secret()
        h.client.update = update_after_the_other  # type: ignore[method-assign]
        h.clock.advance(300 * 86400)  # inside the lookahead: both want to renew
        assert await h.rotator.refresh() is True
        winner = await h.secret()
        assert raced and winner["tls.crt"] != first["tls.crt"]
        assert (Path(h.settings.cert_dir) / "tls.crt").read_bytes() == winner["tls.crt"]

    asyncio.run(go())


def test_a_ca_with_a_key_that_is_not_rsa_is_replaced(bundle):
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, certs.CA_NAME)])
    ca = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
          .serial_number(1).not_valid_before(NOW - timedelta(hours=1)).not_valid_after(NOW + timedelta(days=3650))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .add_extension(x509.SubjectAlternativeName([x509.DNSName(certs.CA_NAME)]), critical=False)
          .sign(key, hashes.SHA256()))
    data = {**bundle, certs.CA_CERT: ca.public_bytes(serialization.Encoding.PEM),
            certs.CA_KEY: key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.NoEncryption())}
    renew, why = renewal(data, DNS[0], NOW)
    assert renew is Renew.ALL and "not an RSA key" in why
    assert renewal(certs.renewed(data, renew, DNS, NOW), DNS[0], NOW)[0] is Renew.NOTHING


def test_rotator_survives_an_unexpected_error(tmp_path):
    async def go() -> None:
        h = Harness(tmp_path)

        async def broken(*a, **k):
            raise RuntimeError("boom")

        h.client.get = broken  # type: ignore[method-assign]
        assert await h.rotator.refresh() is False and "RuntimeError: boom" in (h.rotator.last_error or "")

    asyncio.run(go())
