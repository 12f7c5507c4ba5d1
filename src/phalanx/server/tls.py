"""A local certificate authority and server certificate, and a kubeconfig that trusts them.

kubectl sends its bearer token only over TLS (docs/REFERENCE.md W1.9), so the API
serves HTTPS with a certificate for the loopback names, signed by a CA made on
first start. Both are kept (keys mode 0600) and reused while valid, so a
kubeconfig written once keeps working across restarts.
"""
from __future__ import annotations

import base64
import fcntl
import ipaddress
import os
import re
import ssl
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Iterator

import yaml
from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from phalanx.objects.names import is_dns_label

CA_CERT = "ca.crt"
CA_KEY = "ca.key"
SERVER_CERT = "server.crt"
SERVER_KEY = "server.key"
LOCK = ".lock"

DEFAULT_HOSTS: tuple[str, ...] = ("127.0.0.1", "localhost", "::1")
CA_LIFETIME = timedelta(days=3650)
SERVER_LIFETIME = timedelta(days=365)
RENEW_BEFORE = timedelta(days=30)  # a certificate this close to expiry is replaced
BACKDATE = timedelta(hours=1)  # tolerate a little clock skew between issuing and checking


@dataclass(frozen=True)
class TLSFiles:
    ca_cert: Path
    server_cert: Path
    server_key: Path

    @property
    def ca_key(self) -> Path:
        return self.ca_cert.with_name(CA_KEY)


# --------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------


def _write_private(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write atomically, never readable by others in between: a temp file in the
    same directory created with ``mode``, then renamed over ``path``."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Serialise ``ensure_tls`` between processes starting at the same time."""
    fd = os.open(directory / LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _load(cert_path: Path, key_path: Path) -> tuple[x509.Certificate, Any] | None:
    """The certificate and key at these paths, or None if either is missing or unreadable."""
    try:
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except (OSError, ValueError, TypeError):
        return None
    pub = lambda k: k.public_bytes(serialization.Encoding.DER,
                                   serialization.PublicFormat.SubjectPublicKeyInfo)
    if pub(cert.public_key()) != pub(key.public_key()):
        return None
    return cert, key


def _time_ok(cert: x509.Certificate, now: datetime) -> bool:
    return cert.not_valid_before_utc <= now and now + RENEW_BEFORE < cert.not_valid_after_utc


# --------------------------------------------------------------------------
# Issuing
# --------------------------------------------------------------------------


def _san(hosts: tuple[str, ...]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for h in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(h)))
        except ValueError:
            names.append(x509.DNSName(h))
    return names


def _new_ca(now: datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "phalanx"),
                      x509.NameAttribute(NameOID.COMMON_NAME, f"phalanx-ca@{int(now.timestamp())}")])
    cert = (x509.CertificateBuilder()
            .subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE).not_valid_after(now + CA_LIFETIME)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=True,
                                         crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return cert, key


def _new_server(ca_cert: x509.Certificate, ca_key: Any, hosts: tuple[str, ...],
                now: datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "phalanx"),
                                     x509.NameAttribute(NameOID.COMMON_NAME, "phalanx-apiserver")]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE)
            .not_valid_after(min(now + SERVER_LIFETIME, ca_cert.not_valid_after_utc))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                         data_encipherment=False, key_agreement=False, key_cert_sign=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName(_san(hosts)), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return cert, key


def _is_ca(cert: x509.Certificate) -> bool:
    try:
        return bool(cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca)
    except x509.ExtensionNotFound:
        return False


def _server_ok(cert: x509.Certificate, ca_cert: x509.Certificate, hosts: tuple[str, ...], now: datetime) -> bool:
    if not _time_ok(cert, now):
        return False
    try:
        cert.verify_directly_issued_by(ca_cert)
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except (ValueError, TypeError, x509.ExtensionNotFound, InvalidSignature):
        return False
    return all(name in sans for name in _san(hosts))


def ensure_tls(directory: Path, now: datetime | None = None, hosts: tuple[str, ...] = DEFAULT_HOSTS) -> TLSFiles:
    """The CA and server certificate under ``directory`` (created mode 0700),
    reusing what is there while valid: the CA for 10 years, the server
    certificate for a year (renewed 30 days ahead, or when the CA or the host
    names changed). Keys are written mode 0600."""
    now = now or datetime.now(timezone.utc)
    if now.tzinfo is None:
        now = now.replace(tzinfo=timezone.utc)
    directory = Path(directory)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    files = TLSFiles(directory / CA_CERT, directory / SERVER_CERT, directory / SERVER_KEY)
    with _locked(directory):
        ca = _load(files.ca_cert, files.ca_key)
        if ca is None or not _is_ca(ca[0]) or not _time_ok(ca[0], now):
            ca = _new_ca(now)
            _write_private(files.ca_key, _pem_key(ca[1]))
            _write_private(files.ca_cert, _pem_cert(ca[0]), 0o644)
        server = _load(files.server_cert, files.server_key)
        if server is None or not _server_ok(server[0], ca[0], hosts, now):
            cert, key = _new_server(ca[0], ca[1], hosts, now)
            _write_private(files.server_key, _pem_key(key))
            _write_private(files.server_cert, _pem_cert(cert), 0o644)
    return files


def ssl_context(files: TLSFiles) -> ssl.SSLContext:
    """The server side, for ``aiohttp.web.TCPSite(..., ssl_context=...)``: TLS 1.2 or later."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(files.server_cert), str(files.server_key))
    return ctx


def client_ssl_context(ca_cert: Path) -> ssl.SSLContext:
    """A client context trusting only our CA (for Phalanx's own HTTP client)."""
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca_cert))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    return ctx


# --------------------------------------------------------------------------
# kubeconfig
# --------------------------------------------------------------------------

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _named(entries: Any, name: str, entry: dict[str, Any]) -> list[Any]:
    """A kubeconfig list with ``entry`` replacing any item of the same name (appended otherwise)."""
    items = [e for e in (entries if isinstance(entries, list) else []) if not (isinstance(e, dict)
                                                                             and e.get("name") == name)]
    return items + [entry]


def write_kubeconfig(path: Path, server_url: str, ca_cert_path: Path, token: str, context_name: str = "phalanx",
                     namespace: str = "default") -> None:
    """Write (mode 0600) a kubeconfig with a cluster, user and context named
    ``context_name``, the CA inlined, and make it the current context. Entries
    of other names in an existing file are kept; a file that is not a
    kubeconfig is refused rather than overwritten."""
    if not re.fullmatch(r"https?://[^\s/]+(/[^\s]*)?", server_url):
        raise ValueError(f"server_url: must be an http(s) URL, got {server_url!r}")
    if not token or _CONTROL.search(token) or " " in token:
        raise ValueError("token: must be non-empty and contain no spaces or control characters")
    if not context_name or _CONTROL.search(context_name):
        raise ValueError(f"context_name: must be non-empty without control characters, got {context_name!r}")
    if not is_dns_label(namespace):
        raise ValueError(f"namespace: must be a DNS label, got {namespace!r}")
    ca_data = base64.b64encode(Path(ca_cert_path).read_bytes()).decode("ascii")
    path = Path(path)
    config: dict[str, Any] = {}
    if path.exists():
        try:
            loaded = yaml.safe_load(path.read_text()) if path.stat().st_size else {}
        except yaml.YAMLError as e:
            raise ValueError(f"{path}: not a kubeconfig (invalid YAML: {e}); refusing to overwrite it") from None
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict) or loaded.get("kind", "Config") != "Config":
            raise ValueError(f"{path}: not a kubeconfig (kind Config); refusing to overwrite it")
        config = loaded
    config["apiVersion"] = "v1"
    config["kind"] = "Config"
    config["clusters"] = _named(config.get("clusters"), context_name, {
        "name": context_name, "cluster": {"server": server_url, "certificate-authority-data": ca_data}})
    config["users"] = _named(config.get("users"), context_name, {"name": context_name, "user": {"token": token}})
    config["contexts"] = _named(config.get("contexts"), context_name, {
        "name": context_name, "context": {"cluster": context_name, "user": context_name, "namespace": namespace}})
    config["current-context"] = context_name
    config.setdefault("preferences", {})
    path.parent.mkdir(parents=True, exist_ok=True)
    _write_private(path, yaml.safe_dump(config, sort_keys=False, default_flow_style=False).encode())
