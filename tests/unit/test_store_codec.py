"""The store's orjson codec (store/codec.py): what it writes and reads back is
what the json module would, except where documented (integers beyond 64 bits
come back as floats, as kube-apiserver's decoder makes them)."""
from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from phalanx.objects.clock import FakeClock
from phalanx.store import Store, codec

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_round_trip_equals_the_json_module(value) -> None:
    raw = codec.dumps(value)
    assert codec.loads(raw) == json.loads(raw) == json.loads(json.dumps(value))
    assert json.dumps(codec.loads(raw), sort_keys=True) == json.dumps(value, sort_keys=True)


def test_big_integers_fall_back_and_read_back_as_floats() -> None:
    raw = codec.dumps({"n": 2**70, "m": 2**64 - 1})
    assert json.loads(raw) == {"n": 2**70, "m": 2**64 - 1}  # written exactly
    back = codec.loads(raw)
    assert back["m"] == 2**64 - 1 and isinstance(back["m"], int)
    assert back["n"] == float(2**70) and isinstance(back["n"], float)


def test_store_keeps_non_ascii_text_and_measures_it_in_bytes() -> None:
    store = Store(None, FakeClock())
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "default",
                                                              "annotations": {"note": "é\u2028✓"}}}
    created = store.create(cm)
    assert created["metadata"]["annotations"]["note"] == "é\u2028✓"
    assert store.get("ConfigMap", "c", "default")["metadata"]["annotations"]["note"] == "é\u2028✓"
