"""The resource types Phalanx serves: one table shared by store, server and CLI.

Admission (defaulting + validation) for each kind lives in
``phalanx.api.admission``; this module only knows names.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ResourceType:
    kind: str
    api_version: str  # "v1" or "group/version"
    plural: str
    singular: str
    namespaced: bool = True
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    has_status: bool = True  # status written apart from spec (status subresource semantics)

    @property
    def group(self) -> str:
        return self.api_version.split("/")[0] if "/" in self.api_version else ""

    @property
    def version(self) -> str:
        return self.api_version.split("/")[-1]


RESOURCES: tuple[ResourceType, ...] = (
    ResourceType("Namespace", "v1", "namespaces", "namespace", namespaced=False, short_names=("ns",)),
    ResourceType("Node", "v1", "nodes", "node", namespaced=False, short_names=("no",)),
    ResourceType("Pod", "v1", "pods", "pod", short_names=("po",), categories=("all",)),
    ResourceType("Service", "v1", "services", "service", short_names=("svc",), categories=("all",)),
    ResourceType("Event", "v1", "events", "event", short_names=("ev",), has_status=False),
    ResourceType("PyTorchJob", "kubeflow.org/v1", "pytorchjobs", "pytorchjob", categories=("all", "kubeflow")),
    ResourceType("TFJob", "kubeflow.org/v1", "tfjobs", "tfjob", categories=("all", "kubeflow")),
    ResourceType("XGBoostJob", "kubeflow.org/v1", "xgboostjobs", "xgboostjob", categories=("all", "kubeflow")),
    ResourceType("PaddleJob", "kubeflow.org/v1", "paddlejobs", "paddlejob", categories=("all", "kubeflow")),
    ResourceType("JAXJob", "kubeflow.org/v1", "jaxjobs", "jaxjob", categories=("all", "kubeflow")),
    ResourceType("MPIJob", "kubeflow.org/v1", "mpijobs", "mpijob", categories=("all", "kubeflow")),
    # What an MPIJob's launcher reads (hostfile, rsh agent): kept as given, data only.
    ResourceType("ConfigMap", "v1", "configmaps", "configmap", short_names=("cm",), has_status=False),
    ResourceType("Secret", "v1", "secrets", "secret", has_status=False),
    # Volcano's PodGroup CRD has no status subresource: the scheduler writes the whole object.
    ResourceType("PodGroup", "scheduling.volcano.sh/v1beta1", "podgroups", "podgroup",
                 short_names=("pg", "podgroup-v1beta1"), has_status=False),
    ResourceType("Queue", "scheduling.volcano.sh/v1beta1", "queues", "queue", namespaced=False,
                 short_names=("q", "queue-v1beta1")),
    # Stored opaque (admission checks only apiVersion/kind and metadata; the rest is kept as
    # given, nothing acts on it): what `phalanx install | kubectl apply -f -` sends.
    ResourceType("ServiceAccount", "v1", "serviceaccounts", "serviceaccount", short_names=("sa",),
                 has_status=False),
    ResourceType("Deployment", "apps/v1", "deployments", "deployment", short_names=("deploy",),
                 categories=("all",)),
    ResourceType("ClusterRole", "rbac.authorization.k8s.io/v1", "clusterroles", "clusterrole", namespaced=False,
                 has_status=False),
    ResourceType("ClusterRoleBinding", "rbac.authorization.k8s.io/v1", "clusterrolebindings",
                 "clusterrolebinding", namespaced=False, has_status=False),
    ResourceType("Role", "rbac.authorization.k8s.io/v1", "roles", "role", has_status=False),
    ResourceType("RoleBinding", "rbac.authorization.k8s.io/v1", "rolebindings", "rolebinding", has_status=False),
    # Leader election (operator and scheduler with --leader-elect): holder and renew time, kept as given.
    ResourceType("Lease", "coordination.k8s.io/v1", "leases", "lease", has_status=False),
    # Pod priorities (phalanx.api.scheduling): a pod's spec.priority comes from its class.
    ResourceType("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", "priorityclass", namespaced=False,
                 short_names=("pc",), has_status=False),
    # The PyTorchJob's autoscaler (phalanx.api.autoscaling): the embedded cluster runs its algorithm.
    ResourceType("HorizontalPodAutoscaler", "autoscaling/v2", "horizontalpodautoscalers", "horizontalpodautoscaler",
                 short_names=("hpa",), categories=("all",)),
    # Dynamic admission: the webhooks `phalanx install` registers for the operator.
    ResourceType("ValidatingWebhookConfiguration", "admissionregistration.k8s.io/v1",
                 "validatingwebhookconfigurations", "validatingwebhookconfiguration", namespaced=False,
                 has_status=False),
    ResourceType("MutatingWebhookConfiguration", "admissionregistration.k8s.io/v1",
                 "mutatingwebhookconfigurations", "mutatingwebhookconfiguration", namespaced=False,
                 has_status=False),
    ResourceType("CustomResourceDefinition", "apiextensions.k8s.io/v1", "customresourcedefinitions",
                 "customresourcedefinition", namespaced=False, short_names=("crd", "crds")),
)
OPAQUE_KINDS = ("ServiceAccount", "Deployment", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
                "Lease", "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration",
                "CustomResourceDefinition")

_BY_KIND = {r.kind: r for r in RESOURCES}
JOB_KINDS = ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob")
# The kinds a kube-apiserver serves from CustomResourceDefinitions (`phalanx install`'s): a body
# must name its kind and apiVersion, where a built-in kind takes them from the URL.
CUSTOM_RESOURCE_KINDS = frozenset((*JOB_KINDS, "PodGroup", "Queue"))


def by_kind(kind: str) -> ResourceType:
    try:
        return _BY_KIND[kind]
    except KeyError:
        raise KeyError(f"unknown kind {kind!r}") from None


def lookup(name: str) -> ResourceType | None:
    """Resolve what a user types (kind, plural, singular, short name, any case,
    optionally ``plural.group``) to a resource type, like kubectl does."""
    n = name.strip().lower()
    group = None
    if "." in n:
        n, group = n.split(".", 1)
    for r in RESOURCES:
        if group and r.group != group and not r.group.startswith(group):
            continue
        if n in (r.kind.lower(), r.plural, r.singular) or n in r.short_names:
            return r
    return None


def all_kinds() -> list[str]:
    return [r.kind for r in RESOURCES]
