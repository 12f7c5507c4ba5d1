"""Kubernetes resource quantities ("1", "500m", "100Mi", "1e3"): one grammar, two readings.

``parse_quantity`` gives base units as a float (cpu in cores, memory in bytes), which is
all the scheduler and the node need; the original strings stay in the stored objects.
``parse_exact`` gives the exact value and its format, for sums printed back the way
apimachinery prints them (a PodGroup's minResources): ``4 x 100Mi`` is ``"400Mi"``,
``2 x 500m`` is ``"1"``.
"""
from __future__ import annotations

import math
import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from functools import lru_cache
from typing import Any, Iterable, Mapping

ResourceList = dict[str, float]

# Kubernetes' canonical grammar (apimachinery resource.Quantity / CRD pattern):
# sign, a decimal number, then a binary-SI, decimal-SI or exponent suffix.
_QUANTITY_RE = re.compile(
    r"(?P<num>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
# The message the apiserver gives for a malformed quantity.
QUANTITY_REGEX_MESSAGE = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
_MAX_QUANTITY_LEN = 100

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
            "P": Decimal("1e15"), "E": Decimal("1e18")}

# The formats apimachinery keeps with a quantity (the format of a sum is its first addend's).
BINARY = "BinarySI"
DECIMAL = "DecimalSI"
EXPONENT = "DecimalExponent"

# Resources whose natural unit is bytes: printed with binary suffixes.
_BYTE_RESOURCES = ("memory", "ephemeral-storage", "storage")


def parse_quantity(v: Any) -> float:
    """Return the quantity in base units; ValueError says what is wrong.

    Accepts what Kubernetes accepts in a ResourceList: a string in quantity
    syntax, or a JSON number (YAML ``cpu: 2`` / ``cpu: 0.5``). Booleans are not
    numbers here.
    """
    if isinstance(v, bool) or v is None:
        raise ValueError(f"quantity must be a string or a number, got {_type_name(v)}")
    if isinstance(v, int):
        try:
            return float(v)
        except OverflowError:
            raise ValueError("quantity is too large") from None
    if isinstance(v, float):
        if not math.isfinite(v):
            raise ValueError(f"quantity {v} is not a finite number")
        return v
    if not isinstance(v, str):
        raise ValueError(f"quantity must be a string or a number, got {_type_name(v)}")
    s = v  # no whitespace trimming: Kubernetes refuses " 1"
    if len(s) > _MAX_QUANTITY_LEN:
        raise ValueError(f"quantity is too long ({len(s)} characters, at most {_MAX_QUANTITY_LEN})")
    parts = split_quantity(s)
    if parts is None:
        raise ValueError(QUANTITY_REGEX_MESSAGE)
    try:
        num = Decimal(parts[0])
        suffix = parts[1]
        if suffix in _BINARY:
            value = num * _BINARY[suffix]
        elif suffix in _DECIMAL:
            value = num * _DECIMAL[suffix]
        else:  # exponent
            exp = int(suffix[1:])
            if abs(exp) > 400:
                raise ValueError(f"quantity {s!r} is out of range")
            value = num.scaleb(exp)
        out = float(value)
    except (InvalidOperation, OverflowError):
        raise ValueError(f"quantity {s!r} is out of range") from None
    if not math.isfinite(out):
        raise ValueError(f"quantity {s!r} is out of range")
    return out


def split_quantity(s: str) -> tuple[str, str] | None:
    """(number, suffix) of a string in quantity syntax ("" when there is no suffix), or None."""
    m = _QUANTITY_RE.fullmatch(s)
    if not m:
        return None
    return m.group("num"), m.group("suffix") or ""


def format_cpu(cores: float) -> str:
    """Canonical cpu string: whole cores as "2", otherwise millicores "500m"
    (rounded up to the next millicore, as Kubernetes does)."""
    if cores == int(cores) and abs(cores) < 2**53:
        return str(int(cores))
    milli = math.ceil(round(cores * 1000, 6))
    if milli % 1000 == 0:
        return str(milli // 1000)
    return f"{milli}m"


def format_memory(nbytes: float) -> str:
    """Canonical byte string: the largest binary suffix that divides exactly
    ("100Mi", "1Gi"), else a decimal suffix ("1G"), else plain bytes."""
    if nbytes != int(nbytes):
        milli = math.ceil(round(nbytes * 1000, 6))
        return f"{milli}m" if milli % 1000 else str(milli // 1000)
    n = int(nbytes)
    if n == 0:
        return "0"
    for suffix, factor in reversed(_BINARY.items()):
        if n % factor == 0:
            return f"{n // factor}{suffix}"
    for suffix in ("E", "P", "T", "G", "M", "k"):
        factor = int(_DECIMAL[suffix])
        if n % factor == 0:
            return f"{n // factor}{suffix}"
    return str(n)


def format_quantity(resource: str, value: float) -> str:
    """Format a value of the named resource the way kubectl would show it."""
    if resource == "cpu":
        return format_cpu(value)
    if resource in _BYTE_RESOURCES or resource.startswith("hugepages-"):
        return format_memory(value)
    if value == int(value):
        return str(int(value))
    return format_cpu(value)  # fractional counts print as milli-units like any quantity


def parse_resource_list(rl: Mapping[str, Any] | None) -> ResourceList:
    """{"cpu": "1", "memory": "100Mi"} -> {"cpu": 1.0, "memory": 104857600.0}."""
    out: ResourceList = {}
    for name, v in (rl or {}).items():
        try:
            out[name] = parse_quantity(v)
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from None
    return out


def format_resource_list(rl: Mapping[str, float]) -> dict[str, str]:
    return {name: format_quantity(name, v) for name, v in rl.items()}


def add_resources(a: Mapping[str, float], b: Mapping[str, float]) -> ResourceList:
    """Per-resource sum; a resource missing on one side counts as 0."""
    out = dict(a)
    for name, v in b.items():
        out[name] = out.get(name, 0.0) + v
    return out


def sum_resources(lists: Iterable[Mapping[str, float]]) -> ResourceList:
    out: ResourceList = {}
    for rl in lists:
        out = add_resources(out, rl)
    return out


def max_resources(a: Mapping[str, float], b: Mapping[str, float]) -> ResourceList:
    """Per-resource maximum."""
    out = dict(a)
    for name, v in b.items():
        out[name] = max(out.get(name, v), v)
    return out


def container_requests(container: Mapping[str, Any]) -> ResourceList:
    """A container's effective requests: each resource's request, or its
    limit when no request is given for it (Kubernetes defaults requests to
    limits)."""
    resources = container.get("resources") or {}
    limits = parse_resource_list(resources.get("limits"))
    requests = parse_resource_list(resources.get("requests"))
    return {**limits, **requests}


def pod_requests(pod_spec: Mapping[str, Any]) -> ResourceList:
    """What kube-scheduler counts for a pod: the sum over containers, or, if
    larger, what any init container needs (plus the restartable "sidecar"
    init containers started before it), plus the pod overhead.

    Raises ValueError on a malformed quantity (admitted objects have none).
    """
    containers = sum_resources(container_requests(c) for c in pod_spec.get("containers") or [])
    sidecars: ResourceList = {}
    init_peak: ResourceList = {}
    for c in pod_spec.get("initContainers") or []:
        req = container_requests(c)
        if c.get("restartPolicy") == "Always":  # sidecar: keeps running with the app containers
            sidecars = add_resources(sidecars, req)
            init_peak = max_resources(init_peak, sidecars)
        else:
            init_peak = max_resources(init_peak, add_resources(sidecars, req))
    total = max_resources(add_resources(containers, sidecars), init_peak)
    overhead = parse_resource_list(pod_spec.get("overhead"))
    return add_resources(total, overhead)


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, dict):
        return "object"
    if isinstance(v, (list, tuple)):
        return "array"
    return type(v).__name__


# ------------------------------------------------------------------ exact values


class QuantityError(ValueError):
    """A value that is not a quantity (``parse_exact``)."""


def parse_exact(value: object) -> tuple[Fraction, str]:
    """(exact value, format) of a quantity string or number; surrounding blanks are ignored."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression: {value!r}")
    if isinstance(value, int):
        return Fraction(value), DECIMAL
    if isinstance(value, float):
        return Fraction(str(value)), DECIMAL
    if not isinstance(value, str):
        raise QuantityError(f"quantities must match the regular expression: {value!r}")
    return _parse_exact_str(value)


@lru_cache(maxsize=4096)
def _parse_exact_str(value: str) -> tuple[Fraction, str]:
    """``parse_exact`` of a string; cached: every round of every job sums the same few
    quantities (the result is immutable)."""
    parts = split_quantity(value.strip())
    if parts is None:
        raise QuantityError(f"quantities must match the regular expression: {value!r}")
    number, suffix = parts
    num = Fraction(number)
    if suffix in _BINARY:
        return num * _BINARY[suffix], BINARY
    if suffix in _DECIMAL_EXPONENT:
        return num * Fraction(10) ** _DECIMAL_EXPONENT[suffix], DECIMAL
    return num * Fraction(10) ** int(suffix[1:]), EXPONENT


_DECIMAL_EXPONENT = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {v: k for k, v in _DECIMAL_EXPONENT.items()}


def _format_decimal(v: Fraction, exponent_style: bool) -> str:
    sign = "-" if v < 0 else ""
    v = abs(v)
    for e in range(18, -10, -3):
        q = v / Fraction(10) ** e
        if q.denominator == 1:
            if exponent_style:
                return f"{sign}{q.numerator}" + (f"e{e}" if e else "")
            return f"{sign}{q.numerator}{_DECIMAL_SUFFIX[e]}"
    # Finer than a nano: round up to nanos as apimachinery does.
    n = -(-v.numerator * 10**9 // v.denominator)
    return f"{sign}{n}" + ("e-9" if exponent_style else "n")


@lru_cache(maxsize=4096, typed=True)
def format_exact(v: Fraction, fmt: str = DECIMAL) -> str:
    """Canonical text of ``v`` in ``fmt``; cached like ``parse_exact``."""
    if v == 0:
        return "0"
    if fmt == BINARY and v.denominator == 1 and abs(v) >= 1024:
        for suffix, factor in reversed(_BINARY.items()):
            q = v / factor
            if q.denominator == 1:
                return f"{q.numerator}{suffix}"
    if fmt == BINARY and v.denominator == 1:
        return str(v.numerator)
    return _format_decimal(v, fmt == EXPONENT)


ExactResources = dict[str, tuple[Fraction, str]]


def add_exact(total: ExactResources, resources: Mapping[str, Any]) -> None:
    """Add a ResourceList into ``total`` (name -> (value, format)); bad values are skipped."""
    for res, q in resources.items():
        try:
            v, fmt = parse_exact(q)
        except QuantityError:
            continue
        if res in total:
            old, old_fmt = total[res]
            total[res] = (old + v, old_fmt)
        else:
            total[res] = (v, fmt)


def format_exact_resources(total: ExactResources) -> dict[str, str]:
    return {k: format_exact(v, f) for k, (v, f) in sorted(total.items())}


def same_resources(a: object, b: object) -> bool:
    """Equal as quantities ("1000m" == "1"), not as strings."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return a == b
    if set(a) != set(b):
        return False
    for k in a:
        try:
            if parse_exact(a[k])[0] != parse_exact(b[k])[0]:
                return False
        except QuantityError:
            if a[k] != b[k]:
                return False
    return True
