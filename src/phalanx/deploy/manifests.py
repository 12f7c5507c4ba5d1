"""Everything a cluster needs for Phalanx, as objects in apply order.

``phalanx install`` prints them (``| kubectl apply -f -``) or applies them.
Two gang options:

- ``scheduler=True`` (default, no Volcano on the cluster): the Volcano CRDs
  (PodGroup, Queue) and ``phalanx scheduler`` as a secondary scheduler named
  ``scheduler_name``; the operator gives its pods that schedulerName.
- ``scheduler=False`` (Volcano installed): Volcano provides the PodGroup and
  Queue CRDs and schedules; only the Kubeflow CRDs and the operator are added
  (``volcano_crds=True`` adds the Volcano CRDs anyway).

Each program serves ``/metrics`` on its container port ``metrics`` (a Service
per program, port ``metrics``, labelled ``app.kubernetes.io/component:
metrics`` for a ServiceMonitor) and ``/healthz`` ``/readyz`` on its port
``healthz`` (the liveness and readiness probes); the ``phalanx-metrics-reader``
ClusterRole grants ``get`` on ``/metrics`` (kubebuilder's metrics-reader).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from phalanx import __version__
from phalanx.deploy.crds import KUBEFLOW_CRD_KINDS, VOLCANO_CRD_KINDS, crd
from phalanx.deploy.rbac import (
    OPERATOR_RULES,
    SCHEDULER_RULES,
    cluster_role,
    cluster_role_binding,
    leader_election_role,
    leader_election_role_binding,
)
from phalanx.deploy.webhooks import (
    WebhookInstall,
    operator_with_webhook,
    webhook_cluster_rules,
    webhook_namespaced_rbac,
    webhook_objects,
)
from phalanx.objects.names import is_dns_label
from phalanx.scheduler.conffile import (
    CONF_FILE_NAME,
    CONF_MOUNT_PATH,
    CONFIGMAP_NAME,
    parse_scheduler_conf,
    render_scheduler_conf,
)
from phalanx.scheduler.config import SchedulerConfig

DEFAULT_IMAGE = f"ghcr.io/phalanx-dev/phalanx:{__version__}"
DEFAULT_NAMESPACE = "phalanx-system"
LABELS = {"app.kubernetes.io/part-of": "phalanx"}


@dataclass(frozen=True)
class InstallOptions:
    namespace: str = DEFAULT_NAMESPACE
    image: str = DEFAULT_IMAGE
    image_pull_policy: str = "IfNotPresent"
    scheduler: bool = True
    scheduler_name: str = "volcano"
    volcano_crds: bool | None = None  # None: with the scheduler
    operator_args: tuple[str, ...] = ()
    webhook: WebhookInstall | None = WebhookInstall()  # None: no admission webhooks
    scheduler_conf: str | None = None  # a volcano-scheduler.conf's text; None: Phalanx's default rendered

    def check(self) -> None:
        """Raise ValueError naming the option and the rule."""
        if self.webhook is not None:
            self.webhook.check()
        if not is_dns_label(self.namespace):
            raise ValueError(f"--namespace: must be a DNS label (lowercase letters, digits, '-'), "
                             f"got {self.namespace!r}")
        if not self.image or any(c.isspace() for c in self.image):
            raise ValueError(f"--image: must be a non-empty image reference without spaces, got {self.image!r}")
        if self.image_pull_policy not in ("Always", "IfNotPresent", "Never"):
            raise ValueError(f'--image-pull-policy: unsupported value "{self.image_pull_policy}": supported '
                             'values: "Always", "IfNotPresent", "Never"')
        if not self.scheduler_name or any(c.isspace() for c in self.scheduler_name):
            raise ValueError(f"--scheduler-name: must be non-empty without spaces, got {self.scheduler_name!r}")
        if self.scheduler_conf is not None:
            parse_scheduler_conf(self.scheduler_conf, f"--scheduler-conf: {CONF_FILE_NAME}")


def _deployment(name: str, namespace: str, image: str, pull: str, args: list[str]) -> dict[str, Any]:
    labels = {"app.kubernetes.io/name": name, **LABELS}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "replicas": 2,  # --leader-elect: one acts, the other takes over
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": name,
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65532,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "containers": [{
                        "name": name, "image": image, "imagePullPolicy": pull,
                        "command": ["phalanx", *args],
                        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"},
                                      "limits": {"cpu": "1", "memory": "512Mi"}},
                        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}},
                        # The image's HOME and PHALANX_HOME: the only writable place on a read-only root.
                        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"}],
                    }],
                    "volumes": [{"name": "tmp", "emptyDir": {}}],
                },
            },
        },
    }


def install_objects(opts: InstallOptions | None = None) -> list[dict[str, Any]]:
    """CRDs, Namespace, ServiceAccounts, ClusterRoles and bindings, the leader-election Role and
    binding, Deployments, then the admission webhooks' Service, Secret and configurations
    (``deploy.webhooks``)."""
    o = opts or InstallOptions()
    o.check()
    ns = o.namespace
    volcano_crds = o.scheduler if o.volcano_crds is None else o.volcano_crds
    objs: list[dict[str, Any]] = [crd(k) for k in KUBEFLOW_CRD_KINDS]
    if volcano_crds:
        objs += [crd(k) for k in VOLCANO_CRD_KINDS]
    objs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": dict(LABELS)}})
    parts = [("phalanx-operator", OPERATOR_RULES,
              ["operator", "--in-cluster", "--local-runtime=false", f"--gang-scheduler-name={o.scheduler_name}",
               "--leader-elect", *ops_args("phalanx-operator"), *o.operator_args])]
    if o.scheduler:
        parts.append(("phalanx-scheduler", SCHEDULER_RULES,
                      ["scheduler", "--in-cluster", f"--scheduler-name={o.scheduler_name}", "--leader-elect",
                       f"--scheduler-conf={CONF_MOUNT_PATH}/{CONF_FILE_NAME}", *ops_args("phalanx-scheduler")]))
    for name, _, _ in parts:
        objs.append({"apiVersion": "v1", "kind": "ServiceAccount",
                     "metadata": {"name": name, "namespace": ns, "labels": dict(LABELS)}})
    for name, rules, _ in parts:
        role_rules = rules + webhook_cluster_rules(o.webhook) if name == "phalanx-operator" else rules
        objs.append(cluster_role(name, role_rules, LABELS))
        objs.append(cluster_role_binding(name, name, name, ns, LABELS))
    objs.append(leader_election_role(ns, LABELS))
    objs.append(leader_election_role_binding(ns, [name for name, _, _ in parts], LABELS))
    objs += webhook_namespaced_rbac(o.webhook, "phalanx-operator", ns, LABELS)
    if o.scheduler:
        objs.append(scheduler_configmap(o, ns))
    for name, _, args in parts:
        dep = with_ops_endpoints(_deployment(name, ns, o.image, o.image_pull_policy, args), name)
        if name == "phalanx-scheduler":
            dep = with_scheduler_conf(dep)
        objs.append(operator_with_webhook(dep, o.webhook) if name == "phalanx-operator" else dep)
    objs += monitoring_objects([name for name, _, _ in parts], ns)
    objs += webhook_objects(o.webhook, ns, LABELS)
    return objs


# ---- the scheduler's configuration, as Volcano ships it ----------------------------------

def scheduler_configmap(o: InstallOptions, namespace: str) -> dict[str, Any]:
    """Volcano's ``volcano-scheduler-configmap`` with its one key ``volcano-scheduler.conf``."""
    text = o.scheduler_conf if o.scheduler_conf is not None else render_scheduler_conf(SchedulerConfig())
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CONFIGMAP_NAME, "namespace": namespace, "labels": dict(LABELS)},
            "data": {CONF_FILE_NAME: text}}


def with_scheduler_conf(deployment: dict[str, Any]) -> dict[str, Any]:
    """The ConfigMap mounted where Volcano mounts it (the scheduler reads it at start: restart it to apply)."""
    pod = deployment["spec"]["template"]["spec"]
    pod["volumes"].append({"name": "scheduler-config", "configMap": {"name": CONFIGMAP_NAME}})
    pod["containers"][0]["volumeMounts"].append({"name": "scheduler-config", "mountPath": CONF_MOUNT_PATH,
                                                 "readOnly": True})
    return deployment


# ---- metrics and probes -----------------------------------------------------------------

# program -> (metrics flag, metrics port, probe flag, probe port): the originals' flags and default ports
OPS_PORTS = {
    "phalanx-operator": ("--metrics-bind-address", 8080, "--health-probe-bind-address", 8081),
    "phalanx-scheduler": ("--listen-address", 8080, "--healthz-address", 11251),
}
METRICS_READER = "phalanx-metrics-reader"


def ops_args(name: str) -> list[str]:
    """In a pod the programs listen on every interface (by hand they default to loopback)."""
    mflag, mport, hflag, hport = OPS_PORTS[name]
    return [f"{mflag}=:{mport}", f"{hflag}=:{hport}"]


def with_ops_endpoints(deployment: dict[str, Any], name: str) -> dict[str, Any]:
    """The container ports ``metrics`` and ``healthz``, and the probes on ``healthz`` (kubebuilder's timings)."""
    _, mport, _, hport = OPS_PORTS[name]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["ports"] = [{"name": "metrics", "containerPort": mport, "protocol": "TCP"},
                          {"name": "healthz", "containerPort": hport, "protocol": "TCP"}]
    container["livenessProbe"] = {"httpGet": {"path": "/healthz", "port": "healthz"},
                                  "initialDelaySeconds": 15, "periodSeconds": 20}
    container["readinessProbe"] = {"httpGet": {"path": "/readyz", "port": "healthz"},
                                   "initialDelaySeconds": 5, "periodSeconds": 10}
    return deployment


def monitoring_objects(names: list[str], namespace: str) -> list[dict[str, Any]]:
    """A metrics Service per program and the ClusterRole a Prometheus needs to scrape them."""
    objs: list[dict[str, Any]] = []
    for name in names:
        labels = {"app.kubernetes.io/name": name, "app.kubernetes.io/component": "metrics", **LABELS}
        objs.append({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": f"{name}-metrics", "namespace": namespace, "labels": labels},
            "spec": {"selector": {"app.kubernetes.io/name": name},
                     "ports": [{"name": "metrics", "port": OPS_PORTS[name][1], "targetPort": "metrics",
                                "protocol": "TCP"}]},
        })
    objs.append(cluster_role(METRICS_READER, [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}], LABELS))
    return objs


def to_yaml(objs: list[dict[str, Any]]) -> str:
    """A multi-document YAML stream, as ``kubectl apply -f -`` reads it."""
    return "".join("---\n" + yaml.safe_dump(o, sort_keys=False, width=120) for o in objs)
