"""Kubernetes protobuf request bodies: the envelope and the built-in kinds read as
the JSON objects kubectl would have sent, the same admission, and 400s for bad bytes."""
from __future__ import annotations

import base64
import json
from types import SimpleNamespace

import aiohttp
import pytest

from phalanx.api.admission import admit
from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.objects.errors import BadRequest
from phalanx.server import protobuf
from phalanx.server.app import make_app, serve
from phalanx.store.store import Store

pytestmark = pytest.mark.timeout(30)
TOKEN = "t0ken"
CORE = "k8s.io.api.core.v1"


def envelope(api_version: str, kind: str, msg, *, encoding: str = "", content_type: str = "") -> bytes:
    unknown = protobuf.message_class("k8s.io.apimachinery.pkg.runtime.Unknown")()
    unknown.typeMeta.apiVersion = api_version
    unknown.typeMeta.kind = kind
    unknown.raw = msg if isinstance(msg, bytes) else msg.SerializeToString()
    if encoding:
        unknown.contentEncoding = encoding
    if content_type:
        unknown.contentType = content_type
    return protobuf.MAGIC + unknown.SerializeToString()


def new(name: str):
    return protobuf.message_class(name)()


def go_zero_meta(meta, name: str, namespace: str = "") -> None:
    """What Go writes for an ObjectMeta with only a name: every non-pointer field, zero or not."""
    meta.name = name
    meta.generateName = ""
    meta.namespace = namespace
    meta.uid = ""
    meta.resourceVersion = ""
    meta.generation = 0
    meta.creationTimestamp.seconds = 0


def test_namespace_as_kubectl_create_namespace_sends_it():
    ns = new(f"{CORE}.Namespace")
    go_zero_meta(ns.metadata, "x")
    ns.spec.SetInParent()
    ns.status.phase = ""
    assert protobuf.decode_object(envelope("v1", "Namespace", ns), "Namespace") == {
        "kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "x"}, "spec": {}, "status": {}}


def test_configmap_secret_and_serviceaccount_keep_their_data_and_pointer_zeros():
    cm = new(f"{CORE}.ConfigMap")
    go_zero_meta(cm.metadata, "c", "default")
    cm.data["a"] = "b"
    cm.binaryData["bin"] = b"\x00\xff"
    cm.immutable = False  # a *bool: false is a value
    assert protobuf.decode_object(envelope("v1", "ConfigMap", cm), "ConfigMap") == {
        "kind": "ConfigMap", "apiVersion": "v1", "metadata": {"name": "c", "namespace": "default"},
        "data": {"a": "b"}, "binaryData": {"bin": "AP8="}, "immutable": False}

    secret = new(f"{CORE}.Secret")
    go_zero_meta(secret.metadata, "s")
    secret.data["a"] = b"b"
    secret.type = ""
    got = protobuf.decode_object(envelope("v1", "Secret", secret), "Secret")
    assert got == {"kind": "Secret", "apiVersion": "v1", "metadata": {"name": "s"}, "data": {"a": "Yg=="}}
    admitted = admit(got)
    assert admitted["type"] == "Opaque" and base64.b64decode(admitted["data"]["a"]) == b"b"

    sa = new(f"{CORE}.ServiceAccount")
    go_zero_meta(sa.metadata, "sa")
    sa.automountServiceAccountToken = False
    assert protobuf.decode_object(envelope("v1", "ServiceAccount", sa), "ServiceAccount") == {
        "kind": "ServiceAccount", "apiVersion": "v1", "metadata": {"name": "sa"},
        "automountServiceAccountToken": False}


def test_pod_with_special_types_reads_like_its_json():
    pod = new(f"{CORE}.Pod")
    go_zero_meta(pod.metadata, "p")
    pod.metadata.labels["run"] = "p"
    pod.metadata.deletionGracePeriodSeconds = 0  # pointer: kept
    c = pod.spec.containers.add()
    c.name = "main"
    c.image = "busybox"
    c.command.extend(["sleep", "3"])
    c.stdin = False  # non-pointer zero: left out
    c.resources.limits["cpu"].string = "500m"
    c.resources.limits["memory"].string = "64Mi"
    port = c.ports.add()
    port.containerPort = 8080
    port.protocol = "TCP"
    probe = c.readinessProbe
    probe.handler.httpGet.port.type = 1  # ProbeHandler is inlined in JSON
    probe.handler.httpGet.port.strVal = "http"
    probe.initialDelaySeconds = 0
    c.securityContext.runAsUser = 0  # root, a value
    vol = pod.spec.volumes.add()
    vol.name = "cfg"
    vol.volumeSource.configMap.localObjectReference.name = "c"  # VolumeSource and the reference inlined too
    vol.volumeSource.configMap.defaultMode = 0o644
    pod.spec.restartPolicy = "Never"
    pod.spec.hostNetwork = False
    pod.spec.terminationGracePeriodSeconds = 0
    pod.spec.nodeSelector["disk"] = "ssd"
    got = protobuf.decode_object(envelope("v1", "Pod", pod), "Pod")
    assert got == {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {"name": "p", "labels": {"run": "p"}, "deletionGracePeriodSeconds": 0},
        "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3"],
                                 "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                                 "resources": {"limits": {"cpu": "500m", "memory": "64Mi"}},
                                 "readinessProbe": {"httpGet": {"port": "http"}},
                                 "securityContext": {"runAsUser": 0}}],
                 "volumes": [{"name": "cfg", "configMap": {"name": "c", "defaultMode": 0o644}}],
                 "restartPolicy": "Never", "terminationGracePeriodSeconds": 0, "nodeSelector": {"disk": "ssd"}}}
    assert admit(got)["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "500m"


def test_service_int_or_string_and_event_times():
    svc = new(f"{CORE}.Service")
    go_zero_meta(svc.metadata, "web")
    p = svc.spec.ports.add()
    p.name = "http"
    p.port = 80
    p.targetPort.type = 0
    p.targetPort.intVal = 8080
    svc.spec.selector["app"] = "web"
    svc.spec.type = "ClusterIP"
    assert protobuf.decode_object(envelope("v1", "Service", svc), "Service")["spec"] == {
        "ports": [{"name": "http", "port": 80, "targetPort": 8080}], "selector": {"app": "web"}, "type": "ClusterIP"}

    ev = new(f"{CORE}.Event")
    go_zero_meta(ev.metadata, "p.1", "default")
    ev.involvedObject.kind = "Pod"
    ev.involvedObject.name = "p"
    ev.involvedObject.uid = "u-1"
    ev.reason = "Started"
    ev.firstTimestamp.seconds = 1_700_000_000
    ev.eventTime.seconds = 1_700_000_000
    ev.eventTime.nanos = 123_456_000
    ev.count = 1
    got = protobuf.decode_object(envelope("v1", "Event", ev), "Event")
    assert got["firstTimestamp"] == "2023-11-14T22:13:20Z"
    assert got["eventTime"] == "2023-11-14T22:13:20.123456Z"
    assert got["involvedObject"] == {"kind": "Pod", "name": "p", "uid": "u-1"}
    assert "lastTimestamp" not in got


def test_deployment_replicas_zero_is_kept():
    d = new("k8s.io.api.apps.v1.Deployment")
    go_zero_meta(d.metadata, "d")
    d.spec.replicas = 0
    d.spec.minReadySeconds = 0
    assert protobuf.decode_object(envelope("apps/v1", "Deployment", d), "Deployment")["spec"] == {"replicas": 0}


@pytest.mark.parametrize("body, words", [
    (b'{"kind":"Namespace"}', "provided data does not appear to be a protobuf message, expected prefix"),
    (protobuf.MAGIC + b"\x0a\xff\xff", "the protobuf envelope cannot be decoded"),
    (None, 'Namespace in version "v1" cannot be handled as a Namespace'),
    ("gzip", 'unsupported contentEncoding'),
    ("nokind", "no kind \"Nope\" is registered for version \"v1\""),
])
def test_garbled_bodies_are_400s_naming_what_is_wrong(body, words):
    if body is None:
        body = envelope("v1", "Namespace", b"\x0a\x05ab")  # metadata claims 5 bytes, has 2
    elif body == "gzip":
        body = envelope("v1", "Namespace", new(f"{CORE}.Namespace"), encoding="gzip")
    elif body == "nokind":
        body = envelope("v1", "Nope", b"")
    with pytest.raises(BadRequest) as e:
        protobuf.decode_object(body, "Namespace")
    assert words in e.value.message


def test_go_duration_strings():
    assert [protobuf._go_duration(n) for n in (0, 1_500_000, 90 * 10**9, 3_723_500_000_000, -2 * 10**9)] == \
        ["0s", "1.5ms", "1m30s", "1h2m3.5s", "-2s"]


@pytest.fixture
async def api():
    store = Store(None, FakeClock(), admission=admit)
    runner, url = await serve(make_app(LocalClient(store), TOKEN))
    session = aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        yield SimpleNamespace(url=url, store=store, session=session)
    finally:
        await session.close()
        await runner.cleanup()


async def post(api, path: str, body: bytes) -> tuple[int, dict]:
    async with api.session.post(api.url + path, data=body,
                                headers={"Content-Type": protobuf.MEDIA_TYPE,
                                         "Accept": "application/vnd.kubernetes.protobuf, */*"}) as r:
        return r.status, json.loads(await r.text())


async def test_http_create_from_protobuf_goes_through_admission_and_answers_json(api):
    cm = new(f"{CORE}.ConfigMap")
    go_zero_meta(cm.metadata, "c")
    cm.data["a"] = "b"
    status, body = await post(api, "/api/v1/namespaces/default/configmaps?fieldManager=kubectl-create"
                                   "&fieldValidation=Strict", envelope("v1", "ConfigMap", cm))
    assert status == 201 and body["data"] == {"a": "b"} and body["metadata"]["namespace"] == "default"
    assert api.store.get("ConfigMap", "c", "default")["data"] == {"a": "b"}

    bad = new(f"{CORE}.ConfigMap")
    go_zero_meta(bad.metadata, "Bad_Name")
    status, body = await post(api, "/api/v1/namespaces/default/configmaps", envelope("v1", "ConfigMap", bad))
    assert status == 422 and body["reason"] == "Invalid" and "metadata.name" in body["message"]


async def test_http_garbled_protobuf_is_a_400_status_and_custom_resources_refuse_it(api):
    status, body = await post(api, "/api/v1/namespaces/default/configmaps", protobuf.MAGIC + b"\xff\xff\xff")
    assert status == 400 and body["kind"] == "Status" and body["reason"] == "BadRequest"
    status, body = await post(api, "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs", b"k8s\x00")
    assert status == 415 and body["reason"] == "UnsupportedMediaType"
    assert "application/vnd.kubernetes.protobuf" not in body["message"]
