"""Dynamic admission: which webhooks a request goes to (rules, scope, selectors), the shape of
their configurations, and the AdmissionReview exchange with a real HTTPS webhook server."""
from __future__ import annotations

import socket
import time

import pytest

from phalanx.api.admission import admit, plain_admit
from phalanx.api.registry import by_kind
from phalanx.api.webhookconfig import MUTATING, VALIDATING, webhooks_of
from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.objects.errors import Conflict, Invalid
from phalanx.server.webhookcall import InternalError, WebhookRejection
from phalanx.server.webhookmatch import Attributes, rules_match, selectors_match
from phalanx.server.webhooks import AdmittingClient
from phalanx.store.store import Store
from tests.scenarios.conftest import load_example
from tests.webhookserver import DENY_MESSAGE, SLOW_SECONDS, WebhookServer, configuration, hook

# ---------------------------------------------------------------- matching


def _hook(resources=("pods",), operations=("CREATE",), groups=("",), versions=("v1",), scope=None, **extra):
    rule = {"apiGroups": list(groups), "apiVersions": list(versions), "operations": list(operations),
            "resources": list(resources)}
    if scope:
        rule["scope"] = scope
    h = {"name": "h.phalanx.test", "clientConfig": {"url": "https://127.0.0.1:1/"}, "sideEffects": "None",
         "admissionReviewVersions": ["v1"], "rules": [rule], **extra}
    return webhooks_of(admit(configuration(VALIDATING, "c", [h])))[0]


def _attrs(kind="Pod", op="CREATE", ns="default", sub="", obj=None, old=None):
    return Attributes.of(by_kind(kind), op, ns, "x", subresource=sub, object=obj, old_object=old)


@pytest.mark.parametrize("resources,kind,sub,want", [
    (("pods",), "Pod", "", True),
    (("pods",), "Pod", "status", False),        # a subresource is not its main resource
    (("pods/status",), "Pod", "status", True),
    (("pods/status",), "Pod", "", False),
    (("pods/*",), "Pod", "binding", True),
    (("pods/*",), "Pod", "", True),  # "*" also matches no subresource, as in the apiserver
    (("*",), "Service", "", True),
    (("*",), "Pod", "status", False),
    (("*/status",), "Pod", "status", True),
    (("*/*",), "Pod", "binding", True),
    (("*/*",), "Pod", "", True),
    (("services",), "Pod", "", False),
])
def test_resources_and_subresources(resources, kind, sub, want):
    groups = ("*",)
    assert rules_match(_hook(resources, groups=groups), _attrs(kind, sub=sub)) is want


def test_operations_groups_and_versions():
    assert not rules_match(_hook(operations=("UPDATE",)), _attrs(op="CREATE"))
    assert rules_match(_hook(operations=("*",)), _attrs(op="DELETE"))
    assert not rules_match(_hook(("pytorchjobs",), groups=("",)), _attrs("PyTorchJob"))
    assert rules_match(_hook(("pytorchjobs",), groups=("kubeflow.org",)), _attrs("PyTorchJob"))
    assert not rules_match(_hook(("pytorchjobs",), groups=("kubeflow.org",), versions=("v2",)), _attrs("PyTorchJob"))
    assert rules_match(_hook(("*",), groups=("*",), versions=("*",)), _attrs("PodGroup"))


def test_scope_namespace_objects_are_cluster_scoped():
    assert rules_match(_hook(("*",), scope="Namespaced"), _attrs("Pod"))
    assert not rules_match(_hook(("*",), scope="Namespaced"), _attrs("Namespace", ns=None))
    assert not rules_match(_hook(("*",), scope="Namespaced"), _attrs("Node", ns=None))
    assert rules_match(_hook(("*",), scope="Cluster"), _attrs("Namespace", ns=None))
    assert not rules_match(_hook(("*",), scope="Cluster"), _attrs("Pod"))
    assert rules_match(_hook(("*",)), _attrs("Node", ns=None))


def test_webhook_configurations_are_never_sent_to_webhooks():
    h = _hook(("*",), groups=("*",), versions=("*",), operations=("*",))
    assert not rules_match(h, _attrs(VALIDATING, ns=None))
    assert not rules_match(h, _attrs(MUTATING, ns=None))


def test_selectors():
    sel = {"namespaceSelector": {"matchLabels": {"team": "a"}}}
    h = _hook(("*",), **sel)
    pod = {"metadata": {"labels": {"app": "x"}}}
    assert selectors_match(h, _attrs(obj=pod), {"team": "a"})
    assert not selectors_match(h, _attrs(obj=pod), {"team": "b"})
    # a cluster-scoped object (not a Namespace) is never exempted by a namespace selector
    assert selectors_match(h, _attrs("Node", ns=None, obj=pod), None)
    # a Namespace being created or updated is matched by its own labels
    ns_obj = {"metadata": {"name": "x", "labels": {"team": "a"}}}
    assert selectors_match(h, _attrs("Namespace", ns=None, obj=ns_obj), None)
    obj_sel = _hook(("*",), objectSelector={"matchExpressions": [{"key": "app", "operator": "In",
                                                                  "values": ["x"]}]})
    assert selectors_match(obj_sel, _attrs(obj=pod), None)
    assert not selectors_match(obj_sel, _attrs(obj={"metadata": {}}), None)
    # on update either the new or the old object may match
    assert selectors_match(obj_sel, _attrs(op="UPDATE", obj={"metadata": {}}, old=pod), None)


# ---------------------------------------------------------------- configuration shape


def _invalid(hooks, kind=VALIDATING) -> str:
    with pytest.raises(Invalid) as e:
        admit(configuration(kind, "cfg", hooks))
    return e.value.message


def test_configuration_errors_name_the_field_and_the_rule():
    base = hook("ok.phalanx.test", {"url": "https://127.0.0.1:1/x"})
    assert _invalid([{**base, "name": "short"}]) == (
        'ValidatingWebhookConfiguration.admissionregistration.k8s.io "cfg" is invalid: webhooks[0].name: Invalid '
        'value: "short": should be a domain with at least three segments separated by dots')
    assert "webhooks[1].name: Duplicate value: \"ok.phalanx.test\"" in _invalid([base, base])
    assert _invalid([{**base, "clientConfig": {"url": "http://127.0.0.1/"}}]).endswith(
        "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme")
    assert "webhooks[0].clientConfig: Required value: exactly one of url or service is required" in _invalid(
        [{**base, "clientConfig": {}}])
    assert "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds" in \
        _invalid([{**base, "timeoutSeconds": 31}])
    assert 'webhooks[0].failurePolicy: Unsupported value: "Never": supported values: "Fail", "Ignore"' in _invalid(
        [{**base, "failurePolicy": "Never"}])
    assert 'webhooks[0].sideEffects: Unsupported value: "Some": supported values: "None", "NoneOnDryRun"' in \
        _invalid([{**base, "sideEffects": "Some"}])
    rule = {**base["rules"][0], "resources": ["pods", "*/*"]}
    assert "webhooks[0].rules[0].resources: Invalid value: []string{\"pods\", \"*/*\"}: if '*/*' is present, must " \
           "not specify other resources" in _invalid([{**base, "rules": [rule]}])
    rule = {**base["rules"][0], "operations": ["CREATE", "PATCH"]}
    assert 'webhooks[0].rules[0].operations[1]: Unsupported value: "PATCH"' in _invalid([{**base, "rules": [rule]}])
    assert "webhooks[0].admissionReviewVersions: Invalid value: []string{\"v2\"}: must include at least one of v1, " \
           "v1beta1" in _invalid([{**base, "admissionReviewVersions": ["v2"]}])
    assert 'webhooks[0].reinvocationPolicy: Unsupported value: "Always"' in _invalid(
        [{**base, "reinvocationPolicy": "Always"}], MUTATING)


def test_configuration_defaults_as_the_apiserver():
    svc = {"service": {"namespace": "default", "name": "hook"}}
    out = admit(configuration(MUTATING, "cfg", [hook("d.phalanx.test", svc)]))["webhooks"][0]
    assert out["failurePolicy"] == "Fail" and out["matchPolicy"] == "Equivalent"
    assert out["timeoutSeconds"] == 10 and out["reinvocationPolicy"] == "Never"
    assert out["namespaceSelector"] == {} and out["objectSelector"] == {}
    assert out["rules"][0]["scope"] == "*" and out["clientConfig"]["service"]["port"] == 443


# ---------------------------------------------------------------- the exchange


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    s = WebhookServer(tmp_path_factory.mktemp("hooktls")).start()
    yield s
    s.stop()


@pytest.fixture
def store():
    s = Store(None, FakeClock(), admission=plain_admit)
    s.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default", "labels": {"team": "a"}}})
    yield s
    s.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def _client(store, server, hooks, kind=VALIDATING) -> AdmittingClient:
    local = LocalClient(store)
    for h in hooks:
        h.setdefault("clientConfig", {}).setdefault("caBundle", server.ca_bundle)
    await local.create(configuration(kind, f"cfg-{kind.lower()}", hooks))
    return AdmittingClient(local, plain_admit)


def _cm(case: str, name: str = "cm", **data: str) -> dict:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": {"case": case}},
            "data": data}


async def test_allowed_and_the_review_sent(store, server):
    c = await _client(store, server, [hook("allow.phalanx.test", {"url": server.url("/allow")}, case="allow")])
    before = len(server.reviews)
    await c.create(_cm("allow", a="1"))
    path, req = server.reviews[before]
    assert path == "/allow"
    assert req["operation"] == "CREATE" and req["namespace"] == "default" and req["name"] == "cm"
    assert req["kind"] == {"group": "", "version": "v1", "kind": "ConfigMap"}
    assert req["resource"] == {"group": "", "version": "v1", "resource": "configmaps"}
    assert req["object"]["data"] == {"a": "1"} and req["oldObject"] is None and req["dryRun"] is False
    assert req["options"]["kind"] == "CreateOptions"
    await c.create(_cm("other", name="cm2"))  # the object selector leaves it out
    assert len(server.reviews) == before + 1
    await c.close()


async def test_denied_with_the_webhooks_status(store, server):
    c = await _client(store, server, [hook("deny.phalanx.test", {"url": server.url("/deny")}, case="deny")])
    with pytest.raises(WebhookRejection) as e:
        await c.create(_cm("deny"))
    assert e.value.code == 403 and e.value.reason == "Forbidden"
    assert e.value.message == f'admission webhook "deny.phalanx.test" denied the request: {DENY_MESSAGE}'
    assert store.list("ConfigMap", "default")[0] == []
    await c.close()


async def test_mutated_on_create_and_on_patch_then_validated(store, server):
    local = LocalClient(store)
    await local.create(configuration(VALIDATING, "v", [
        hook("allow.phalanx.test", {"url": server.url("/allow"), "caBundle": server.ca_bundle}, case="mutate")]))
    c = await _client(store, server, [hook("mutate.phalanx.test", {"url": server.url("/mutate")}, case="mutate")],
                      MUTATING)
    before = len(server.reviews)
    out = await c.create(_cm("mutate"))
    assert out["metadata"]["labels"] == {"case": "mutate", "mutated": "yes"}
    # the validating webhook saw the mutated object
    assert server.reviews[before + 1][1]["object"]["metadata"]["labels"]["mutated"] == "yes"
    await local.patch("ConfigMap", "cm", "default", {"metadata": {"labels": {"mutated": None}}})
    out = await c.patch("ConfigMap", "cm", "default", {"data": {"b": "2"}})
    assert out["metadata"]["labels"]["mutated"] == "yes" and out["data"] == {"b": "2"}
    path, req = server.reviews[-2]
    assert path == "/mutate" and req["operation"] == "UPDATE" and "mutated" not in req["oldObject"]["metadata"][
        "labels"] and req["options"]["kind"] == "UpdateOptions"
    await c.close()


async def test_unreachable_fail_and_ignore(store, server):
    port = _closed_port()
    c = await _client(store, server, [
        hook("fail.phalanx.test", {"url": f"https://127.0.0.1:{port}/x"}, case="fail"),
        hook("ignore.phalanx.test", {"url": f"https://127.0.0.1:{port}/x"}, case="ignore", failurePolicy="Ignore")])
    with pytest.raises(InternalError) as e:
        await c.create(_cm("fail"))
    assert e.value.code == 500
    assert e.value.message == (
        f'Internal error occurred: failed calling webhook "fail.phalanx.test": failed to call webhook: Post '
        f'"https://127.0.0.1:{port}/x?timeout=10s": dial tcp 127.0.0.1:{port}: connect: connection refused')
    assert (await c.create(_cm("ignore")))["metadata"]["name"] == "cm"
    await c.close()


async def test_timeout(store, server):
    c = await _client(store, server, [hook("slow.phalanx.test", {"url": server.url("/slow")}, case="slow",
                                           timeoutSeconds=1)])
    t0 = time.monotonic()
    with pytest.raises(InternalError) as e:
        await c.create(_cm("slow"))
    assert time.monotonic() - t0 < SLOW_SECONDS
    assert e.value.message == (f'Internal error occurred: failed calling webhook "slow.phalanx.test": failed to call '
                               f'webhook: Post "{server.url("/slow")}?timeout=1s": context deadline exceeded')
    await c.close()


async def test_answer_for_another_request_is_a_failure(store, server):
    c = await _client(store, server, [hook("uid.phalanx.test", {"url": server.url("/bad-uid")}, case="uid")])
    with pytest.raises(InternalError) as e:
        await c.create(_cm("uid"))
    assert "received invalid webhook response: expected response.uid=" in e.value.message
    await c.close()


async def test_untrusted_certificate(store, server):
    c = await _client(store, server, [hook("ca.phalanx.test", {"url": server.url("/allow"), "caBundle": ""},
                                           case="ca")])
    with pytest.raises(InternalError) as e:
        await c.create(_cm("ca"))
    assert "tls: failed to verify certificate: x509: certificate signed by unknown authority" in e.value.message
    await c.close()


async def test_service_reference_is_its_target_port_on_loopback(store, server):
    c = await _client(store, server, [hook("svc.phalanx.test", {"service": {"namespace": "default", "name": "hook",
                                                                            "path": "/deny"}}, case="svc")])
    with pytest.raises(InternalError) as e:
        await c.create(_cm("svc"))
    assert e.value.message.endswith('Post "https://hook.default.svc:443/deny?timeout=10s": service "hook" not found')
    store.create({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "hook", "namespace": "default"},
                  "spec": {"ports": [{"port": 443, "targetPort": server.port}]}})
    with pytest.raises(WebhookRejection) as e2:
        await c.create(_cm("svc"))
    assert e2.value.message.startswith('admission webhook "svc.phalanx.test" denied the request')
    await c.close()


async def test_namespace_selector_reads_the_namespace(store, server):
    c = await _client(store, server, [hook("ns.phalanx.test", {"url": server.url("/deny")},
                                           namespaceSelector={"matchLabels": {"team": "b"}})])
    await c.create(_cm("x"))  # namespace default is team=a: not sent
    store.patch("Namespace", "default", None, {"metadata": {"labels": {"team": "b"}}})
    with pytest.raises(WebhookRejection):
        await c.create(_cm("x", name="cm2"))
    await c.close()


def _pod(name="p"):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox", "command": ["true"]}]}}


async def test_status_writes_go_only_to_status_webhooks(store, server):
    store.create(_pod())
    c = await _client(store, server, [
        hook("main.phalanx.test", {"url": server.url("/deny")}, resources=("pods",), operations=("UPDATE",))])
    pod = store.get("Pod", "p", "default")
    pod["status"] = {"phase": "Pending", "message": "one"}
    await c.update_status(pod)  # not sent to the pods webhook
    local = LocalClient(store)
    await local.create(configuration(VALIDATING, "status", [hook(
        "status.phalanx.test", {"url": server.url("/deny"), "caBundle": server.ca_bundle},
        resources=("pods/status",), operations=("UPDATE",))]))
    with pytest.raises(WebhookRejection) as e:
        await c.patch("Pod", "p", "default", {"status": {"message": "two"}}, "merge", "status")
    assert "status.phalanx.test" in e.value.message
    assert server.reviews[-1][1]["subResource"] == "status"
    await c.close()


async def test_delete_and_binding(store, server):
    store.create(_pod())
    c = await _client(store, server, [
        hook("delete.phalanx.test", {"url": server.url("/deny")}, resources=("pods",), operations=("DELETE",)),
        hook("bind.phalanx.test", {"url": server.url("/allow")}, resources=("pods/binding",))])
    with pytest.raises(WebhookRejection):
        await c.delete("Pod", "p", "default")
    assert server.reviews[-1][1]["oldObject"]["metadata"]["name"] == "p"
    await c.bind("default", "p", "node-1")
    path, req = server.reviews[-1]
    assert path == "/allow" and req["kind"]["kind"] == "Binding" and req["subResource"] == "binding"
    assert store.get("Pod", "p", "default")["spec"]["nodeName"] == "node-1"
    await c.close()


async def test_update_with_a_stale_resource_version_is_refused_before_the_call(store, server):
    store.create(_cm("allow"))
    c = await _client(store, server, [hook("allow.phalanx.test", {"url": server.url("/allow")}, case="allow")])
    stale = store.get("ConfigMap", "cm", "default")
    store.patch("ConfigMap", "cm", "default", {"data": {"x": "1"}})
    before = len(server.reviews)
    with pytest.raises(Conflict):
        await c.update(stale)
    assert len(server.reviews) == before
    await c.close()


def test_plain_admission_keeps_a_job_as_sent():
    job = load_example("pytorchjob.yaml")[0]
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2  # P4: only the operator's webhook refuses it
    out = plain_admit(job)
    assert out["spec"] == job["spec"]
    with pytest.raises(Exception, match=r"replicas: Forbidden: must be 1"):
        admit(job)
