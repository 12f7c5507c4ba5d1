"""Kubernetes name rules (apimachinery's validation): DNS-1123/1035 labels and subdomains,
qualified names, label values, with the apiserver's exact message texts. The one name validator.
"""
from __future__ import annotations

import re

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
DNS1035_LABEL_MAX = 63
_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"
_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL_RE = re.compile(_DNS1035_LABEL_FMT)
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    # apimachinery's RegexError, including its odd "',  or '" spacing.
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    out = msg + " (e.g. "
    for i, ex in enumerate(examples):
        if i > 0:
            out += " or "
        out += f"'{ex}', "
    return out + f"regex used for validation is '{fmt}')"


def _max_len(n: int) -> str:
    return f"must be no more than {n} characters"


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if len(value) > DNS1123_LABEL_MAX:
        errs.append(_max_len(DNS1123_LABEL_MAX))
    if not _DNS1123_LABEL_RE.fullmatch(value):
        errs.append(_regex_error("a lowercase RFC 1123 label must consist of lower case alphanumeric characters "
                                 "or '-', and must start and end with an alphanumeric character",
                                 _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    errs = []
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        errs.append(_max_len(DNS1123_SUBDOMAIN_MAX))
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(_regex_error("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                                 "characters, '-' or '.', and must start and end with an alphanumeric character",
                                 _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1035_label(value: str) -> list[str]:
    errs = []
    if len(value) > DNS1035_LABEL_MAX:
        errs.append(_max_len(DNS1035_LABEL_MAX))
    if not _DNS1035_LABEL_RE.fullmatch(value):
        errs.append(_regex_error("a DNS-1035 label must consist of lower case alphanumeric characters or '-', "
                                 "start with an alphabetic character, and end with an alphanumeric character",
                                 _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def _mask_trailing_dash(name: str) -> str:
    # A generateName prefix may end in "-": the random suffix follows it.
    return name[:-1] + "a" if len(name) > 1 and name.endswith("-") else name


def name_is_dns1123_subdomain(name: str, prefix: bool = False) -> list[str]:
    return is_dns1123_subdomain(_mask_trailing_dash(name) if prefix else name)


def name_is_dns1123_label(name: str, prefix: bool = False) -> list[str]:
    return is_dns1123_label(_mask_trailing_dash(name) if prefix else name)


def name_is_dns1035_label(name: str, prefix: bool = False) -> list[str]:
    return is_dns1035_label(_mask_trailing_dash(name) if prefix else name)


def is_qualified_name(value: str) -> list[str]:
    msg = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
    errs: list[str] = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs.extend("prefix part " + m for m in is_dns1123_subdomain(prefix))
    else:
        return ["a qualified name " + _regex_error(msg, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")
                + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part " + _max_len(63))
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append("name part " + _regex_error(msg, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_valid_label_value(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append(_max_len(63))
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(_regex_error("a valid label must be an empty string or consist of alphanumeric characters, "
                                 "'-', '_' or '.', and must start and end with an alphanumeric character",
                                 _LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def is_dns_label(value: object) -> bool:
    """Whether ``value`` is a string that is a valid RFC 1123 label (a namespace, a container name, ...)."""
    return isinstance(value, str) and not is_dns1123_label(value)


def is_dns_subdomain(value: object) -> bool:
    """Whether ``value`` is a string that is a valid RFC 1123 subdomain (most object names)."""
    return isinstance(value, str) and not is_dns1123_subdomain(value)


def matches_qualified_name(value: object) -> bool:
    """Whether ``value`` is a string of the qualified-name form (the name part of a label key,
    a non-empty label value): alphanumerics, '-', '_' or '.', alphanumeric at both ends. No length rule."""
    return isinstance(value, str) and _QUALIFIED_NAME_RE.fullmatch(value) is not None
