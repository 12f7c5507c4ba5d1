"""The autoscaling/v2 HorizontalPodAutoscaler kind: kube-apiserver's defaults and validation messages (the
expected texts are what kube-apiserver 1.36.3 answered for the same bodies), the status subresource, the
Table kubectl prints (NAME REFERENCE TARGETS MINPODS MAXPODS REPLICAS AGE) and discovery."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from phalanx.api.admission import admit
from phalanx.api.columns import columns, row
from phalanx.api.registry import lookup
from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock, format_time
from phalanx.objects.errors import Invalid
from phalanx.server import discovery
from phalanx.server.tables import cells_for, column_definitions
from phalanx.store.store import Store

NOW = datetime(2026, 12, 2, 15, 0, 0, tzinfo=timezone.utc)
REF = {"kind": "PyTorchJob", "name": "j", "apiVersion": "kubeflow.org/v1"}


def hpa(name: str = "h", **spec) -> dict:
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def errors(**spec) -> list[str]:
    with pytest.raises(Invalid) as e:
        admit(hpa(**spec))
    assert e.value.message.startswith('HorizontalPodAutoscaler.autoscaling "h" is invalid: ')
    return [str(x) for x in e.value.errors]


def test_defaults_min_replicas_cpu_metric_behavior_rules_and_canonical_quantities():
    out = admit(hpa(scaleTargetRef=REF, maxReplicas=3, behavior={"scaleUp": {"tolerance": "0.05"}}))
    assert out["spec"] == {
        "scaleTargetRef": REF, "maxReplicas": 3, "minReplicas": 1,
        "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization",
                                                                                "averageUtilization": 80}}}],
        "behavior": {"scaleUp": {"tolerance": "50m", "selectPolicy": "Max", "stabilizationWindowSeconds": 0,
                                 "policies": [{"type": "Pods", "value": 4, "periodSeconds": 15},
                                              {"type": "Percent", "value": 100, "periodSeconds": 15}]},
                     "scaleDown": {"selectPolicy": "Max",
                                   "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}]}}}
    avg = admit(hpa(scaleTargetRef=REF, maxReplicas=3, metrics=[
        {"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "s", "apiVersion": "v1"},
                                      "metric": {"name": "rps"}, "target": {"type": "Value", "value": 10}}},
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "AverageValue", "averageValue": 0.5}}}]))
    assert avg["spec"]["metrics"][0]["object"]["target"]["value"] == "10"
    assert avg["spec"]["metrics"][1]["resource"]["target"]["averageValue"] == "500m"


def test_replica_bounds_and_target_reference():
    assert errors(scaleTargetRef={}, minReplicas=0, maxReplicas=0) == [
        "spec.minReplicas: Invalid value: 0: must be greater than or equal to 1",
        "spec.maxReplicas: Required value: must be set and greater than 0",
        "spec.scaleTargetRef.kind: Required value",
        "spec.scaleTargetRef.name: Required value",
        'spec.scaleTargetRef.apiVersion: Invalid value: "": apiVersion must specify API group',
        "spec.metrics: Forbidden: must specify at least one Object or External metric to support scaling to zero "
        "replicas"]
    assert errors(scaleTargetRef=REF) == [
        "spec.maxReplicas: Required value: must be set and greater than 0",
        "spec.maxReplicas: Invalid value: 0: must be greater than or equal to `minReplicas`"]
    assert errors(scaleTargetRef=REF, maxReplicas=-1, minReplicas=-2) == [
        "spec.minReplicas: Invalid value: -2: must be greater than or equal to 1",
        "spec.maxReplicas: Invalid value: -1: must be greater than or equal to 1"]
    assert errors(scaleTargetRef=REF, minReplicas=5, maxReplicas=3) == [
        "spec.maxReplicas: Invalid value: 3: must be greater than or equal to `minReplicas`"]
    assert errors(scaleTargetRef={"kind": "..", "name": "a%b/c", "apiVersion": "a/b/c"}, maxReplicas=2) == [
        "spec.scaleTargetRef.kind: Invalid value: \"..\": may not be '..'",
        "spec.scaleTargetRef.name: Invalid value: \"a%b/c\": may not contain '/'",
        "spec.scaleTargetRef.name: Invalid value: \"a%b/c\": may not contain '%'",
        'spec.scaleTargetRef.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c']
    assert errors(scaleTargetRef={**REF, "apiVersion": "v1"}, maxReplicas=2) == [
        'spec.scaleTargetRef.apiVersion: Invalid value: "v1": apiVersion must specify API group']


def test_metric_specs():
    assert errors(scaleTargetRef=REF, maxReplicas=3, metrics=[
        {"type": "Foo"},
        {"type": "Resource"},
        {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}},
        {"type": "Resource", "resource": {"name": "", "target": {"type": "Value", "value": "-1"}}},
        {"type": "Pods", "pods": {"metric": {"name": ""}, "target": {"type": "Utilization", "averageUtilization": 0}}},
        {"type": "Object", "object": {"describedObject": {}, "metric": {"name": "m"}, "target": {"type": ""}}},
        {"type": "External", "external": {"metric": {"name": "m"}, "target": {"type": "AverageValue",
                                                                              "averageValue": "0"}}},
        {"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "",
                                                            "target": {"type": "Utilization", "averageUtilization": 50}}},
        {"type": "Resource", "pods": {"metric": {"name": "m"}, "target": {"type": "AverageValue", "averageValue": 1}},
         "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 50}}},
        {"type": ""},
    ]) == [
        'spec.metrics[0].type: Unsupported value: "Foo": supported values: "ContainerResource", "External", '
        '"Object", "Pods", "Resource"',
        "spec.metrics[1].resource: Required value: must populate information for the given metric source",
        "spec.metrics[2].resource.target.averageUtilization: Required value: must set either a target raw value or "
        "a target utilization",
        "spec.metrics[3].resource.name: Required value: must specify a resource name",
        'spec.metrics[3].resource.target.value: Invalid value: "-1": must be positive',
        "spec.metrics[3].resource.target.averageUtilization: Required value: must set either a target raw value or "
        "a target utilization",
        "spec.metrics[4].pods.metric.name: Required value: must specify a metric name",
        "spec.metrics[4].pods.target.averageUtilization: Invalid value: 0: must be greater than 0",
        "spec.metrics[4].pods.target.averageValue: Required value: must specify a positive target averageValue",
        "spec.metrics[5].object.describedObject.kind: Required value",
        "spec.metrics[5].object.describedObject.name: Required value",
        "spec.metrics[5].object.target.type: Required value: must specify a metric target type",
        'spec.metrics[5].object.target.type: Invalid value: "": must be either Utilization, Value, or AverageValue',
        "spec.metrics[5].object.target.averageValue: Required value: must set either a target value or averageValue",
        'spec.metrics[6].external.target.averageValue: Invalid value: "0": must be positive',
        "spec.metrics[7].containerResource.container: Required value: must specify a container",
        "spec.metrics[8].pods: Forbidden: must populate the given metric source only",
        "spec.metrics[9].type: Required value: must specify a metric source type",
        'spec.metrics[9].type: Unsupported value: "": supported values: "ContainerResource", "External", "Object", '
        '"Pods", "Resource"']


def test_metric_targets_names_and_containers():
    assert errors(scaleTargetRef=REF, maxReplicas=2, metrics=[
        {"type": "ContainerResource", "containerResource": {"name": "foo", "container": "Bad_Name", "target": {
            "type": "AverageValue", "averageValue": 1, "averageUtilization": 5}}},
        {"type": "Pods", "pods": {"metric": {"name": "a/b"}, "target": {"type": "Value", "value": "1"}}},
        {"type": "External", "external": {"metric": {"name": "x"}, "target": {"type": "Value", "value": "1",
                                                                              "averageValue": "2"}}},
        {"type": "External", "external": {"metric": {"name": "x"}, "target": {"type": "Utilization"}}},
        {"type": "ContainerResource", "containerResource": {"name": "pods", "container": "c", "target": {
            "type": "AverageValue", "averageValue": 1}}},
        {"type": "ContainerResource", "containerResource": {"name": "example.com/foo", "container": "c", "target": {
            "type": "AverageValue", "averageValue": 1}}},
    ]) == [
        'spec.metrics[0].containerResource.name: Invalid value: "foo": must be a standard resource type or fully '
        'qualified',
        'spec.metrics[0].containerResource.name: Invalid value: "foo": must be a standard resource for containers',
        'spec.metrics[0].containerResource.container: Invalid value: "Bad_Name": a lowercase RFC 1123 label must '
        "consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character "
        "(e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')",
        "spec.metrics[0].containerResource.target.averageValue: Forbidden: may not set both a target raw value and a "
        "target utilization",
        "spec.metrics[1].pods.metric.name: Invalid value: \"a/b\": may not contain '/'",
        "spec.metrics[1].pods.target.averageValue: Required value: must specify a positive target averageValue",
        "spec.metrics[2].external.target.value: Forbidden: may not set both a target value for metric and a per-pod "
        "target",
        "spec.metrics[3].external.target.averageValue: Required value: must set either a target value for metric or "
        "a per-pod target",
        'spec.metrics[4].containerResource.name: Invalid value: "pods": must be a standard resource for containers']


def test_behavior():
    assert errors(scaleTargetRef=REF, maxReplicas=2, behavior={
        "scaleUp": {"stabilizationWindowSeconds": -1, "selectPolicy": "Foo", "policies": [], "tolerance": "-1"},
        "scaleDown": {"stabilizationWindowSeconds": 4000, "policies": [
            {"type": "X", "value": 0, "periodSeconds": 0}, {"type": "Pods", "value": 1, "periodSeconds": 2000}]}}) == [
        "spec.behavior.scaleUp.stabilizationWindowSeconds: Invalid value: -1: must be greater than or equal to zero",
        'spec.behavior.scaleUp.selectPolicy: Unsupported value: "Foo": supported values: "Disabled", "Max", "Min"',
        "spec.behavior.scaleUp.policies: Required value: must specify at least one Policy",
        'spec.behavior.scaleUp.tolerance: Invalid value: "-1": must be greater than or equal to 0',
        "spec.behavior.scaleDown.stabilizationWindowSeconds: Invalid value: 4000: must be less than or equal to 3600",
        'spec.behavior.scaleDown.policies[0].type: Unsupported value: "X": supported values: "Percent", "Pods"',
        "spec.behavior.scaleDown.policies[0].value: Invalid value: 0: must be greater than zero",
        "spec.behavior.scaleDown.policies[0].periodSeconds: Invalid value: 0: must be greater than zero",
        "spec.behavior.scaleDown.policies[1].periodSeconds: Invalid value: 2000: must be less than or equal to 1800"]


async def test_created_with_an_empty_status_which_only_the_status_subresource_writes():
    store = Store(None, FakeClock(NOW), admission=admit)
    client = LocalClient(store)
    await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    made = await client.create({**hpa(scaleTargetRef=REF, maxReplicas=3), "status": {"desiredReplicas": 7}})
    assert made["status"] == {"desiredReplicas": 0}
    assert "generation" not in made["metadata"]  # kube-apiserver keeps none for HPAs
    made["status"] = {"currentReplicas": 2, "desiredReplicas": 3}
    made["spec"]["maxReplicas"] = 4
    updated = await client.update(made)
    assert updated["status"] == {"desiredReplicas": 0} and updated["spec"]["maxReplicas"] == 4
    written = await client.update_status({**updated, "status": made["status"]})
    assert written["status"] == {"currentReplicas": 2, "desiredReplicas": 3} and written["spec"]["maxReplicas"] == 4
    store.close()


def stored(metrics: list, status: dict | None = None, low: int | None = 1) -> dict:
    out = admit(hpa(scaleTargetRef=REF, maxReplicas=3, metrics=metrics, **({"minReplicas": low} if low else {})))
    out["metadata"]["creationTimestamp"] = format_time(NOW - timedelta(seconds=15))
    out["status"] = status or {"desiredReplicas": 0}
    return out


CPU = {"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}


def test_table_columns_and_cells_as_kube_apiserver_prints_them():
    assert columns("HorizontalPodAutoscaler") == ["NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS",
                                                  "AGE"]
    assert [c["name"] for c in column_definitions("HorizontalPodAutoscaler")] == [
        "Name", "Reference", "Targets", "MinPods", "MaxPods", "Replicas", "Age"]
    assert cells_for("HorizontalPodAutoscaler", stored([CPU]), NOW) == [
        "h", "PyTorchJob/j", "cpu: <unknown>/80%", "1", 3, 0, "15s"]
    measured = stored([CPU], {"currentReplicas": 2, "desiredReplicas": 3, "currentMetrics": [
        {"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 33, "averageValue": "100m"}}}]})
    assert row(measured, "HorizontalPodAutoscaler", False, NOW) == [
        "h", "PyTorchJob/j", "cpu: 33%/80%", "1", "3", "2", "15s"]


def test_targets_of_every_metric_type_and_the_first_two_only():
    mem = {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "100Mi"}}}
    pods = {"type": "Pods", "pods": {"metric": {"name": "packets"}, "target": {"type": "AverageValue",
                                                                              "averageValue": "1k"}}}
    obj_value = {"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "s", "apiVersion": "v1"},
                                              "metric": {"name": "rps"}, "target": {"type": "Value", "value": 10}}}
    obj_avg = {"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "s", "apiVersion": "v1"},
                                            "metric": {"name": "rps"}, "target": {"type": "AverageValue",
                                                                                  "averageValue": "0.5"}}}
    ext = {"type": "External", "external": {"metric": {"name": "q"}, "target": {"type": "AverageValue",
                                                                               "averageValue": 30}}}
    cont = {"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "c", "target": {
        "type": "Utilization", "averageUtilization": 60}}}

    def targets(m: dict, current: dict | None = None) -> str:
        status = {"desiredReplicas": 0, "currentMetrics": [current]} if current else None
        return cells_for("HorizontalPodAutoscaler", stored([m], status), NOW)[2]
    assert targets(mem) == "memory: <unknown>/100Mi"
    assert targets(mem, {"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "50Mi"}}}) == \
        "memory: 50Mi/100Mi"
    assert targets(pods) == "<unknown>/1k"
    assert targets(pods, {"type": "Pods", "pods": {"metric": {"name": "packets"}, "current": {"averageValue": "2k"}}}) \
        == "2k/1k"
    assert targets(obj_value, {"type": "Object", "object": {"current": {"value": "5"}}}) == "5/10"
    assert targets(obj_avg) == "<unknown>/500m (avg)"
    assert targets(obj_avg, {"type": "Object", "object": {"current": {"averageValue": "250m", "value": "1"}}}) == \
        "250m/500m (avg)"
    assert targets(ext) == "<unknown>/30 (avg)"
    assert targets(cont, {"type": "ContainerResource", "containerResource": {"current": {"averageUtilization": 33}}}) \
        == "cpu: 33%/60%"
    many = cells_for("HorizontalPodAutoscaler", stored([mem, pods, obj_value, ext]), NOW)[2]
    assert many == "memory: <unknown>/100Mi, <unknown>/1k + 2 more..."


def test_served_as_kube_apiserver_serves_it():
    rt = lookup("hpa")
    assert rt is not None and (rt.kind, rt.api_version, rt.plural, rt.namespaced) == (
        "HorizontalPodAutoscaler", "autoscaling/v2", "horizontalpodautoscalers", True)
    assert discovery.api_group("autoscaling")["preferredVersion"] == {"groupVersion": "autoscaling/v2",
                                                                       "version": "v2"}
    resources = discovery.resource_list("autoscaling", "v2")["resources"]
    main = next(r for r in resources if r["name"] == "horizontalpodautoscalers")
    assert (main["kind"], main["singularName"], main["shortNames"], main["categories"]) == (
        "HorizontalPodAutoscaler", "horizontalpodautoscaler", ["hpa"], ["all"])
    assert any(r["name"] == "horizontalpodautoscalers/status" for r in resources)
