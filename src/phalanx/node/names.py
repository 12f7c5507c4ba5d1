"""Name checks for anything that becomes part of a path or a hosts-file line.

The DNS rules are the object layer's (``phalanx.objects.names``); these raise with the field named.
"""
from __future__ import annotations

import re

from phalanx.objects.names import is_dns_label, is_dns_subdomain

_UID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9-]{0,63}$")


def check_dns_label(name: object, field: str) -> str:
    if not isinstance(name, str) or not is_dns_label(name):
        raise ValueError(f"{field}: Invalid value: {name!r}: a lowercase RFC 1123 label must consist of "
                         "lower case alphanumeric characters or '-', start and end with an alphanumeric "
                         "character, and be at most 63 characters")
    return name


def check_dns_subdomain(name: object, field: str) -> str:
    if not isinstance(name, str) or not is_dns_subdomain(name):
        raise ValueError(f"{field}: Invalid value: {name!r}: a lowercase RFC 1123 subdomain must consist of "
                         "lower case alphanumeric characters, '-' or '.', and must start and end with an "
                         "alphanumeric character")
    return name


def check_uid(uid: object, field: str = "metadata.uid") -> str:
    if not isinstance(uid, str) or not _UID.fullmatch(uid):
        raise ValueError(f"{field}: Invalid value: {uid!r}: must be letters, digits and '-'")
    return uid
