"""ServiceAccount tokens: the RS256 JWTs the TokenRequest subresource issues, their signing key and their checks.

Claims as the kube-apiserver's (pkg/serviceaccount/claims.go): ``iss``, ``sub``
``system:serviceaccount:<ns>:<name>``, ``aud``, ``exp``, ``iat``, ``nbf``, ``jti`` and
``kubernetes.io`` {namespace, serviceaccount {name, uid}}; the header's ``kid`` is the
SHA-256 of the public key. ``issue`` and ``check_claims`` are pure (``now`` is given);
``ensure_signing_key`` creates the key once (mode 0600) and reuses it after.
"""
from __future__ import annotations

import base64
import hashlib
import os
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Iterable

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from phalanx.server.rbac import service_account_username

ISSUER = "https://kubernetes.default.svc.cluster.local"  # the usual --service-account-issuer
API_AUDIENCES: tuple[str, ...] = (ISSUER,)  # the kube-apiserver's default --api-audiences: the issuer
DEFAULT_EXPIRATION_SECONDS = 3600
MIN_EXPIRATION_SECONDS = 600
MAX_EXPIRATION_SECONDS = 1 << 32
LEEWAY_SECONDS = 60  # go-jose's DefaultLeeway, allowed on exp and nbf


class InvalidToken(Exception):
    """A bearer token that is not a valid ServiceAccount token; the message says why (TokenReview's error)."""


def ensure_signing_key(path: Path) -> rsa.RSAPrivateKey:
    """The RSA key at ``path``, made (2048 bits, PEM, mode 0600) when there is none."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        os.replace(tmp, path)
        return key
    loaded = serialization.load_pem_private_key(data, password=None)
    if not isinstance(loaded, rsa.RSAPrivateKey):
        raise ValueError(f"{path}: not an RSA private key: the ServiceAccount token key must be RSA")
    return loaded


def key_id(key: rsa.RSAPrivateKey) -> str:
    der = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.urlsafe_b64encode(hashlib.sha256(der).digest()).rstrip(b"=").decode()


@dataclass(frozen=True)
class Claims:
    """What a ServiceAccount token asserts."""

    namespace: str
    name: str
    uid: str
    audiences: tuple[str, ...]
    issued_at: int
    not_before: int
    expires: int
    jti: str = ""

    @property
    def username(self) -> str:
        return service_account_username(self.namespace, self.name)


def claims_payload(c: Claims, issuer: str = ISSUER) -> dict[str, Any]:
    return {"aud": list(c.audiences), "exp": c.expires, "iat": c.issued_at, "iss": issuer, "jti": c.jti,
            "kubernetes.io": {"namespace": c.namespace, "serviceaccount": {"name": c.name, "uid": c.uid}},
            "nbf": c.not_before, "sub": c.username}


class TokenSigner:
    """Issues and verifies tokens with one key."""

    def __init__(self, key: rsa.RSAPrivateKey, issuer: str = ISSUER,
                 api_audiences: Iterable[str] = API_AUDIENCES) -> None:
        self._key = key
        self._public = key.public_key()
        self.kid = key_id(key)
        self.issuer = issuer
        self.api_audiences = tuple(api_audiences)

    def issue(self, namespace: str, name: str, uid: str, audiences: Iterable[str], expiration_seconds: int,
              now: datetime) -> tuple[str, Claims]:
        """The signed token and its claims, valid from ``now`` for ``expiration_seconds``."""
        t = int(now.timestamp())
        claims = Claims(namespace, name, uid, tuple(audiences), t, t, t + expiration_seconds, str(uuid.uuid4()))
        token = jwt.encode(claims_payload(claims, self.issuer), self._key, algorithm="RS256",
                           headers={"kid": self.kid})
        return token, claims

    def verify_signature(self, token: str) -> Claims | None:
        """The token's claims if this signer issued it (signature, issuer, shape), else None
        (not one of ours: other authenticators may know it). Times and audiences are not checked."""
        if token.count(".") != 2:
            return None
        try:
            payload = jwt.decode(token, self._public, algorithms=["RS256"],
                                 options={"verify_exp": False, "verify_nbf": False, "verify_iat": False,
                                          "verify_aud": False, "verify_iss": False})
        except jwt.PyJWTError:
            return None
        if payload.get("iss") != self.issuer:
            return None
        return _claims_of(payload)

    def check(self, claims: Claims, now: datetime, audiences: Iterable[str] | None = None) -> tuple[str, ...]:
        """The audiences the token is good for (of ``audiences``, the API's by default) at ``now``;
        raises InvalidToken saying why it is not."""
        return check_claims(claims, now, self.api_audiences if audiences is None else tuple(audiences))


def _claims_of(payload: dict[str, Any]) -> Claims | None:
    k8s = payload.get("kubernetes.io")
    sa = k8s.get("serviceaccount") if isinstance(k8s, dict) else None
    aud = payload.get("aud")
    audiences = (aud,) if isinstance(aud, str) else tuple(a for a in aud if isinstance(a, str)) \
        if isinstance(aud, list) else ()
    iat, nbf, exp = (payload.get(k) for k in ("iat", "nbf", "exp"))
    if not (isinstance(k8s, dict) and isinstance(sa, dict)):
        return None
    if not (isinstance(iat, int) and isinstance(nbf, int) and isinstance(exp, int)):
        return None
    ns, name, uid = k8s.get("namespace"), sa.get("name"), sa.get("uid")
    if not (isinstance(ns, str) and isinstance(name, str) and isinstance(uid, str) and ns and name):
        return None
    if payload.get("sub") != service_account_username(ns, name):
        return None
    jti = payload.get("jti")
    return Claims(ns, name, uid, audiences, iat, nbf, exp, jti if isinstance(jti, str) else "")


def check_claims(claims: Claims, now: datetime, audiences: tuple[str, ...]) -> tuple[str, ...]:
    """As the kube-apiserver's validator: expiry and not-before with a minute's leeway, then audiences."""
    t = now.timestamp()
    if t > claims.expires + LEEWAY_SECONDS:
        raise InvalidToken("service account token has expired")
    if t < claims.not_before - LEEWAY_SECONDS:
        raise InvalidToken("service account token is not valid yet")
    matched = tuple(a for a in audiences if a in claims.audiences)
    if not matched:
        shown = " ".join(f'"{a}"' for a in claims.audiences)  # Go's %q of a []string
        wanted = " ".join(f'"{a}"' for a in audiences)
        raise InvalidToken(f"token audiences [{shown}] is invalid for the target audiences [{wanted}]")
    return matched


def validate_expiration(seconds: Any) -> str | None:
    """TokenRequest's spec.expirationSeconds rule, or None when it is acceptable."""
    if not isinstance(seconds, int) or isinstance(seconds, bool):
        return "must be an integer"
    if seconds < MIN_EXPIRATION_SECONDS:
        return "may not specify a duration less than 10 minutes"
    if seconds > MAX_EXPIRATION_SECONDS:
        return "may not specify a duration larger than 2^32 seconds"
    return None
