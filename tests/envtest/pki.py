"""Key material for the envtest control plane: a CA, the API server's serving certificate and the
ServiceAccount signing key pair, made fresh for each run with `cryptography`."""
from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

# What clients inside and outside the (pretend) cluster call the API server.
SERVING_DNS = ("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
               "kubernetes.default.svc.cluster.local")
SERVING_IPS = ("127.0.0.1", "10.0.0.1")  # loopback; the first address of --service-cluster-ip-range


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def _cert(subject: str, key, issuer: x509.Name | None, issuer_key, *, ca: bool,
          san: x509.SubjectAlternativeName | None = None) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    b = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer or name)
         .public_key(key.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                          content_commitment=False, key_encipherment=False, data_encipherment=False,
                                          key_agreement=False, encipher_only=False, decipher_only=False),
                            critical=True)
    else:
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    if san is not None:
        b = b.add_extension(san, critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def write_pki(folder: Path) -> dict[str, Path]:
    """Write ca.crt, serving.crt/.key and sa.key/sa.pub into ``folder``; return their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _cert("envtest-ca", ca_key, None, ca_key, ca=True)
    serving_key = ec.generate_private_key(ec.SECP256R1())
    san = x509.SubjectAlternativeName([*(x509.DNSName(d) for d in SERVING_DNS),
                                       *(x509.IPAddress(ipaddress.ip_address(i)) for i in SERVING_IPS)])
    serving = _cert("kube-apiserver", serving_key, ca.subject, ca_key, ca=False, san=san)
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    files = {
        "ca.crt": ca.public_bytes(serialization.Encoding.PEM),
        "serving.crt": serving.public_bytes(serialization.Encoding.PEM),
        "serving.key": _pem_key(serving_key),
        "sa.key": _pem_key(sa_key),
        "sa.pub": sa_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                   serialization.PublicFormat.SubjectPublicKeyInfo),
    }
    paths = {}
    for name, data in files.items():
        (folder / name).write_bytes(data)
        (folder / name).chmod(0o600)
        paths[name] = folder / name
    return paths
