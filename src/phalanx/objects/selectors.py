"""Kubernetes label and field selectors: parse once, match many times.

Label selectors follow apimachinery's ``labels.Parse`` grammar
(``a=b,c!=d,e in (x,y),f notin (z),!g,h,i>3``) plus the dict form
(``{"a": "b"}``, equality only) and the ``LabelSelector`` object form
(``matchLabels``/``matchExpressions``). Field selectors support ``=``, ``==``
and ``!=`` on the fields the apiserver indexes for each kind. A selector that
cannot be parsed raises ``BadRequest`` naming the selector and the rule.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Mapping

from phalanx.objects.errors import BadRequest
from phalanx.objects.names import is_dns_subdomain, matches_qualified_name

__all__ = [
    "Requirement",
    "LabelSelector",
    "parse_label_selector",
    "label_selector_from_object",
    "FieldRequirement",
    "FieldSelector",
    "parse_field_selector",
    "field_tuple",
    "field_values",
    "match_field_selector",
    "supported_fields",
    "EVERYTHING",
]



def _key_problem(key: str) -> str | None:
    """Why ``key`` is not a valid label key (a qualified name), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash:
        if not prefix:
            return f'key "{key}": prefix part must be non-empty'
        if not is_dns_subdomain(prefix):
            return f'key "{key}": prefix part must be a lowercase RFC 1123 subdomain'
    if not name:
        return f'key "{key}": name part must be non-empty'
    if len(name) > 63:
        return f'key "{key}": name part must be no more than 63 characters'
    if not matches_qualified_name(name):
        return (f'key "{key}": name part must consist of alphanumeric characters, \'-\', \'_\' or \'.\', '
                "and must start and end with an alphanumeric character")
    return None


def _value_problem(value: str) -> str | None:
    if value == "":
        return None
    if len(value) > 63:
        return f'value "{value}": must be no more than 63 characters'
    if not matches_qualified_name(value):
        return (f'value "{value}": a valid label must be an empty string or consist of alphanumeric '
                "characters, '-', '_' or '.', and must start and end with an alphanumeric character")
    return None


# ---------------------------------------------------------------- label selectors


@dataclass(frozen=True)
class Requirement:
    """One clause of a label selector.

    op is one of ``=``, ``!=``, ``in``, ``notin``, ``exists``, ``!``, ``gt``, ``lt``.
    ``!=`` and ``notin`` match objects that lack the key, as in Kubernetes.
    """

    key: str
    op: str
    values: tuple[str, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        op = self.op
        if op == "exists":
            return self.key in labels
        if op == "!":
            return self.key not in labels
        if op in ("=", "in"):
            return self.key in labels and labels[self.key] in self.values
        if op in ("!=", "notin"):
            return self.key not in labels or labels[self.key] not in self.values
        # gt / lt: the label must exist and parse as an integer.
        v = labels.get(self.key)
        if v is None:
            return False
        try:
            n = int(v)
        except ValueError:
            return False
        bound = int(self.values[0])
        return n > bound if op == "gt" else n < bound

    def __str__(self) -> str:
        if self.op == "exists":
            return self.key
        if self.op == "!":
            return "!" + self.key
        if self.op in ("=", "!="):
            return f"{self.key}{self.op}{self.values[0]}"
        if self.op == "gt":
            return f"{self.key}>{self.values[0]}"
        if self.op == "lt":
            return f"{self.key}<{self.values[0]}"
        return f"{self.key} {self.op} ({','.join(self.values)})"


@dataclass(frozen=True)
class LabelSelector:
    """A conjunction of requirements; the empty selector matches everything."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str] | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    def empty(self) -> bool:
        return not self.requirements

    def __str__(self) -> str:
        return ",".join(str(r) for r in self.requirements)


EVERYTHING = LabelSelector()

_SPECIAL = set("!=,()<> \t\n\r")


def _tokenize(s: str) -> list[str]:
    """Split a label selector into identifiers and operator tokens."""
    tokens: list[str] = []
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if c in " \t\n\r":
            i += 1
            continue
        if c in "!=" and i + 1 < n and s[i + 1] == "=":
            tokens.append(c + "=")
            i += 2
            continue
        if c in "!=,()<>":
            tokens.append(c)
            i += 1
            continue
        j = i
        while j < n and s[j] not in _SPECIAL:
            j += 1
        tokens.append(s[i:j])
        i = j
    return tokens


def _is_ident(tok: str | None) -> bool:
    return tok is not None and tok not in ("!", "=", "==", "!=", ",", "(", ")", "<", ">")


def _parse_label_string(s: str) -> LabelSelector:
    def fail(detail: str) -> BadRequest:
        return BadRequest(f'unable to parse label selector "{s}": {detail}')

    toks = _tokenize(s)
    reqs: list[Requirement] = []
    i = 0

    def peek(k: int = 0) -> str | None:
        return toks[i + k] if i + k < len(toks) else None

    while i < len(toks):
        neg = False
        if peek() == "!":
            neg = True
            i += 1
        key = peek()
        if not _is_ident(key):
            raise fail(f"expected a key at position {i}, found {key!r}" if key else "expected a key")
        assert key is not None
        if (p := _key_problem(key)) is not None:
            raise fail(p)
        i += 1
        nxt = peek()
        if neg:
            if nxt not in (None, ","):
                raise fail(f'"!{key}" cannot be followed by {nxt!r}')
            reqs.append(Requirement(key, "!"))
        elif nxt in (None, ","):
            reqs.append(Requirement(key, "exists"))
        elif nxt in ("=", "==", "!="):
            i += 1
            val = peek()
            if _is_ident(val):
                assert val is not None
                i += 1
            else:
                val = ""  # `a=` selects the empty value, as labels.Parse allows
            if (p := _value_problem(val)) is not None:
                raise fail(p)
            reqs.append(Requirement(key, "!=" if nxt == "!=" else "=", (val,)))
        elif nxt in ("<", ">"):
            i += 1
            val = peek()
            if not _is_ident(val):
                raise fail(f'operator "{nxt}" on "{key}" needs an integer value')
            assert val is not None
            try:
                int(val)
            except ValueError:
                raise fail(f'operator "{nxt}" on "{key}" needs an integer value, got "{val}"') from None
            i += 1
            reqs.append(Requirement(key, "gt" if nxt == ">" else "lt", (val,)))
        elif nxt in ("in", "notin"):
            i += 1
            if peek() != "(":
                raise fail(f'"{nxt}" on "{key}" must be followed by a parenthesised value set')
            i += 1
            values: list[str] = []
            expect_value = True
            while True:
                t = peek()
                if t is None:
                    raise fail(f'value set of "{key}" is not closed with ")"')
                if t == ")":
                    if expect_value and values:
                        values.append("")
                    i += 1
                    break
                if t == ",":
                    if expect_value:
                        values.append("")
                    expect_value = True
                    i += 1
                    continue
                if not _is_ident(t) or not expect_value:
                    raise fail(f'unexpected {t!r} in the value set of "{key}"')
                if (p := _value_problem(t)) is not None:
                    raise fail(p)
                values.append(t)
                expect_value = False
                i += 1
            if not values:
                raise fail(f"for 'in', 'notin' operators, values set can't be empty (key \"{key}\")")
            reqs.append(Requirement(key, nxt, tuple(values)))
        else:
            raise fail(f'unexpected {nxt!r} after key "{key}"')
        t = peek()
        if t is None:
            break
        if t != ",":
            raise fail(f"expected ',' between requirements, found {t!r}")
        i += 1
        if peek() is None:
            raise fail("trailing ','")
    return LabelSelector(tuple(reqs))


def _parse_label_dict(d: Mapping[Any, Any]) -> LabelSelector:
    reqs = []
    for k, v in d.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise BadRequest(f"label selector {dict(d)!r}: keys and values must be strings")
        if (p := _key_problem(k)) is not None or (p := _value_problem(v)) is not None:
            raise BadRequest(f"unable to parse label selector {dict(d)!r}: {p}")
        reqs.append(Requirement(k, "=", (v,)))
    return LabelSelector(tuple(reqs))


def parse_label_selector(sel: str | Mapping[str, str] | LabelSelector | None) -> LabelSelector:
    """Parse a selector string, an equality dict, or pass a parsed one through."""
    if sel is None:
        return EVERYTHING
    if isinstance(sel, LabelSelector):
        return sel
    if isinstance(sel, Mapping):
        return _parse_label_dict(sel)
    if isinstance(sel, str):
        return _parse_label_string(sel) if sel.strip() else EVERYTHING
    raise BadRequest(f"label selector {sel!r}: must be a string or a map of strings")


def label_selector_from_object(sel: Mapping[str, Any] | None) -> LabelSelector:
    """A metav1.LabelSelector (``matchLabels`` + ``matchExpressions``)."""
    if not sel:
        return EVERYTHING
    if not isinstance(sel, Mapping):
        raise BadRequest(f"label selector {sel!r}: must be an object")
    reqs = list(_parse_label_dict(sel.get("matchLabels") or {}).requirements)
    ops = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}
    for i, expr in enumerate(sel.get("matchExpressions") or []):
        where = f"matchExpressions[{i}]"
        if not isinstance(expr, Mapping):
            raise BadRequest(f"label selector {where}: must be an object")
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if not isinstance(key, str) or _key_problem(key) is not None:
            raise BadRequest(f"label selector {where}.key: invalid key {key!r}")
        if op not in ops:
            raise BadRequest(f'label selector {where}.operator: Unsupported value: {op!r}: supported values: '
                             '"In", "NotIn", "Exists", "DoesNotExist"')
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise BadRequest(f"label selector {where}.values: must be a list of strings")
        if op in ("In", "NotIn") and not values:
            raise BadRequest(f"label selector {where}.values: must be specified when `operator` is 'In' or 'NotIn'")
        if op in ("Exists", "DoesNotExist") and values:
            raise BadRequest(f"label selector {where}.values: may not be specified when `operator` is "
                             "'Exists' or 'DoesNotExist'")
        reqs.append(Requirement(key, ops[op], tuple(values)))
    return LabelSelector(tuple(reqs))


# ---------------------------------------------------------------- field selectors

_COMMON_FIELDS = ("metadata.name", "metadata.namespace")

# The fields the apiserver supports per kind (pkg/registry/*/strategy.go
# ToSelectableFields); custom resources only get metadata.name/namespace.
_KIND_FIELDS: dict[str, tuple[str, ...]] = {
    "Pod": ("spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
            "spec.hostNetwork", "status.phase", "status.podIP", "status.nominatedNodeName"),
    "Event": ("involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
              "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
              "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type"),
    "Node": ("spec.unschedulable",),
    "Namespace": ("status.phase",),
}

# Fields whose stored value lives somewhere else than the dotted path says.
_FIELD_PATHS: dict[str, tuple[str, ...]] = {"source": ("source", "component")}


def supported_fields(kind: str) -> tuple[str, ...]:
    return _COMMON_FIELDS + _KIND_FIELDS.get(kind, ())


def _field_string(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (dict, list)):
        return ""
    return str(v)


# Boolean fields the apiserver reports as "false" when unset.
_FALSE_WHEN_ABSENT = frozenset({"spec.unschedulable", "spec.hostNetwork"})


@functools.lru_cache(maxsize=None)
def _field_specs(kind: str) -> tuple[tuple[tuple[str, ...], str], ...]:
    """Per supported field of ``kind``: the path to its value and what it reads when absent."""
    return tuple((_FIELD_PATHS.get(f, tuple(f.split("."))), "false" if f in _FALSE_WHEN_ABSENT else "")
                 for f in supported_fields(kind))


def _child(cur: Any, part: str) -> Any:
    return cur.get(part) if isinstance(cur, Mapping) else None


def field_tuple(kind: str, obj: Mapping[str, Any]) -> tuple[str, ...]:
    """The selectable field values of ``obj`` in ``supported_fields(kind)`` order
    (missing fields are "", or "false" for the booleans that default to it).
    Computed on every store write: kept cheap."""
    out: list[str] = []
    for path, absent in _field_specs(kind):
        cur: Any = obj
        for part in path:
            cur = cur.get(part) if cur.__class__ is dict else _child(cur, part)
            if cur is None:
                break
        if cur is None:
            out.append(absent)
        else:
            out.append(cur if cur.__class__ is str else _field_string(cur))
    return tuple(out)


def field_values(kind: str, obj: Mapping[str, Any]) -> dict[str, str]:
    """The selectable field values of ``obj`` by field name (see ``field_tuple``)."""
    return dict(zip(supported_fields(kind), field_tuple(kind, obj)))


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    op: str  # "=" or "!="
    value: str

    def matches(self, fields: Mapping[str, str]) -> bool:
        v = fields.get(self.field, "")
        return v == self.value if self.op == "=" else v != self.value


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, fields: Mapping[str, str]) -> bool:
        return all(r.matches(fields) for r in self.requirements)

    def empty(self) -> bool:
        return not self.requirements


def _split_unescaped(s: str, sep: str) -> list[str]:
    parts, cur, i = [], [], 0
    while i < len(s):
        c = s[i]
        if c == "\\" and i + 1 < len(s):
            cur.append(s[i:i + 2])
            i += 2
            continue
        if c == sep:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
        i += 1
    parts.append("".join(cur))
    return parts


def _unescape(value: str, selector: str) -> str:
    out, i = [], 0
    while i < len(value):
        c = value[i]
        if c == "\\":
            if i + 1 >= len(value) or value[i + 1] not in "\\,=":
                raise BadRequest(f'unable to parse field selector "{selector}": invalid escape sequence in "{value}"')
            out.append(value[i + 1])
            i += 2
            continue
        if c in ",=":
            raise BadRequest(f'unable to parse field selector "{selector}": unescaped "{c}" in "{value}"')
        out.append(c)
        i += 1
    return "".join(out)


def _split_term(term: str) -> tuple[str, str, str] | None:
    i = 0
    while i < len(term):
        c = term[i]
        if c == "\\":
            i += 2
            continue
        for op in ("!=", "==", "="):
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
        i += 1
    return None


def parse_field_selector(sel: str | FieldSelector | None, kind: str | None = None) -> FieldSelector:
    """Parse ``a=b,c!=d``; with ``kind``, refuse fields that kind does not index."""
    if sel is None:
        return FieldSelector()
    if isinstance(sel, FieldSelector):
        return sel
    if not isinstance(sel, str):
        raise BadRequest(f"field selector {sel!r}: must be a string")
    if not sel.strip():
        return FieldSelector()
    allowed = supported_fields(kind) if kind else None
    reqs = []
    for term in _split_unescaped(sel, ","):
        term = term.strip()
        split = _split_term(term)
        if split is None:
            raise BadRequest(f"invalid field selector \"{sel}\": can't understand '{term}'")
        field, op, value = split
        field = field.strip()
        if not field:
            raise BadRequest(f"invalid field selector \"{sel}\": missing field name in '{term}'")
        if allowed is not None and field not in allowed:
            raise BadRequest(f'field selector "{sel}": field label not supported: {field} '
                             f'(supported for {kind}: {", ".join(allowed)})')
        reqs.append(FieldRequirement(field, "!=" if op == "!=" else "=", _unescape(value, sel)))
    return FieldSelector(tuple(reqs))


def match_field_selector(sel: FieldSelector, kind: str, obj: Mapping[str, Any]) -> bool:
    """Convenience for callers holding objects rather than indexed field values."""
    return sel.empty() or sel.matches(field_values(kind, obj))
