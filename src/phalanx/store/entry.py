"""One stored object as the store indexes it: its JSON (packed where the store
packs, see store/compact.py), its resourceVersion and what selectors match on
(labels, selectable field values), pre-extracted and interned."""
from __future__ import annotations

import sys
from typing import Any

from phalanx.objects.selectors import field_tuple, supported_fields
from phalanx.store.compact import Packed, Packer, text_of

# Shared by every entry without labels; never mutated.
NO_LABELS: dict[str, str] = {}


def _interned(v: Any) -> Any:
    return sys.intern(v) if v.__class__ is str else v


class Entry:
    """One stored object: its JSON plus what selectors need, pre-extracted.
    Label and field strings are interned (most repeat across objects) and the
    field values are a tuple in ``supported_fields(kind)`` order: thousands of
    entries, so every small dict and duplicate string counts."""

    __slots__ = ("stored", "rv", "labels", "field_values")

    def __init__(self, stored: str | Packed, rv: int, labels: dict[str, str], field_values: tuple[str, ...]) -> None:
        self.stored = stored
        self.rv = rv
        self.labels = labels
        self.field_values = field_values

    @property
    def raw(self) -> str:
        """The object's JSON."""
        return text_of(self.stored)

    def fields(self, kind: str) -> dict[str, str]:
        """The selectable field values by field name (what FieldSelector matches)."""
        return dict(zip(supported_fields(kind), self.field_values))


def make_entry(kind: str, obj: dict[str, Any], raw: str, rv: int, packer: Packer | None = None) -> Entry:
    """The entry of ``obj`` (of ``kind``), stored as ``raw`` (packed by ``packer``) at resourceVersion ``rv``."""
    labels = obj.get("metadata", {}).get("labels")
    labels = {sys.intern(k): _interned(v) for k, v in labels.items()} \
        if isinstance(labels, dict) and labels else NO_LABELS
    return Entry(raw if packer is None else packer.pack(kind, raw), rv, labels, tuple(map(sys.intern, field_tuple(kind, obj))))
