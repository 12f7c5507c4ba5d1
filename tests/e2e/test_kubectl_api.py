"""Real kubectl 1.32 against `phalanx up`, as against a real apiserver: protobuf
bodies of its typed clients, /openapi/v2 (unknown kinds), namespaces that must
exist, and `describe` events selected by uid."""
from __future__ import annotations

import json
from typing import Iterator

import pytest

from tests.e2e.test_kubectl import Plane, started_plane

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


@pytest.fixture(scope="module")
def plane(tmp_path_factory) -> Iterator[Plane]:
    yield from started_plane(tmp_path_factory.mktemp("kubectl-api"), {"nodes": [{"name": "las1", "cpu": 4, "memory": "8Gi"}]})


def test_typed_creates_send_protobuf_and_are_stored_as_json(plane):
    assert plane.kubectl("create", "namespace", "x").stdout == "namespace/x created\n"
    assert plane.kubectl("create", "configmap", "c", "--from-literal=a=b").stdout == "configmap/c created\n"
    assert plane.kubectl("create", "secret", "generic", "s", "--from-literal=a=b").stdout == "secret/s created\n"
    assert plane.kubectl("create", "serviceaccount", "sa").stdout == "serviceaccount/sa created\n"
    assert plane.json("get", "configmap", "c")["data"] == {"a": "b"}
    secret = plane.json("get", "secret", "s")
    assert secret["data"] == {"a": "Yg=="} and secret["type"] == "Opaque"
    r = plane.kubectl("create", "configmap", "c", "--from-literal=a=b", "-v=8", check=False)
    assert "Content-Type: application/vnd.kubernetes.protobuf" in r.stderr  # really the protobuf path
    assert 'configmaps "c" already exists' in r.stderr


def test_unknown_kind_gets_the_apiservers_mapping_error_and_strict_validation_still_refuses(plane, tmp_path):
    foo = tmp_path / "foo.yaml"
    foo.write_text("apiVersion: example.com/v1\nkind: Foo\nmetadata: {name: bar}\n")
    r = plane.kubectl("apply", "-f", str(foo), check=False)
    assert r.returncode == 1
    assert r.stderr == (f'error: resource mapping not found for name: "bar" namespace: "" from "{foo}": no matches '
                        f'for kind "Foo" in version "example.com/v1"\nensure CRDs are installed first\n')
    bad = tmp_path / "pod.yaml"
    bad.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: px}\n"
                   "spec: {containers: [{name: c, image: busybox, bogus: 1}]}\n")
    r = plane.kubectl("apply", "--validate=strict", "-f", str(bad), check=False)
    assert r.returncode == 1 and 'strict decoding error: unknown field "spec.containers[0].bogus"' in r.stderr


def test_namespaces_exist_from_the_start_and_writes_need_one(plane, tmp_path):
    names = {n["metadata"]["name"] for n in plane.json("get", "namespaces")["items"]}
    assert {"default", "kube-system", "kube-public"} <= names
    r = plane.kubectl("create", "configmap", "c", "-n", "nope", "--from-literal=a=b", check=False)
    assert r.returncode == 1 and r.stderr == 'error: failed to create configmap: namespaces "nope" not found\n'
    cm = tmp_path / "cm.yaml"
    cm.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: nope}\ndata: {a: b}\n")
    r = plane.kubectl("apply", "-f", str(cm), check=False)
    assert r.returncode == 1 and 'namespaces "nope" not found' in r.stderr
    plane.kubectl("create", "configmap", "inside", "-n", "x", "--from-literal=a=b")
    plane.kubectl("delete", "namespace", "x")
    plane.wait(lambda: plane.kubectl("get", "configmaps", "-n", "x", "-o", "name").stdout == "",
               what="namespace x emptied")


def _event(pod: dict, reason: str) -> str:
    meta = pod["metadata"]
    return json.dumps({"apiVersion": "v1", "kind": "Event",
                       "metadata": {"name": f"p.{reason.lower()}", "namespace": "default"},
                       "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p", "uid": meta["uid"],
                                          "apiVersion": "v1"},
                       "reason": reason, "message": f"about {meta['uid']}", "type": "Normal",
                       "firstTimestamp": meta["creationTimestamp"], "lastTimestamp": meta["creationTimestamp"],
                       "count": 1, "source": {"component": "test"}})


def test_describe_shows_only_the_events_of_the_pod_of_that_uid(plane, tmp_path):
    manifest = tmp_path / "p.yaml"
    manifest.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
                        "spec: {schedulerName: nobody, containers: [{name: c, image: busybox, command: [sleep, '60']}]}\n")
    first = json.loads(plane.kubectl("create", "-f", str(manifest), "-o", "json").stdout)
    (tmp_path / "e1.json").write_text(_event(first, "FirstPod"))
    plane.kubectl("create", "-f", str(tmp_path / "e1.json"))
    plane.kubectl("delete", "pod", "p", "--wait=true")
    second = json.loads(plane.kubectl("create", "-f", str(manifest), "-o", "json").stdout)
    assert second["metadata"]["uid"] != first["metadata"]["uid"]
    (tmp_path / "e2.json").write_text(_event(second, "SecondPod"))
    plane.kubectl("create", "-f", str(tmp_path / "e2.json"))
    out = plane.kubectl("describe", "pod", "p").stdout
    assert "SecondPod" in out and "FirstPod" not in out, out
