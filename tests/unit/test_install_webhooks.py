"""`phalanx install`'s admission webhooks (deploy.webhooks): the configurations with the
original's names, paths and rules, the Service, the Secret, RBAC, the operator's port and
cert volume, and the cert-manager and --webhook-url options."""
from __future__ import annotations

import pytest
import yaml

from phalanx.api.admission import admit
from phalanx.deploy.manifests import InstallOptions, install_objects, to_yaml
from phalanx.deploy.webhooks import WebhookInstall

KINDS = {"pytorchjob": "pytorchjobs", "tfjob": "tfjobs", "xgboostjob": "xgboostjobs", "paddlejob": "paddlejobs",
         "jaxjob": "jaxjobs"}


def by(objs, kind, name=None):
    found = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, [o["metadata"]["name"] for o in objs if o["kind"] == kind])
    return found[0]


def test_validating_configuration_is_the_originals():
    objs = install_objects()
    vwc = by(objs, "ValidatingWebhookConfiguration", "validator.training-operator.kubeflow.org")
    assert [h["name"] for h in vwc["webhooks"]] == [f"validator.{k}.training-operator.kubeflow.org" for k in KINDS]
    for hook, (kind, plural) in zip(vwc["webhooks"], KINDS.items()):
        assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["rules"] == [{"apiGroups": ["kubeflow.org"], "apiVersions": ["v1"],
                                  "operations": ["CREATE", "UPDATE"], "resources": [plural], "scope": "Namespaced"}]
        # What the apiserver would default is written out, so a second apply changes nothing.
        assert admit(vwc)["webhooks"] == vwc["webhooks"]
        assert hook["clientConfig"] == {"service": {"namespace": "phalanx-system", "name": "phalanx-operator-webhook",
                                                    "path": f"/validate-kubeflow-org-v1-{kind}", "port": 443}}
    mwc = by(objs, "MutatingWebhookConfiguration", "defaulter.training-operator.kubeflow.org")
    assert [h["name"] for h in mwc["webhooks"]] == [
        f"defaulter.{k}.training-operator.kubeflow.org" for k in (*KINDS, "mpijob")]
    assert mwc["webhooks"][-1]["clientConfig"]["service"]["path"] == "/mutate-kubeflow-org-v1-mpijob"
    assert mwc["webhooks"][-1]["rules"][0]["resources"] == ["mpijobs"]
    # The configurations come last: they refuse jobs until the operator answers.
    assert [o["kind"] for o in objs[-2:]] == ["MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"]


def test_service_secret_and_operator_deployment():
    objs = install_objects()
    svc = by(objs, "Service", "phalanx-operator-webhook")
    assert svc["metadata"]["namespace"] == "phalanx-system"
    assert svc["spec"]["selector"] == {"app.kubernetes.io/name": "phalanx-operator"}
    assert svc["spec"]["ports"] == [{"name": "webhook", "port": 443, "targetPort": 9443, "protocol": "TCP"}]
    secret = by(objs, "Secret", "phalanx-operator-webhook-cert")
    assert "data" not in secret and secret["type"] == "Opaque"
    dep = by(objs, "Deployment", "phalanx-operator")
    pod = dep["spec"]["template"]["spec"]
    c = pod["containers"][0]
    assert c["command"][-5:] == ["--webhook-host=0.0.0.0", "--webhook-server-port=9443",
                                 "--webhook-cert-dir=/tmp/k8s-webhook-server/serving-certs",
                                 "--webhook-service-name=phalanx-operator-webhook",
                                 "--webhook-secret-name=phalanx-operator-webhook-cert"]
    assert {"name": "webhook-server", "containerPort": 9443, "protocol": "TCP"} in c["ports"]
    assert c["volumeMounts"] == [{"name": "tmp", "mountPath": "/tmp"},
                                 {"name": "cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs"}]
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {}}, {"name": "cert", "emptyDir": {}}]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True  # hence the emptyDirs
    sched = by(objs, "Deployment", "phalanx-scheduler")
    assert sched["spec"]["template"]["spec"]["volumes"] == [  # no webhook certificate: its configuration only
        {"name": "tmp", "emptyDir": {}}, {"name": "scheduler-config", "configMap": {"name": "volcano-scheduler-configmap"}}]


def test_rbac_for_the_rotator():
    objs = install_objects()
    cr = by(objs, "ClusterRole", "phalanx-operator")
    assert {"apiGroups": ["admissionregistration.k8s.io"],
            "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
            "verbs": ["get", "list", "watch", "update", "patch"]} in cr["rules"]
    assert not any("secrets" in r["resources"] for r in cr["rules"])  # Secrets: its namespace only
    role = by(objs, "Role", "phalanx-operator-webhook-cert")
    assert role["metadata"]["namespace"] == "phalanx-system"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["secrets"],
                              "verbs": ["get", "list", "watch", "create", "update"]}]
    rb = by(objs, "RoleBinding", "phalanx-operator-webhook-cert")
    assert rb["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                             "name": "phalanx-operator-webhook-cert"}
    assert rb["subjects"] == [{"kind": "ServiceAccount", "name": "phalanx-operator", "namespace": "phalanx-system"}]
    sched = by(objs, "ClusterRole", "phalanx-scheduler")
    assert not any("admissionregistration.k8s.io" in r["apiGroups"] for r in sched["rules"])


def test_cert_manager_option():
    objs = install_objects(InstallOptions(webhook=WebhookInstall(cert_manager=True)))
    issuer = by(objs, "Issuer")
    assert issuer["apiVersion"] == "cert-manager.io/v1" and issuer["spec"] == {"selfSigned": {}}
    cert = by(objs, "Certificate")
    assert cert["spec"]["secretName"] == "phalanx-operator-webhook-cert"
    assert cert["spec"]["dnsNames"] == ["phalanx-operator-webhook.phalanx-system.svc",
                                        "phalanx-operator-webhook.phalanx-system.svc.cluster.local"]
    assert cert["spec"]["issuerRef"] == {"kind": "Issuer", "name": issuer["metadata"]["name"]}
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        assert by(objs, kind)["metadata"]["annotations"] == {
            "cert-manager.io/inject-ca-from": f"phalanx-system/{cert['metadata']['name']}"}
    assert not [o for o in objs if o["kind"] in ("Secret", "Role", "RoleBinding")
                and o["metadata"]["name"] != "phalanx-leader-election"]
    assert not any("admissionregistration.k8s.io" in r["apiGroups"] for r in by(objs, "ClusterRole",
                                                                                 "phalanx-operator")["rules"])
    dep = by(objs, "Deployment", "phalanx-operator")
    pod = dep["spec"]["template"]["spec"]
    assert pod["containers"][0]["command"][-1] == "--no-enable-cert-rotation"
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {}},
                              {"name": "cert", "secret": {"secretName": "phalanx-operator-webhook-cert",
                                                          "defaultMode": 0o440}}]
    assert pod["containers"][0]["volumeMounts"][1]["readOnly"] is True


def test_webhook_url_option():
    objs = install_objects(InstallOptions(webhook=WebhookInstall(url="https://127.0.0.1:9443/")))
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for hook in by(objs, kind)["webhooks"]:
            assert list(hook["clientConfig"]) == ["url"]
            assert hook["clientConfig"]["url"].startswith("https://127.0.0.1:9443/")
    assert by(objs, "ValidatingWebhookConfiguration")["webhooks"][0]["clientConfig"]["url"] == \
        "https://127.0.0.1:9443/validate-kubeflow-org-v1-pytorchjob"


@pytest.mark.parametrize("url", ["http://127.0.0.1:9443", "https://", "https://h/?x=1", "https://h/#f",
                                 "https://u:p@h/", "127.0.0.1:9443"])
def test_bad_webhook_url_is_refused(url):
    with pytest.raises(ValueError) as e:
        install_objects(InstallOptions(webhook=WebhookInstall(url=url)))
    assert "--webhook-url" in str(e.value)


def test_no_webhooks_option():
    objs = install_objects(InstallOptions(webhook=None))
    assert not [o for o in objs if o["kind"] in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
                                                 "Secret", "Service", "Role")
                and o["metadata"]["name"] != "phalanx-leader-election"
                and not o["metadata"]["name"].endswith("-metrics")]
    assert by(objs, "Deployment", "phalanx-operator")["spec"]["template"]["spec"]["containers"][0]["command"][-1] \
        == "--disable-webhook"


def test_webhook_objects_pass_admission_and_round_trip():
    for opts in (InstallOptions(), InstallOptions(webhook=WebhookInstall(url="https://127.0.0.1:9443"))):
        objs = install_objects(opts)
        for o in objs:
            admit(o)
        assert [d for d in yaml.safe_load_all(to_yaml(objs)) if d] == objs
