"""PriorityClass and the Priority admission, as kube-apiserver has them (pkg/apis/scheduling/validation,
plugin/pkg/admission/priority, the PriorityClass REST storage): one test per rule."""
from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

from phalanx.api.admission import admit
from phalanx.api.columns import columns, row
from phalanx.api.scheduling import system_priority_classes
from phalanx.cli.describe import describe
from phalanx.objects.clock import FakeClock
from phalanx.objects.errors import ApiError, Forbidden, Invalid
from phalanx.server.status import error_status
from phalanx.server.tables import cells_for, column_definitions
from phalanx.store.priority import PriorityAdmission
from phalanx.store.store import Store

NOW = datetime(2026, 12, 1, 12, 0, 0, tzinfo=timezone.utc)


def pc(name: str, value: int | None = 1000, **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
                            **fields}
    if value is not None:
        body["value"] = value
    return body


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec}}


@pytest.fixture
def store() -> Store:
    s = Store(None, FakeClock(NOW), admission=admit)
    s.add_admission_plugin(PriorityAdmission(s))
    for body in system_priority_classes():
        s.create(body)
    return s


def refused(fn: Any, *args: Any) -> ApiError:
    with pytest.raises(ApiError) as e:
        fn(*args)
    return e.value


# --- the class itself ------------------------------------------------------------------

def test_a_class_is_defaulted_as_the_v1_defaults_do(store):
    got = store.create(pc("high", description="urgent", globalDefault=False))
    assert (got["value"], got["description"], got["preemptionPolicy"]) == (1000, "urgent", "PreemptLowerPriority")
    assert "globalDefault" not in got and "namespace" not in got["metadata"]
    assert store.create(pc("zero", value=None))["value"] == 0  # a plain int32: no value is 0


def test_the_two_system_classes_exist_with_kube_apiservers_values_and_descriptions(store):
    got = {p["metadata"]["name"]: (p["value"], p["description"]) for p in store.list("PriorityClass")[0]}
    assert got == {
        "system-cluster-critical": (2000000000, "Used for system critical pods that must run in the cluster, but "
                                                "can be moved to another node if necessary."),
        "system-node-critical": (2000001000, "Used for system critical pods that must not be moved from their "
                                             "current node.")}


def test_a_system_class_cannot_be_deleted(store):
    e = refused(store.delete, "PriorityClass", "system-cluster-critical")
    assert isinstance(e, Forbidden) and e.message == (
        'priorityclasses.scheduling.k8s.io "system-cluster-critical" is forbidden: this is a system priority class '
        "and cannot be deleted")
    assert error_status(e)["details"] == {"name": "system-cluster-critical", "group": "scheduling.k8s.io",
                                          "kind": "priorityclasses"}
    store.create(pc("mine"))
    assert store.delete("PriorityClass", "mine") is None


def test_a_system_class_keeps_its_value_and_is_never_the_default(store):
    node = store.get("PriorityClass", "system-node-critical")
    e = refused(store.update, {**node, "value": 5})
    assert isinstance(e, Invalid) and "value: Forbidden: may not be changed in an update." in e.message
    e = refused(store.update, {**node, "globalDefault": True})
    assert e.message == ('PriorityClass.scheduling.k8s.io "system-node-critical" is invalid: metadata.name: '
                         "Forbidden: priority class names with 'system-' prefix are reserved for system use only. "
                         "error: globalDefault of system-node-critical PriorityClass must be false")


def test_names_with_the_system_prefix_are_reserved(store):
    e = refused(store.create, pc("system-mine", 5))
    assert e.message == ('PriorityClass.scheduling.k8s.io "system-mine" is invalid: metadata.name: Forbidden: '
                         "priority class names with 'system-' prefix are reserved for system use only. error: "
                         "system-mine is not a known system priority class")
    e = refused(store.create, pc("system-node-critical", 7))
    assert "error: value of system-node-critical PriorityClass must be 2000001000" in e.message


def test_user_values_stop_at_one_billion(store):
    assert store.create(pc("top", 1000000000))["value"] == 1000000000
    e = refused(store.create, pc("over", 1000000001))
    assert e.message == ('PriorityClass.scheduling.k8s.io "over" is invalid: value: Forbidden: maximum allowed value '
                         "of a user defined priority is 1000000000")
    e = refused(store.create, pc("wide", 2**31))
    assert isinstance(e, Invalid) and "value" in e.message  # not an int32


def test_the_name_is_a_dns_subdomain_and_the_policy_a_known_one(store):
    e = refused(store.create, pc("Bad_Name"))
    assert isinstance(e, Invalid) and "metadata.name: Invalid value: \"Bad_Name\": a lowercase RFC 1123 subdomain" \
        in e.message
    e = refused(store.create, pc("p", preemptionPolicy="Sometimes"))
    assert e.message == ('PriorityClass.scheduling.k8s.io "p" is invalid: preemptionPolicy: Unsupported value: '
                         '"Sometimes": supported values: "PreemptLowerPriority", "Never"')


def test_value_and_preemption_policy_are_immutable(store):
    store.create(pc("high", preemptionPolicy="Never"))
    cur = store.get("PriorityClass", "high")
    e = refused(store.update, {**cur, "value": 1001, "preemptionPolicy": "PreemptLowerPriority"})
    assert e.message == ('PriorityClass.scheduling.k8s.io "high" is invalid: [value: Forbidden: may not be changed '
                         'in an update., preemptionPolicy: Invalid value: "PreemptLowerPriority": field is immutable]')
    assert store.update({**cur, "description": "now documented"})["description"] == "now documented"


def test_a_second_default_is_refused_on_create_and_on_update(store):
    store.create(pc("first", 10, globalDefault=True))
    e = refused(store.create, pc("second", 20, globalDefault=True))
    assert isinstance(e, Forbidden) and e.message == (
        'priorityclasses.scheduling.k8s.io "second" is forbidden: PriorityClass first is already marked as default. '
        "Only one default can exist")
    other = store.create(pc("other", 30))
    e = refused(store.update, {**other, "globalDefault": True})
    assert "PriorityClass first is already marked as default" in e.message
    first = store.get("PriorityClass", "first")
    assert store.update({**first, "description": "still the default"})["globalDefault"] is True
    store.update({**store.get("PriorityClass", "first"), "globalDefault": False})
    assert store.update({**other, "globalDefault": True})["globalDefault"] is True


# --- the Priority admission of pods ----------------------------------------------------

def test_a_pod_gets_its_class_value_and_policy(store):
    store.create(pc("batch", 100, preemptionPolicy="Never"))
    spec = store.create(pod("p", priorityClassName="batch"))["spec"]
    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == ("batch", 100, "Never")


def test_a_pod_naming_an_unknown_class_is_forbidden(store):
    e = refused(store.create, pod("x", priorityClassName="foo"))
    assert isinstance(e, Forbidden) and e.message == 'pods "x" is forbidden: no PriorityClass with name foo was found'
    assert error_status(e)["details"] == {"name": "x", "kind": "pods"}
    assert store.list("Pod")[0] == []


def test_a_pod_without_a_class_gets_zero_or_the_global_default(store):
    spec = store.create(pod("a"))["spec"]
    assert (spec.get("priorityClassName"), spec["priority"], spec["preemptionPolicy"]) == (
        None, 0, "PreemptLowerPriority")
    store.create(pc("everyone", 7, globalDefault=True, preemptionPolicy="Never"))
    spec = store.create(pod("b"))["spec"]
    assert (spec["priorityClassName"], spec["priority"], spec["preemptionPolicy"]) == ("everyone", 7, "Never")


def test_a_pod_may_name_a_system_class(store):
    assert store.create(pod("n", priorityClassName="system-node-critical"))["spec"]["priority"] == 2000001000


def test_a_priority_or_policy_of_the_pods_own_must_match_its_class(store):
    store.create(pc("high", 1000))
    assert store.create(pod("same", priorityClassName="high", priority=1000))["spec"]["priority"] == 1000
    e = refused(store.create, pod("d", priorityClassName="high", priority=5))
    assert e.message == ('pods "d" is forbidden: the integer value of priority (5) must not be provided in pod spec; '
                         "priority admission controller computed 1000 from the given PriorityClass name")
    e = refused(store.create, pod("e", priority=3))
    assert "the integer value of priority (3) must not be provided in pod spec; priority admission controller " \
           "computed 0 from the given PriorityClass name" in e.message
    e = refused(store.create, pod("f", priorityClassName="high", preemptionPolicy="Never"))
    assert e.message == ('pods "f" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in '
                         "pod spec; priority admission controller computed PreemptLowerPriority from the given "
                         "PriorityClass name")


def test_an_update_keeps_the_priority_set_at_creation(store):
    store.create(pc("high", 1000))
    cur = store.create(pod("p", priorityClassName="high"))
    del cur["spec"]["priority"], cur["spec"]["preemptionPolicy"]
    cur["metadata"]["labels"] = {"a": "b"}
    spec = store.update(cur)["spec"]
    assert (spec["priority"], spec["preemptionPolicy"]) == (1000, "PreemptLowerPriority")


def test_a_pods_class_name_and_policy_are_validated(store):
    e = refused(store.create, pod("v", priorityClassName="Not_A_Name"))
    assert isinstance(e, Invalid) and 'spec.priorityClassName: Invalid value: "Not_A_Name"' in e.message
    e = refused(store.create, pod("w", preemptionPolicy="Maybe"))
    assert 'spec.preemptionPolicy: Unsupported value: "Maybe": supported values: "PreemptLowerPriority", "Never"' \
        in e.message


def test_without_the_plugin_a_bare_store_leaves_priorities_alone():
    s = Store(None, FakeClock(NOW), admission=admit)
    spec = s.create(pod("p", priorityClassName="anything"))["spec"]
    assert "priority" not in spec


# --- what kubectl prints ---------------------------------------------------------------

def test_the_table_columns_and_cells_are_kube_apiservers():
    body = {**pc("high", 1000, preemptionPolicy="PreemptLowerPriority"),
            "metadata": {"name": "high", "creationTimestamp": "2026-12-01T11:55:00Z"}}
    assert [(c["name"], c["type"]) for c in column_definitions("PriorityClass")] == [
        ("Name", "string"), ("Value", "integer"), ("Global-Default", "boolean"), ("Age", "string"),
        ("PreemptionPolicy", "string")]
    assert cells_for("PriorityClass", body, NOW) == ["high", 1000, False, "5m", "PreemptLowerPriority"]
    assert cells_for("PriorityClass", {**body, "globalDefault": True}, NOW)[2] is True
    assert columns("PriorityClass") == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    assert row(body, "PriorityClass", False, NOW) == ["high", "1000", "false", "5m", "PreemptLowerPriority"]


def test_describe_prints_kubectls_fields():
    body = {**pc("high", 1000, description="urgent", preemptionPolicy="Never"),
            "metadata": {"name": "high", "annotations": {"team": "a"}}}
    assert describe(body, {"events": []}, NOW) == (
        "Name:              high\n"
        "Value:             1000\n"
        "GlobalDefault:     false\n"
        "PreemptionPolicy:  Never\n"
        "Description:       urgent\n"
        "Annotations:       team=a\n"
        "Events:            <none>\n")
