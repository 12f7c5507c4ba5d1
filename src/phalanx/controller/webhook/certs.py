"""The webhook server's certificates: a self-signed CA and a serving certificate it signs,
their validity checks, and the rotation decision (pure, ``now`` given).

The rules are the original's cert controller's (open-policy-agent/cert-controller
``rotator``): RSA 2048 keys, PEM (PKCS#1 keys); the CA valid 10 years, the serving
certificate 1 year, both from an hour before ``now``; a certificate counts as valid
only if it still is at ``now + lookahead`` (90 days), chains to the CA, names the
service's DNS name and matches its key. An invalid CA renews both; an invalid
serving certificate only itself.
"""
from __future__ import annotations

import enum
import ipaddress
from dataclasses import dataclass
from datetime import datetime, timedelta

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_CERT, CA_KEY, TLS_CERT, TLS_KEY = "ca.crt", "ca.key", "tls.crt", "tls.key"
CA_VALIDITY = timedelta(days=10 * 365)
SERVER_VALIDITY = timedelta(days=365)
LOOKAHEAD = timedelta(days=90)
BACKDATE = timedelta(hours=1)
CA_NAME = "training-operator-ca"
CA_ORGANIZATION = "training-operator"
KEY_BITS = 2048


@dataclass(frozen=True)
class KeyPair:
    cert_pem: bytes
    key_pem: bytes


class Renew(enum.Enum):
    NOTHING = "nothing"
    SERVER = "server"  # a new serving certificate from the stored CA
    ALL = "all"  # a new CA and a new serving certificate


def service_dns_names(service: str, namespace: str) -> list[str]:
    """The names the apiserver uses for a webhook Service, the first one (``<svc>.<ns>.svc``)
    the certificate's common name, plus ``localhost`` for an operator run by hand."""
    return [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local", f"{service}.{namespace}",
            service, "localhost"]


LOOPBACK_IPS = ("127.0.0.1", "::1")


def _new_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=KEY_BITS)


def _key_pem(key: rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def make_ca(now: datetime, name: str = CA_NAME, organization: str = CA_ORGANIZATION,
            validity: timedelta = CA_VALIDITY) -> KeyPair:
    key = _new_key()
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name),
                         x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization)])
    cert = (x509.CertificateBuilder()
            .subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE).not_valid_after(now + validity)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=True,
                                         content_commitment=False, data_encipherment=False, key_agreement=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
            .sign(key, hashes.SHA256()))
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def make_serving(ca: KeyPair, now: datetime, dns_names: list[str], ip_addresses: tuple[str, ...] = LOOPBACK_IPS,
                 validity: timedelta = SERVER_VALIDITY) -> KeyPair:
    """A serving certificate for ``dns_names`` (the first is the common name) signed by ``ca``."""
    ca_cert = x509.load_pem_x509_certificate(ca.cert_pem)
    ca_key = serialization.load_pem_private_key(ca.key_pem, password=None)
    if not isinstance(ca_key, rsa.RSAPrivateKey):
        raise ValueError("the CA key is not an RSA key")
    key = _new_key()
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns_names]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ip_addresses]
    not_after = min(now + validity, ca_cert.not_valid_after_utc)
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns_names[0])]))
            .issuer_name(ca_cert.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - BACKDATE).not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(digital_signature=True, key_encipherment=True, key_cert_sign=False,
                                         content_commitment=False, data_encipherment=False, key_agreement=False,
                                         crl_sign=False, encipher_only=False, decipher_only=False), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(x509.SubjectAlternativeName(sans), critical=False)
            .sign(ca_key, hashes.SHA256()))
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def cert_problem(ca_pem: bytes | None, cert_pem: bytes | None, key_pem: bytes | None, dns_name: str,
                 at: datetime, *, server_auth: bool) -> str | None:
    """Why ``cert_pem`` (with ``key_pem``) is not a good certificate for ``dns_name`` at
    time ``at``, issued by ``ca_pem``; None when it is. For the CA itself pass its own
    certificate as both and ``server_auth=False``."""
    if not ca_pem or not cert_pem or not key_pem:
        return "empty certificate or key"
    try:
        ca = x509.load_pem_x509_certificate(ca_pem)
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as e:
        return f"cannot parse: {e}"
    if not server_auth and not isinstance(key, rsa.RSAPrivateKey):
        return "the CA key is not an RSA key (it signs with PKCS#1)"
    pub = cert.public_key()
    if pub.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo) != \
            key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo):
        return "the key does not match the certificate"
    try:
        ca_basic = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
    except x509.ExtensionNotFound:
        return "the CA certificate has no basic constraints"
    if not ca_basic.ca:
        return "the CA certificate is not a CA"
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature) as e:
        return f"not issued by the CA: {e or type(e).__name__}"
    for c, what in ((ca, "the CA"), (cert, "the certificate")):
        if not c.not_valid_before_utc <= at <= c.not_valid_after_utc:
            return f"{what} is not valid at {at.isoformat()} (valid {c.not_valid_before_utc.isoformat()} to " \
                   f"{c.not_valid_after_utc.isoformat()})"
    try:
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return "no subject alternative names"
    if dns_name not in names.get_values_for_type(x509.DNSName):
        return f"does not name {dns_name}"
    if server_auth:
        try:  # no extended key usage at all allows any (Go's x509 rule, which the original uses)
            eku = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        except x509.ExtensionNotFound:
            eku = None
        if eku is not None and ExtendedKeyUsageOID.SERVER_AUTH not in eku \
                and ExtendedKeyUsageOID.ANY_EXTENDED_KEY_USAGE not in eku:
            return "not for server authentication"
    return None


def renewal(data: dict[str, bytes] | None, dns_name: str, now: datetime, lookahead: timedelta = LOOKAHEAD,
            ca_name: str = CA_NAME) -> tuple[Renew, str]:
    """What the Secret's ``data`` (decoded) needs, and why."""
    data = data or {}
    at = now + lookahead
    why = cert_problem(data.get(CA_CERT), data.get(CA_CERT), data.get(CA_KEY), ca_name, at, server_auth=False)
    if why is not None:
        return Renew.ALL, f"CA: {why}"
    why = cert_problem(data.get(CA_CERT), data.get(TLS_CERT), data.get(TLS_KEY), dns_name, at, server_auth=True)
    if why is not None:
        return Renew.SERVER, f"serving certificate: {why}"
    return Renew.NOTHING, "valid"


def renewed(data: dict[str, bytes] | None, renew: Renew, dns_names: list[str], now: datetime) -> dict[str, bytes]:
    """The Secret's new ``data`` after ``renew``."""
    data = dict(data or {})
    if renew is Renew.NOTHING:
        return data
    if renew is Renew.ALL:
        ca = make_ca(now)
    else:
        ca = KeyPair(data[CA_CERT], data[CA_KEY])
    serving = make_serving(ca, now, dns_names)
    data.update({CA_CERT: ca.cert_pem, CA_KEY: ca.key_pem, TLS_CERT: serving.cert_pem, TLS_KEY: serving.key_pem})
    return data
