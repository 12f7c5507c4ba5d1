"""Reading YAML manifests: multi-document, List, errors with positions, hostile YAML."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from phalanx.api import manifest
from phalanx.api.admission import admit
from phalanx.api.manifest import ManifestError, ShapeError, load_manifests, normalize_json
from phalanx.objects.errors import BadRequest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_multi_document_skips_empty_documents_and_expands_lists() -> None:
    text = """\
---
apiVersion: v1
kind: Pod
metadata: {name: a}
---
---
# only a comment
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: Service, metadata: {name: s1}}
- {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: q}}
"""
    objs = load_manifests(text)
    assert [(o["kind"], o["metadata"]["name"]) for o in objs] == [("Pod", "a"), ("Service", "s1"), ("Queue", "q")]


def test_empty_input_gives_no_objects() -> None:
    assert load_manifests("") == []
    assert load_manifests("---\n---\n") == []


def test_syntax_error_names_source_line_and_column() -> None:
    text = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  labels: x: y\n"
    with pytest.raises(ManifestError) as e:
        load_manifests(text, "pytorchjob.yaml")
    assert e.value.message == ("error parsing pytorchjob.yaml: line 5, column 12: "
                               "mapping values are not allowed in this context")
    assert (e.value.line, e.value.column) == (5, 12)
    assert isinstance(e.value, BadRequest) and e.value.code == 400


def test_syntax_error_in_a_later_document_reports_its_own_line() -> None:
    text = "apiVersion: v1\nkind: Pod\n---\napiVersion: v1\nkind: Pod\nmetadata:\n\tname: x\n"
    with pytest.raises(ManifestError) as e:
        load_manifests(text, "f.yaml")
    assert e.value.line == 7
    assert e.value.message.startswith("error parsing f.yaml: line 7, column 1: ")


def test_a_document_that_is_not_a_mapping_names_its_index_and_line() -> None:
    text = "apiVersion: v1\nkind: Pod\n---\n- a\n- b\n"
    with pytest.raises(ManifestError) as e:
        load_manifests(text, "f.yaml")
    assert e.value.message == "error parsing f.yaml: document 2 (line 4): expected a mapping with apiVersion and kind, got a list"
    assert e.value.document == 2


def test_a_document_without_apiversion_or_kind_is_refused() -> None:
    with pytest.raises(ManifestError, match=r"document 1 \(line 1\): apiVersion not set, kind not set"):
        load_manifests("metadata: {name: a}\n", "f.yaml")
    with pytest.raises(ManifestError, match=r"document 2 \(line 4\): kind not set"):
        load_manifests("apiVersion: v1\nkind: Pod\n---\napiVersion: v1\n", "f.yaml")
    with pytest.raises(ManifestError, match=r"items\[1\]: kind not set"):
        load_manifests("apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: Pod}\n- {apiVersion: v1}\n")


def test_duplicate_keys_are_an_error_not_last_one_wins() -> None:
    with pytest.raises(ManifestError) as e:
        load_manifests("apiVersion: v1\nkind: Pod\nkind: Service\n", "f.yaml")
    assert e.value.message == 'error parsing f.yaml: line 3, column 1: mapping key "kind" already defined at line 2'


def test_yaml_is_read_as_kubernetes_reads_it() -> None:
    # timestamps stay strings; scalar keys become strings (sigs.k8s.io/yaml)
    [obj] = load_manifests("apiVersion: v1\nkind: Pod\nmetadata:\n  creationTimestamp: 2024-01-01T00:00:00Z\n"
                           "  annotations: {2: two, false: yes}\n")
    assert obj["metadata"]["creationTimestamp"] == "2024-01-01T00:00:00Z"
    assert obj["metadata"]["annotations"] == {"2": "two", "false": True}


def test_anchors_and_merge_keys_work() -> None:
    text = "base: &b {image: busybox}\napiVersion: v1\nkind: Pod\nspec:\n  c: {<<: *b, name: x}\n"
    [obj] = load_manifests(text)
    assert obj["spec"]["c"] == {"image": "busybox", "name": "x"}


def test_alias_bomb_is_refused_quickly() -> None:
    lines = ["apiVersion: v1", "kind: Pod", "a: &a [x, x, x, x, x, x, x, x, x, x]"]
    prev = "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [" + ", ".join([f"*{prev}"] * 10) + "]")
        prev = name
    t0 = time.monotonic()
    with pytest.raises(ManifestError, match="aliases expand this document"):
        load_manifests("\n".join(lines) + "\n", "bomb.yaml")
    assert time.monotonic() - t0 < 2


def test_recursive_alias_is_refused() -> None:
    with pytest.raises(ManifestError, match="recursive YAML alias"):
        load_manifests("apiVersion: v1\nkind: Pod\nx: &a [*a]\n")


def test_deep_nesting_is_refused() -> None:
    deep = "apiVersion: v1\nkind: Pod\nx: " + "[" * 200 + "]" * 200 + "\n"
    with pytest.raises(ManifestError, match="nesting deeper than"):
        load_manifests(deep)
    deeper = "apiVersion: v1\nkind: Pod\nx: " + "[" * 50_000 + "]" * 50_000 + "\n"
    with pytest.raises(ManifestError, match="nesting"):
        load_manifests(deeper)


def test_oversized_document_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manifest, "MAX_DOCUMENT_BYTES", 1000)
    big = "apiVersion: v1\nkind: Pod\ndata: " + "x" * 2000 + "\n"
    with pytest.raises(ManifestError, match="document is larger than"):
        load_manifests(big, "big.yaml")
    assert load_manifests("apiVersion: v1\nkind: Pod\n")  # small documents still load


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("apiVersion: v1\nkind: Pod\nx: \x01\n", "line 3, column 4: unacceptable character #x0001"),
        ("apiVersion: v1\nkind: Pod\nx: !!python/object:os.system {}\n", "could not determine a constructor"),
        ("apiVersion: v1\nkind: Pod\nx: !!binary aGVsbG8=\n", "binary values are not supported"),
        ("apiVersion: v1\nkind: Pod\n? [a]\n: b\n", "found unhashable key"),
        ("apiVersion: v1\nkind: Pod\nx: " + "9" * 5000 + "\n", "document 1"),
    ],
)
def test_hostile_yaml_gives_a_manifest_error(text: str, fragment: str) -> None:
    with pytest.raises(ManifestError) as e:
        load_manifests(text, "evil.yaml")
    assert fragment in e.value.message
    assert e.value.message.startswith("error parsing evil.yaml")


def test_bytes_input_must_be_utf8() -> None:
    assert load_manifests(b"apiVersion: v1\nkind: Pod\n")[0]["kind"] == "Pod"
    with pytest.raises(ManifestError, match="not UTF-8"):
        load_manifests(b"apiVersion: v1\nkind: \xff\n", "bin.yaml")


def test_normalize_json_refuses_what_json_cannot_hold() -> None:
    with pytest.raises(ShapeError) as e:
        normalize_json({"a": {"b": [1, float("nan")]}})
    assert e.value.loc == ("a", "b", 1) and e.value.path == "a.b[1]"
    loop: dict = {}
    loop["self"] = loop
    with pytest.raises(ShapeError, match="nesting deeper"):
        normalize_json(loop)
    assert normalize_json({"a": None, "b": [None]}) == {"b": [None]}
    assert normalize_json({"a": None}, strip_nulls=False) == {"a": None}


@pytest.mark.parametrize("name, kind", [("pytorchjob.yaml", "PyTorchJob"), ("tfjob.yaml", "TFJob"), ("queue.yaml", "Queue")])
def test_examples_load_and_pass_admission(name: str, kind: str) -> None:
    [obj] = load_manifests((EXAMPLES / name).read_text(), name)
    assert obj["kind"] == kind
    admit(obj)


# --- normalize_json's fast copy agrees with the full walk ---------------------------------------

from hypothesis import given, settings
from hypothesis import strategies as _st

from phalanx.api import manifest as _manifest

_json_values = _st.recursive(
    _st.none() | _st.booleans() | _st.integers(min_value=-(2 ** 1100), max_value=2 ** 1100)
    | _st.floats(allow_nan=True, allow_infinity=True) | _st.text(max_size=5),
    lambda inner: _st.lists(inner, max_size=4)
    | _st.dictionaries(_st.text(max_size=3) | _st.integers(0, 3) | _st.booleans(), inner, max_size=4),
    max_leaves=30)


def _full_walk(value, **kw):
    """normalize_json with neither of its fast paths (the orjson round trip, the plain copy)."""
    saved = _manifest._plain_copy, _manifest._round_trip

    def refuse(*a, **k):
        raise _manifest._NotPlain
    _manifest._plain_copy, _manifest._round_trip = refuse, lambda *a, **k: None
    try:
        return _manifest.normalize_json(value, **kw)
    finally:
        _manifest._plain_copy, _manifest._round_trip = saved


def test_round_trip_is_taken_for_plain_objects_and_declined_otherwise() -> None:
    pod = {"kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}, "spec": {"containers": [
        {"name": "c", "command": ["true"], "ports": [{"containerPort": 80}], "x": 1.5, "y": True}]}}
    out = _manifest._round_trip(pod, _manifest.MAX_DEPTH, _manifest.MAX_NODES)
    assert out == pod and out is not pod and out["spec"] is not pod["spec"]
    declined = [
        {"a": None}, {"a": float("nan")}, {"a": float("inf")}, {"a": 2 ** 70}, {1: "x"},
        {"a": __import__("datetime").datetime(2020, 1, 1)}, {"a": type("S", (str,), {})("x")},
        {"a": {"b": {"c": {}}}},  # four brackets, more than max_depth below
        {"a": "x" * 50},  # more bytes than max_nodes below
    ]
    for v in declined:
        assert _manifest._round_trip(v, 3, 40) is None, v
    # Kept nulls (a status's lastProbeTime) are copied, unless a NaN or an infinity hides among them.
    status = {"conditions": [{"type": "Ready", "lastProbeTime": None, "x": 1.5}], "podIP": None}
    kept = _manifest._round_trip(status, 10, 200, strip_nulls=False)
    assert kept == status and kept is not status and kept["conditions"][0] is not status["conditions"][0]
    for v in ({"a": None, "b": float("nan")}, {"a": [None, float("-inf")]}, {"a": None, "b": {"c": float("inf")}}):
        assert _manifest._round_trip(v, 10, 200, strip_nulls=False) is None, v
        with pytest.raises(_manifest.ShapeError, match="not a valid number"):
            _manifest.normalize_json(v, strip_nulls=False)
    # Whatever it declines still gets the full rules (and their errors).
    with pytest.raises(_manifest.ShapeError, match="not a valid number"):
        _manifest.normalize_json({"a": float("inf")})
    assert _manifest.normalize_json({"a": __import__("datetime").datetime(2020, 1, 1)}) == {"a": "2020-01-01T00:00:00Z"}


def _outcome(fn, value, **kw):
    try:
        return ("ok", fn(value, **kw))
    except _manifest.ShapeError as e:
        return ("error", e.path, str(e), e.loc)


@settings(max_examples=400, deadline=None)
@given(_json_values, _st.booleans(), _st.integers(0, 4), _st.integers(0, 40))
def test_fast_copy_agrees_with_the_full_walk(value, strip, depth, nodes):
    kw = {"strip_nulls": strip, "max_depth": depth, "max_nodes": nodes}
    assert _outcome(_manifest.normalize_json, value, **kw) == _outcome(_full_walk, value, **kw)
