"""Name checks for anything that becomes part of a path or a hosts-file line."""
from __future__ import annotations

import re

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_UID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")


def is_dns_label(name: object) -> bool:
    return isinstance(name, str) and len(name) <= 63 and bool(_DNS_LABEL.match(name))


def is_dns_subdomain(name: object) -> bool:
    return isinstance(name, str) and len(name) <= 253 and bool(_DNS_SUBDOMAIN.match(name))


def check_dns_label(name: object, field: str) -> str:
    if not is_dns_label(name):
        raise ValueError(f"{field}: Invalid value: {name!r}: a lowercase RFC 1123 label must consist of "
                         "lower case alphanumeric characters or '-', start and end with an alphanumeric "
                         "character, and be at most 63 characters")
    return name  # type: ignore[return-value]


def check_dns_subdomain(name: object, field: str) -> str:
    if not is_dns_subdomain(name):
        raise ValueError(f"{field}: Invalid value: {name!r}: a lowercase RFC 1123 subdomain must consist of "
                         "lower case alphanumeric characters, '-' or '.', and must start and end with an "
                         "alphanumeric character")
    return name  # type: ignore[return-value]


def check_uid(uid: object, field: str = "metadata.uid") -> str:
    if not isinstance(uid, str) or not _UID.match(uid):
        raise ValueError(f"{field}: Invalid value: {uid!r}: must be letters, digits and '-'")
    return uid
