"""Compact stored form: a store's JSON kept as zstd frames, each kind compressed
with a dictionary trained on that kind's own objects.

Objects of one kind are alike (a job's pods differ in a name, an index, an
address), so a small trained dictionary packs a 3 KB pod into ~0.3-0.5 KB for
~2 µs each way. A kind's first ``train_after`` objects are kept as they are and
sampled; then a dictionary is trained on them, and trained again on fresh
samples each time the kind's writes grow tenfold (its objects change shape as
they progress: a pending pod has no status). A packed value keeps the
decompressor of its dictionary. The simulator turns it on, where memory bounds
the scale; stores on disk keep plain JSON.
"""
from __future__ import annotations

import zstandard

PACK_LEVEL = 1  # zstd level: with a dictionary, higher levels pack little more for more CPU
DICT_SIZE = 16 << 10


class Packed:
    """One JSON text, compressed; ``text()`` gives it back."""

    __slots__ = ("data", "_dec")

    def __init__(self, data: bytes, dec: zstandard.ZstdDecompressor) -> None:
        self.data = data
        self._dec = dec

    def text(self) -> str:
        return self._dec.decompress(self.data).decode()


class _Kind:
    __slots__ = ("writes", "next_training", "samples", "comp", "dec")

    def __init__(self, train_after: int) -> None:
        self.writes = 0
        self.next_training = train_after
        self.samples: list[bytes | bytearray | memoryview] | None = []
        self.comp: zstandard.ZstdCompressor | None = None
        self.dec: zstandard.ZstdDecompressor | None = None


class Packer:
    """Packs JSON texts per kind (see the module docstring)."""

    def __init__(self, train_after: int = 1000) -> None:
        self._train_after = train_after
        self._kinds: dict[str, _Kind] = {}

    def pack(self, kind: str, raw: str) -> str | Packed:
        """``raw`` packed, or ``raw`` itself while ``kind`` has no dictionary yet."""
        k = self._kinds.get(kind)
        if k is None:
            k = self._kinds[kind] = _Kind(self._train_after)
        k.writes += 1
        data = raw.encode()
        if k.samples is not None:
            k.samples.append(data)
            if len(k.samples) >= self._train_after:
                self._train(k)
        elif k.writes >= k.next_training:
            k.samples = [data]  # a fresh sample for the next dictionary
        if k.comp is None or k.dec is None:
            return raw
        # an exact copy: the compressor's result keeps the capacity of its worst case (~the input's size)
        return Packed(bytes(memoryview(k.comp.compress(data))), k.dec)

    def _train(self, k: _Kind) -> None:
        samples, k.samples = k.samples or [], None
        try:
            d = zstandard.train_dictionary(DICT_SIZE, samples)
        except zstandard.ZstdError:  # too few distinct samples to learn from: keep the previous one
            d = None
        if d is not None:
            k.comp = zstandard.ZstdCompressor(level=PACK_LEVEL, dict_data=d)
            k.dec = zstandard.ZstdDecompressor(dict_data=d)
        k.next_training = max(k.next_training, k.writes) * 10


def text_of(raw: str | Packed) -> str:
    """The JSON text of a stored value, packed or not."""
    return raw if raw.__class__ is str else raw.text()  # type: ignore[union-attr]
