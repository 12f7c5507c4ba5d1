"""Kubernetes resource quantities, just enough to sum a PodGroup's minResources.

Sums keep the format of the first addend and print canonically the way
apimachinery does: ``4 x 1`` cpu is ``"4"``, ``4 x 100Mi`` is ``"400Mi"``,
``2 x 500m`` is ``"1"``.
"""
from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache

BINARY = "BinarySI"
DECIMAL = "DecimalSI"
EXPONENT = "DecimalExponent"

_BIN = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DEC = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DEC_BY_EXP = {v: k for k, v in _DEC.items()}
_RE = re.compile(r"^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E))?$")


class QuantityError(ValueError):
    pass


def parse(value: object) -> tuple[Fraction, str]:
    """(exact value, format) of a quantity string or number."""
    if isinstance(value, bool):
        raise QuantityError(f"quantities must match the regular expression: {value!r}")
    if isinstance(value, int):
        return Fraction(value), DECIMAL
    if isinstance(value, float):
        return Fraction(str(value)), DECIMAL
    if not isinstance(value, str):
        raise QuantityError(f"quantities must match the regular expression: {value!r}")
    return _parse_str(value)


@lru_cache(maxsize=4096)
def _parse_str(value: str) -> tuple[Fraction, str]:
    """``parse`` of a string; cached: every round of every job sums the same few
    quantities (the result is immutable)."""
    m = _RE.match(value.strip())
    if not m:
        raise QuantityError(f"quantities must match the regular expression: {value!r}")
    number, exp, suffix = m.groups()
    num = Fraction(number)
    if exp:
        return num * Fraction(10) ** int(exp[1:]), EXPONENT
    if suffix in _BIN:
        return num * 1024 ** _BIN[suffix], BINARY
    return num * Fraction(10) ** _DEC[suffix or ""], DECIMAL


def _decimal(v: Fraction, exponent_style: bool) -> str:
    sign = "-" if v < 0 else ""
    v = abs(v)
    for e in range(18, -10, -3):
        q = v / Fraction(10) ** e
        if q.denominator == 1:
            if exponent_style:
                return f"{sign}{q.numerator}" + (f"e{e}" if e else "")
            return f"{sign}{q.numerator}{_DEC_BY_EXP[e]}"
    # Finer than a nano: round up to nanos as apimachinery does.
    n = -(-v.numerator * 10**9 // v.denominator)
    return f"{sign}{n}" + ("e-9" if exponent_style else "n")


@lru_cache(maxsize=4096, typed=True)
def format_quantity(v: Fraction, fmt: str = DECIMAL) -> str:
    """Canonical text of ``v`` in ``fmt``; cached like ``parse``."""
    if v == 0:
        return "0"
    if fmt == BINARY and v.denominator == 1 and abs(v) >= 1024:
        for suffix, power in sorted(_BIN.items(), key=lambda kv: -kv[1]):
            q = v / 1024 ** power
            if q.denominator == 1:
                return f"{q.numerator}{suffix}"
    if fmt == BINARY and v.denominator == 1:
        return str(v.numerator)
    return _decimal(v, fmt == EXPONENT)


def add_resources(total: dict[str, tuple[Fraction, str]], resources: dict) -> None:
    """Add a ResourceList into ``total`` (name -> (value, format)); bad values are skipped."""
    for res, q in resources.items():
        try:
            v, fmt = parse(q)
        except QuantityError:
            continue
        if res in total:
            old, old_fmt = total[res]
            total[res] = (old + v, old_fmt)
        else:
            total[res] = (v, fmt)


def format_resources(total: dict[str, tuple[Fraction, str]]) -> dict[str, str]:
    return {k: format_quantity(v, f) for k, (v, f) in sorted(total.items())}


def same_resources(a: object, b: object) -> bool:
    """Equal as quantities ("1000m" == "1"), not as strings."""
    if not isinstance(a, dict) or not isinstance(b, dict):
        return a == b
    if set(a) != set(b):
        return False
    for k in a:
        try:
            if parse(a[k])[0] != parse(b[k])[0]:
                return False
        except QuantityError:
            if a[k] != b[k]:
                return False
    return True
