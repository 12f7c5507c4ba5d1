"""RFC 7386 merge patch and RFC 6902 JSON patch, including the RFC examples."""
from __future__ import annotations

import pytest

from phalanx.objects.errors import BadRequest
from phalanx.store.patch import JsonPatchError, json_equal, json_patch, merge_patch


@pytest.mark.parametrize("target,patch,result", [
    # RFC 7386 appendix A
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
])
def test_merge_patch_rfc_examples(target, patch, result) -> None:
    assert merge_patch(target, patch) == result


def test_merge_patch_does_not_modify_its_inputs() -> None:
    target = {"a": {"b": 1}}
    patch = {"a": {"c": [1]}}
    out = merge_patch(target, patch)
    out["a"]["c"].append(2)
    assert target == {"a": {"b": 1}} and patch == {"a": {"c": [1]}}


DOC = {"foo": "bar", "baz": [1, 2, 3], "obj": {"a~b": 1, "c/d": 2}}


@pytest.mark.parametrize("ops,result", [
    ([{"op": "add", "path": "/new", "value": 1}], {**DOC, "new": 1}),
    ([{"op": "add", "path": "/baz/1", "value": 9}], {**DOC, "baz": [1, 9, 2, 3]}),
    ([{"op": "add", "path": "/baz/-", "value": 9}], {**DOC, "baz": [1, 2, 3, 9]}),
    ([{"op": "remove", "path": "/baz/0"}], {**DOC, "baz": [2, 3]}),
    ([{"op": "replace", "path": "/foo", "value": {"x": 1}}], {**DOC, "foo": {"x": 1}}),
    ([{"op": "move", "from": "/foo", "path": "/moved"}],
     {"baz": [1, 2, 3], "obj": DOC["obj"], "moved": "bar"}),
    ([{"op": "copy", "from": "/baz", "path": "/copy"}], {**DOC, "copy": [1, 2, 3]}),
    ([{"op": "remove", "path": "/obj/a~0b"}, {"op": "remove", "path": "/obj/c~1d"}], {**DOC, "obj": {}}),
    ([{"op": "test", "path": "/baz", "value": [1, 2, 3.0]}], DOC),
    ([{"op": "replace", "path": "", "value": [1]}], [1]),
    ([{"op": "move", "from": "/baz/0", "path": "/baz/2"}], {**DOC, "baz": [2, 3, 1]}),
    # docs/REFERENCE.md golden 58: the apiserver accepts "replace" of a missing object key (acts as "add")
    ([{"op": "replace", "path": "/obj/new", "value": 3}], {**DOC, "obj": {**DOC["obj"], "new": 3}}),
])
def test_json_patch_ops(ops, result) -> None:
    assert json_patch(DOC, ops) == result


@pytest.mark.parametrize("ops,message", [
    ([{"op": "remove", "path": "/missing"}], "does not exist"),
    ([{"op": "replace", "path": "/baz/3", "value": 1}], "out of range"),
    ([{"op": "add", "path": "/missing/deeper", "value": 1}], "does not exist"),
    ([{"op": "add", "path": "/baz/7", "value": 1}], "out of range"),
    ([{"op": "add", "path": "/baz/01", "value": 1}], "not an array index"),
    ([{"op": "test", "path": "/foo", "value": "baz"}], "testing value"),
    ([{"op": "test", "path": "/baz/0", "value": True}], "testing value"),  # true is not 1
    ([{"op": "move", "from": "/obj", "path": "/obj/x"}], "its own child"),
    ([{"op": "add", "path": "/foo/x", "value": 1}], "cannot descend|parent is not a container"),
])
def test_json_patch_failures(ops, message) -> None:
    with pytest.raises(JsonPatchError, match=message):
        json_patch(DOC, ops)


@pytest.mark.parametrize("ops,message", [
    ({"op": "add"}, "must be a list"),
    (["add"], "must be an object"),
    ([{"op": "add", "path": "/x"}], 'missing "value"'),
    ([{"op": "add", "path": "x", "value": 1}], 'must start with "/"'),
    ([{"op": "add", "path": 3, "value": 1}], "path must be a string"),
    ([{"op": "nope", "path": "/x"}], "unsupported op"),
])
def test_json_patch_malformed(ops, message) -> None:
    with pytest.raises(BadRequest, match=message):
        json_patch(DOC, ops)


def test_json_patch_is_all_or_nothing() -> None:
    doc = {"a": 1}
    with pytest.raises(JsonPatchError):
        json_patch(doc, [{"op": "add", "path": "/b", "value": 2}, {"op": "remove", "path": "/zz"}])
    assert doc == {"a": 1}


def test_json_equal() -> None:
    assert json_equal({"a": [1, 2.0]}, {"a": [1.0, 2]})
    assert not json_equal(True, 1)
    assert not json_equal({"a": 1}, {"a": 1, "b": None})
    assert not json_equal([1], (1,))

