"""The local CA, the server certificate and the kubeconfig: a client trusting the
CA completes a TLS handshake on loopback, files are reused across starts and
renewed when due, keys stay private, and the kubeconfig is a standard one."""
from __future__ import annotations

import asyncio
import base64
import ipaddress
import ssl
import stat
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import yaml
from cryptography import x509

from phalanx.server.tls import (
    DEFAULT_HOSTS,
    TLSFiles,
    client_ssl_context,
    ensure_tls,
    ssl_context,
    write_kubeconfig,
)

pytestmark = pytest.mark.timeout(30)

NOW = datetime(2026, 11, 29, 7, 0, tzinfo=timezone.utc)


def mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


def cert(p: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(p.read_bytes())


def contents(files: TLSFiles) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in (files.ca_cert, files.ca_key, files.server_cert, files.server_key)}


@pytest.fixture
def files(tmp_path) -> TLSFiles:
    return ensure_tls(tmp_path / "tls")


def test_files_and_modes(files, tmp_path):
    assert files.ca_cert == tmp_path / "tls" / "ca.crt" and files.ca_key == tmp_path / "tls" / "ca.key"
    assert mode(tmp_path / "tls") == 0o700
    assert mode(files.ca_key) == 0o600 and mode(files.server_key) == 0o600
    assert not mode(files.ca_cert) & 0o022 and not mode(files.server_cert) & 0o022
    assert b"PRIVATE KEY" in files.server_key.read_bytes()
    leftovers = [p.name for p in files.ca_cert.parent.iterdir() if p.name.startswith(".") and p.name != ".lock"]
    assert leftovers == []  # no temp files left behind


def test_server_certificate_is_signed_by_the_ca_for_the_loopback_names(files):
    ca, server = cert(files.ca_cert), cert(files.server_cert)
    server.verify_directly_issued_by(ca)  # raises if not
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    assert server.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
    sans = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(sans.get_values_for_type(x509.IPAddress)) == {ipaddress.ip_address("127.0.0.1"),
                                                             ipaddress.ip_address("::1")}
    assert sans.get_values_for_type(x509.DNSName) == ["localhost"]
    eku = server.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert x509.oid.ExtendedKeyUsageOID.SERVER_AUTH in eku


async def handshake(server_ctx: ssl.SSLContext, client_ctx: ssl.SSLContext, host: str, server_name: str) -> bytes:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"hello " + (await reader.readline()))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, host, 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=client_ctx, server_hostname=server_name), 10)
        writer.write(b"tls\n")
        await writer.drain()
        data = await asyncio.wait_for(reader.read(), 10)
        writer.close()
        return data
    finally:
        server.close()
        await server.wait_closed()


async def test_a_client_trusting_the_ca_completes_a_handshake(files):
    server_ctx = ssl_context(files)
    assert await handshake(server_ctx, client_ssl_context(files.ca_cert), "127.0.0.1", "127.0.0.1") == b"hello tls\n"
    assert await handshake(server_ctx, client_ssl_context(files.ca_cert), "127.0.0.1", "localhost") == b"hello tls\n"
    plain = ssl.create_default_context(cafile=str(files.ca_cert))  # what any client given the CA file does
    assert await handshake(server_ctx, plain, "127.0.0.1", "127.0.0.1") == b"hello tls\n"


async def test_a_client_not_trusting_the_ca_or_using_another_name_is_refused(files, tmp_path):
    other = ensure_tls(tmp_path / "other")
    with pytest.raises(ssl.SSLCertVerificationError):
        await handshake(ssl_context(files), client_ssl_context(other.ca_cert), "127.0.0.1", "127.0.0.1")
    with pytest.raises(ssl.SSLCertVerificationError):
        await handshake(ssl_context(files), client_ssl_context(files.ca_cert), "127.0.0.1", "example.com")


def test_reused_across_restarts(tmp_path):
    first = ensure_tls(tmp_path / "tls", NOW)
    before = contents(first)
    again = ensure_tls(tmp_path / "tls", NOW + timedelta(days=100))
    assert again == first and contents(again) == before


def test_server_certificate_renewed_before_expiry_ca_kept(tmp_path):
    files = ensure_tls(tmp_path / "tls", NOW)
    before = contents(files)
    later = NOW + timedelta(days=340)  # within 30 days of the server certificate's end
    ensure_tls(tmp_path / "tls", later)
    after = contents(files)
    assert after["ca.crt"] == before["ca.crt"] and after["ca.key"] == before["ca.key"]
    assert after["server.crt"] != before["server.crt"] and after["server.key"] != before["server.key"]
    renewed = cert(files.server_cert)
    renewed.verify_directly_issued_by(cert(files.ca_cert))
    assert renewed.not_valid_before_utc <= later < renewed.not_valid_after_utc


def test_ca_renewed_near_its_end_reissues_the_server_certificate(tmp_path):
    files = ensure_tls(tmp_path / "tls", NOW)
    before = contents(files)
    ensure_tls(tmp_path / "tls", NOW + timedelta(days=3640))
    after = contents(files)
    assert after["ca.crt"] != before["ca.crt"] and after["server.crt"] != before["server.crt"]
    cert(files.server_cert).verify_directly_issued_by(cert(files.ca_cert))


def test_broken_or_foreign_files_are_replaced(tmp_path):
    files = ensure_tls(tmp_path / "tls", NOW)
    files.server_key.write_bytes(b"not a key")
    ensure_tls(tmp_path / "tls", NOW)
    ssl_context(files)  # loads again: the pair matches
    assert mode(files.server_key) == 0o600
    # A server certificate from another CA is not trusted by the kubeconfig's CA: reissued.
    other = ensure_tls(tmp_path / "other", NOW)
    files.server_cert.write_bytes(other.server_cert.read_bytes())
    files.server_key.write_bytes(other.server_key.read_bytes())
    ensure_tls(tmp_path / "tls", NOW)
    cert(files.server_cert).verify_directly_issued_by(cert(files.ca_cert))
    # A key that does not match its certificate: reissued.
    files.ca_key.write_bytes(other.ca_key.read_bytes())
    ensure_tls(tmp_path / "tls", NOW)
    cert(files.server_cert).verify_directly_issued_by(cert(files.ca_cert))
    ssl_context(files)


def test_new_host_names_reissue_the_server_certificate(tmp_path):
    files = ensure_tls(tmp_path / "tls", NOW)
    ensure_tls(tmp_path / "tls", NOW, hosts=DEFAULT_HOSTS + ("phalanx.local",))
    sans = cert(files.server_cert).extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "phalanx.local" in sans.get_values_for_type(x509.DNSName)


# --------------------------------------------------------------------------
# kubeconfig
# --------------------------------------------------------------------------


def test_kubeconfig_is_standard_private_and_inlines_the_ca(files, tmp_path):
    path = tmp_path / "kube" / "config"
    write_kubeconfig(path, "https://127.0.0.1:6443", files.ca_cert, "s3cr3t-token")
    assert mode(path) == 0o600
    cfg = yaml.safe_load(path.read_text())
    assert cfg["apiVersion"] == "v1" and cfg["kind"] == "Config" and cfg["current-context"] == "phalanx"
    assert cfg["clusters"] == [{"name": "phalanx", "cluster": {
        "server": "https://127.0.0.1:6443",
        "certificate-authority-data": base64.b64encode(files.ca_cert.read_bytes()).decode()}}]
    assert cfg["users"] == [{"name": "phalanx", "user": {"token": "s3cr3t-token"}}]
    assert cfg["contexts"] == [{"name": "phalanx", "context": {"cluster": "phalanx", "user": "phalanx",
                                                               "namespace": "default"}}]
    ca = base64.b64decode(cfg["clusters"][0]["cluster"]["certificate-authority-data"])
    assert ca == files.ca_cert.read_bytes()


def test_kubeconfig_merges_into_an_existing_one(files, tmp_path):
    path = tmp_path / "config"
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "work",
        "clusters": [{"name": "work", "cluster": {"server": "https://k8s.example:443"}},
                     {"name": "phalanx", "cluster": {"server": "https://127.0.0.1:1"}}],
        "users": [{"name": "work", "user": {"token": "w"}}],
        "contexts": [{"name": "work", "context": {"cluster": "work", "user": "work"}}]}))
    path.chmod(0o644)
    write_kubeconfig(path, "https://127.0.0.1:7443", files.ca_cert, "t2", context_name="phalanx", namespace="team-a")
    cfg = yaml.safe_load(path.read_text())
    assert [c["name"] for c in cfg["clusters"]] == ["work", "phalanx"]
    assert cfg["clusters"][1]["cluster"]["server"] == "https://127.0.0.1:7443"  # replaced, not duplicated
    assert [u["name"] for u in cfg["users"]] == ["work", "phalanx"]
    assert cfg["contexts"][1]["context"]["namespace"] == "team-a"
    assert cfg["current-context"] == "phalanx" and mode(path) == 0o600


def test_kubeconfig_refuses_bad_input_and_foreign_files(files, tmp_path):
    path = tmp_path / "config"
    for kwargs, field in (({"server_url": "127.0.0.1:6443"}, "server_url"),
                          ({"token": "a\nb"}, "token"), ({"token": ""}, "token"),
                          ({"namespace": "Bad_NS"}, "namespace"), ({"context_name": ""}, "context_name")):
        args = {"path": path, "server_url": "https://127.0.0.1:6443", "ca_cert_path": files.ca_cert,
                "token": "t", **kwargs}
        with pytest.raises(ValueError, match=field):
            write_kubeconfig(**args)
    assert not path.exists()
    path.write_text("just: [text\n")
    with pytest.raises(ValueError, match="refusing to overwrite"):
        write_kubeconfig(path, "https://127.0.0.1:6443", files.ca_cert, "t")
    path.write_text("kind: Pod\n")
    with pytest.raises(ValueError, match="refusing to overwrite"):
        write_kubeconfig(path, "https://127.0.0.1:6443", files.ca_cert, "t")
    assert path.read_text() == "kind: Pod\n"
