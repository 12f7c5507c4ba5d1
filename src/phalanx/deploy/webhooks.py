"""The admission webhooks in `phalanx install`: the Validating- and
MutatingWebhookConfiguration, the Service, the certificate Secret (or cert-manager's
Issuer and Certificate), their RBAC, and the operator Deployment's port and cert volume.

Names, paths and rules are the original's (``validator.training-operator.kubeflow.org``
with ``validator.<kind>.training-operator.kubeflow.org``, CREATE and UPDATE,
``failurePolicy: Fail``); the defaulter (``defaulter.training-operator.kubeflow.org``) is
Phalanx's, so that defaults are stored and then validated on a cluster too (S1).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from phalanx.api.registry import by_kind
from phalanx.controller.webhook.review import (
    MUTATING_CONFIG_NAME,
    MUTATING_KINDS,
    VALIDATING_CONFIG_NAME,
    VALIDATING_KINDS,
    defaulter_name,
    mutate_path,
    validate_path,
    validator_name,
)
from phalanx.controller.webhook.rotator import DEFAULT_CERT_DIR, DEFAULT_SECRET_NAME, DEFAULT_SERVICE_NAME
from phalanx.controller.webhook.server import DEFAULT_PORT
from phalanx.deploy.rbac import WEBHOOK_CONFIG_RULES, WEBHOOK_SECRET_RULES, role, role_binding
from phalanx.objects.names import is_dns_label

Obj = dict[str, Any]
SERVICE_PORT = 443
CERT_VOLUME = "cert"
CERT_MANAGER_ISSUER = "phalanx-operator-selfsigned-issuer"
CERT_MANAGER_CERTIFICATE = "phalanx-operator-serving-cert"


@dataclass(frozen=True)
class WebhookInstall:
    cert_manager: bool = False  # cert-manager issues the certificate and injects the CA: no rotation
    url: str | None = None  # clientConfig.url base (an operator outside the cluster) instead of the Service
    service_name: str = DEFAULT_SERVICE_NAME
    secret_name: str = DEFAULT_SECRET_NAME

    def check(self) -> None:
        """Raise ValueError naming the option and the rule."""
        if self.url is not None:
            parts = urlsplit(self.url)
            if parts.scheme != "https" or not parts.hostname or parts.query or parts.fragment or \
                    parts.username or parts.password:
                raise ValueError(f"--webhook-url: must be an https:// URL with a host and no user, query or "
                                 f"fragment (the apiserver's rule for clientConfig.url), got {self.url!r}")
        for flag, value in (("--webhook-service-name", self.service_name),
                            ("--webhook-secret-name", self.secret_name)):
            if not is_dns_label(value):
                raise ValueError(f"{flag}: must be a DNS label (lowercase letters, digits, '-'), got {value!r}")


def webhook_cluster_rules(w: WebhookInstall | None) -> list[Obj]:
    """The operator ClusterRole's extra rules: the configurations' caBundle (rotation only)."""
    return copy.deepcopy(WEBHOOK_CONFIG_RULES) if w is not None and not w.cert_manager else []


def webhook_namespaced_rbac(w: WebhookInstall | None, service_account: str, namespace: str,
                            labels: dict[str, str]) -> list[Obj]:
    """A Role and RoleBinding for the certificate Secret, in the operator's namespace only."""
    if w is None or w.cert_manager:
        return []
    name = f"{service_account}-webhook-cert"
    return [role(name, namespace, WEBHOOK_SECRET_RULES, labels),
            role_binding(name, name, service_account, namespace, labels)]


def operator_args(w: WebhookInstall | None) -> list[str]:
    if w is None:
        return ["--disable-webhook"]
    args = ["--webhook-host=0.0.0.0", f"--webhook-server-port={DEFAULT_PORT}", f"--webhook-cert-dir={DEFAULT_CERT_DIR}",
            f"--webhook-service-name={w.service_name}", f"--webhook-secret-name={w.secret_name}"]
    return args + (["--no-enable-cert-rotation"] if w.cert_manager else [])


def operator_with_webhook(deployment: Obj, w: WebhookInstall | None) -> Obj:
    """The operator Deployment with the webhook's flags, container port and cert volume
    (an emptyDir the rotator writes: the root filesystem is read-only; cert-manager's
    Secret, read-only, with cert-manager)."""
    dep = copy.deepcopy(deployment)
    pod = dep["spec"]["template"]["spec"]
    container = pod["containers"][0]
    container["command"] = [*container["command"], *operator_args(w)]
    if w is None:
        return dep
    container.setdefault("ports", []).append({"name": "webhook-server", "containerPort": DEFAULT_PORT,
                                              "protocol": "TCP"})
    # readOnly only when true: the apiserver drops a false one, and a second apply would differ.
    mount: Obj = {"name": CERT_VOLUME, "mountPath": DEFAULT_CERT_DIR, **({"readOnly": True} if w.cert_manager else {})}
    container.setdefault("volumeMounts", []).append(mount)
    source: Obj = {"secret": {"secretName": w.secret_name, "defaultMode": 0o440}} if w.cert_manager \
        else {"emptyDir": {}}
    pod.setdefault("volumes", []).append({"name": CERT_VOLUME, **source})
    return dep


def _client_config(w: WebhookInstall, namespace: str, path: str) -> Obj:
    if w.url is not None:
        return {"url": w.url.rstrip("/") + path}
    return {"service": {"namespace": namespace, "name": w.service_name, "path": path, "port": SERVICE_PORT}}


def _rules(kind: str) -> list[Obj]:
    rt = by_kind(kind)
    return [{"apiGroups": [rt.group], "apiVersions": [rt.version], "operations": ["CREATE", "UPDATE"],
             "resources": [rt.plural], "scope": "Namespaced"}]


def _hook(name: str, kind: str, client_config: Obj) -> Obj:
    # Every field the apiserver would default is written out: a second `kubectl apply` is then
    # "unchanged" (rules is an atomic list: a defaulted scope would make each apply replace it).
    return {"name": name, "admissionReviewVersions": ["v1"], "clientConfig": client_config,
            "failurePolicy": "Fail", "sideEffects": "None", "matchPolicy": "Equivalent",
            "namespaceSelector": {}, "objectSelector": {}, "timeoutSeconds": 10, "rules": _rules(kind)}


def webhook_configurations(w: WebhookInstall, namespace: str, labels: dict[str, str]) -> list[Obj]:
    meta_extra: Obj = {}
    if w.cert_manager:
        meta_extra = {"annotations": {"cert-manager.io/inject-ca-from": f"{namespace}/{CERT_MANAGER_CERTIFICATE}"}}
    mutating = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                "metadata": {"name": MUTATING_CONFIG_NAME, "labels": dict(labels), **copy.deepcopy(meta_extra)},
                "webhooks": [{**_hook(defaulter_name(k), k, _client_config(w, namespace, mutate_path(k))),
                              "reinvocationPolicy": "IfNeeded"} for k in MUTATING_KINDS]}
    validating = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                  "metadata": {"name": VALIDATING_CONFIG_NAME, "labels": dict(labels), **copy.deepcopy(meta_extra)},
                  "webhooks": [_hook(validator_name(k), k, _client_config(w, namespace, validate_path(k)))
                               for k in VALIDATING_KINDS]}
    return [mutating, validating]


def webhook_objects(w: WebhookInstall | None, namespace: str, labels: dict[str, str]) -> list[Obj]:
    """The Service, the certificate's Secret or cert-manager objects, then the two
    configurations (last: they refuse jobs until the operator answers)."""
    if w is None:
        return []
    objs: list[Obj] = [{
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": w.service_name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"selector": {"app.kubernetes.io/name": "phalanx-operator"},
                 "ports": [{"name": "webhook", "port": SERVICE_PORT, "targetPort": DEFAULT_PORT, "protocol": "TCP"}]},
    }]
    if w.cert_manager:
        svc = f"{w.service_name}.{namespace}.svc"
        objs += [
            {"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
             "metadata": {"name": CERT_MANAGER_ISSUER, "namespace": namespace, "labels": dict(labels)},
             "spec": {"selfSigned": {}}},
            {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
             "metadata": {"name": CERT_MANAGER_CERTIFICATE, "namespace": namespace, "labels": dict(labels)},
             "spec": {"dnsNames": [svc, f"{svc}.cluster.local"], "secretName": w.secret_name,
                      "issuerRef": {"kind": "Issuer", "name": CERT_MANAGER_ISSUER}}},
        ]
    else:  # filled by the operator's rotator; an apply that finds it keeps its data
        objs.append({"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                     "metadata": {"name": w.secret_name, "namespace": namespace, "labels": dict(labels)}})
    return objs + webhook_configurations(w, namespace, labels)
