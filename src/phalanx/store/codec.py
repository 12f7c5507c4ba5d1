"""The store's JSON codec: orjson for what the store itself writes and reads
back (admitted objects, stored JSON), for speed over the json module.

Differences from ``json.dumps``/``json.loads`` that matter, and why they are
acceptable here (client input keeps the json module: ``rules.copy_in``):
- Non-ASCII is written as UTF-8, not ``\\uXXXX`` escapes: same JSON, and the
  size check already measures UTF-8 bytes.
- orjson cannot write integers beyond 64 bits (admission allows up to 1,024
  bits): ``dumps`` then falls back to the json module. Read back, such an
  integer is a float, which is what kube-apiserver's decoder does with an
  integer that does not fit int64/uint64.
- orjson writes NaN and infinities as null instead of refusing them: the store
  only serializes objects that passed admission's shape rules (finite numbers
  only), so none reach it.
"""
from __future__ import annotations

import json
from typing import Any

import orjson

loads = orjson.loads
dumps_bytes = orjson.dumps  # compact JSON as UTF-8 bytes; TypeError where ``dumps`` falls back


def dumps(obj: Any) -> str:
    """Compact JSON text of ``obj``; raises TypeError/ValueError as json.dumps does."""
    try:
        return dumps_bytes(obj).decode()
    except TypeError:
        # Integers beyond 64 bits or non-string keys: the json module says
        # (or does) what it always did.
        return json.dumps(obj, separators=(",", ":"), allow_nan=False)
