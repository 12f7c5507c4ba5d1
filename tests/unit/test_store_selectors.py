"""Label and field selectors (apimachinery labels.Parse / fields.ParseSelector)."""
from __future__ import annotations

import pytest

from phalanx.objects.errors import BadRequest
from phalanx.objects.selectors import (
    field_tuple,
    field_values,
    label_selector_from_object,
    parse_field_selector,
    parse_label_selector,
    supported_fields,
)

LABELS = {"app": "web", "tier": "front", "version": "3", "training.kubeflow.org/job-name": "pytest"}


@pytest.mark.parametrize("sel,expected", [
    ("", True),
    ("app=web", True),
    ("app==web", True),
    ("app=db", False),
    ("app!=db", True),
    ("missing!=x", True),          # != matches objects without the key
    ("app in (web,db)", True),
    ("app in (db)", False),
    ("app notin (db, cache)", True),
    ("missing notin (x)", True),
    ("app", True),
    ("missing", False),
    ("!missing", True),
    ("!app", False),
    ("version>2", True),
    ("version<3", False),
    ("app>1", False),              # not an integer: no match
    ("app=web,tier=front", True),
    ("app=web,tier=back", False),
    ("  app = web , tier in ( front ) ", True),
    ("training.kubeflow.org/job-name=pytest", True),
    ("missing=", False),           # empty value: only an empty label matches
])
def test_label_selector_strings(sel: str, expected: bool) -> None:
    assert parse_label_selector(sel).matches(LABELS) is expected


def test_empty_value_matches_empty_label() -> None:
    assert parse_label_selector("a=").matches({"a": ""})
    assert parse_label_selector("a in (,x)").matches({"a": ""})


@pytest.mark.parametrize("sel", [
    "a in (b", "a in b", "a in ()", "=b", "a b", "a=b,", ",a", "a=(b)", "!a=b", "a>b",
    "bad key!=x", "UPPER.example.com/x=1", "a=" + "x" * 64, "a=-x", "a/=1", "/a=1",
])
def test_bad_label_selectors_name_the_selector(sel: str) -> None:
    with pytest.raises(BadRequest) as e:
        parse_label_selector(sel)
    assert sel in e.value.message


def test_label_selector_dict_and_object_forms() -> None:
    assert parse_label_selector({"app": "web"}).matches(LABELS)
    assert not parse_label_selector({"app": "db"}).matches(LABELS)
    assert parse_label_selector(None).matches({})
    with pytest.raises(BadRequest):
        parse_label_selector({"app": 1})  # type: ignore[dict-item]
    sel = label_selector_from_object({
        "matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["front"]},
                             {"key": "gone", "operator": "DoesNotExist"}],
    })
    assert sel.matches(LABELS)
    assert not sel.matches({**LABELS, "gone": "x"})
    with pytest.raises(BadRequest, match="operator: Unsupported value"):
        label_selector_from_object({"matchExpressions": [{"key": "a", "operator": "Like"}]})
    with pytest.raises(BadRequest, match="must be specified"):
        label_selector_from_object({"matchExpressions": [{"key": "a", "operator": "In"}]})


def test_label_selector_round_trips_to_string() -> None:
    s = "a=b,c!=d,e in (x,y),f notin (z),g,!h,i>3"
    assert str(parse_label_selector(s)) == s


POD = {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
       "spec": {"nodeName": "las1"}, "status": {"phase": "Running"}}


@pytest.mark.parametrize("sel,expected", [
    ("metadata.name=p", True),
    ("metadata.name==p", True),
    ("metadata.name!=p", False),
    ("metadata.namespace=ns,spec.nodeName=las1", True),
    ("status.phase=Pending", False),
    ("spec.nodeName!=", True),
    ("spec.schedulerName=", True),
])
def test_field_selectors(sel: str, expected: bool) -> None:
    assert parse_field_selector(sel, "Pod").matches(field_values("Pod", POD)) is expected


def test_field_selector_escapes() -> None:
    sel = parse_field_selector(r"metadata.name=a\,b\=c\\d")
    assert sel.requirements[0].value == "a,b=c\\d"
    assert sel.matches({"metadata.name": "a,b=c\\d"})
    with pytest.raises(BadRequest, match="invalid escape"):
        parse_field_selector(r"metadata.name=a\x")


@pytest.mark.parametrize("sel,kind,message", [
    ("spec.nodeName=x", "PyTorchJob", "field label not supported: spec.nodeName"),
    ("foo=bar", "Pod", "field label not supported: foo"),
    ("metadata.name", "Pod", "can't understand 'metadata.name'"),
    ("=x", "Pod", "missing field name"),
])
def test_bad_field_selectors(sel: str, kind: str, message: str) -> None:
    with pytest.raises(BadRequest, match=message) as e:
        parse_field_selector(sel, kind)
    assert sel in e.value.message


def test_event_field_values() -> None:
    ev = {"kind": "Event", "metadata": {"name": "e", "namespace": "default"},
          "involvedObject": {"kind": "Pod", "name": "p", "namespace": "default", "uid": "u"},
          "reason": "Scheduled", "type": "Normal", "source": {"component": "volcano"}}
    fv = field_values("Event", ev)
    assert fv["involvedObject.uid"] == "u" and fv["source"] == "volcano" and fv["reason"] == "Scheduled"
    assert fv["involvedObject.fieldPath"] == ""


def test_field_values_tolerate_odd_shapes() -> None:
    odd = {"kind": "Pod", "metadata": {"name": "p"}, "spec": ["not", "a", "map"], "status": "weird"}
    assert field_values("Pod", odd)["spec.nodeName"] == ""
    assert field_values("Node", {"metadata": {"name": "n"}, "spec": {}})["spec.unschedulable"] == "false"


def test_field_tuple_is_in_supported_order_with_the_apiserver_spelling() -> None:
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "ns"},
           "spec": {"nodeName": "n1", "hostNetwork": True, "restartPolicy": {"odd": 1}},
           "status": {"phase": "Running", "podIP": None}}
    values = dict(zip(supported_fields("Pod"), field_tuple("Pod", pod)))
    assert values == field_values("Pod", pod)
    assert values["metadata.name"] == "p" and values["spec.nodeName"] == "n1"
    assert values["spec.hostNetwork"] == "true" and values["spec.restartPolicy"] == ""
    assert values["status.podIP"] == "" and values["spec.schedulerName"] == ""
    assert field_tuple("Pod", {"kind": "Pod", "spec": {}})[supported_fields("Pod").index("spec.hostNetwork")] == "false"
    assert field_tuple("Node", {"spec": {"unschedulable": 1}}) == ("", "", "1")
