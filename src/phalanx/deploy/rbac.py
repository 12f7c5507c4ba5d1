"""Least-privilege ClusterRoles for the operator and the scheduler.

Each rule is what the process's client calls need, nothing more (the
operator runs with ``--local-runtime=false`` in a cluster, so it never lists
Nodes):

- operator: the six job kinds get/list/watch/delete (TTL deletes the job;
  update only through ``/status``, so ``update``/``patch`` are on the status
  subresource), pods and Services get/list/watch/create/delete/patch (patch:
  adopting an orphan, and the pods' no-restart marks), PodGroups get/list/
  watch/create/update/delete/patch, Events create/patch; for MPIJobs, the
  launcher's ConfigMap (hostfile, rsh agent), ServiceAccount, Role and
  RoleBinding get/list/watch/create/update/delete/patch, and ``pods/exec`` create: the
  launcher's Role grants it, and Kubernetes lets a role be created only by
  someone who holds every permission it grants (pods get/list/watch are held
  already); for elastic PyTorchJobs with metrics, HorizontalPodAutoscalers
  get/list/watch/create/update/delete/patch;
- scheduler: Nodes get/list/watch, pods get/list/watch, ``pods/binding``
  create, ``pods/status`` update/patch (the PodScheduled condition),
  PodGroups get/list/watch/update (no status subresource: whole object),
  Queues get/list/watch/create (root and default) and ``queues/status``
  update, Events create/patch; for its podgroup controller (a PodGroup for
  each of its pods that has none), pods patch (the group-name annotation),
  PodGroups create and ``pods/finalizers`` update (the group's
  ownerReference to its pod blocks the pod's deletion, which
  OwnerReferencesPermissionEnforcement allows only to who may set the
  pod's finalizers; Volcano's controllers hold the same);
- both, in the install namespace only (a Role): Leases get/list/watch/create/
  update/patch for ``--leader-elect``, and Events create/patch for its
  "became leader" Events on the Lease.
- the operator's webhook certificate rotator: Secrets get/list/watch/create/
  update in its own namespace only (a Role), and the two webhook
  configuration kinds get/list/watch/update/patch (the caBundle); none of it
  with cert-manager, which writes both.
"""
from __future__ import annotations

from typing import Any

from phalanx.api.registry import JOB_KINDS, by_kind

READ = ["get", "list", "watch"]
OWNED = [*READ, "create", "update", "delete", "patch"]  # patch: adopting an orphan (controller/job/claim.py)
JOB_RESOURCES = [by_kind(k).plural for k in JOB_KINDS]

OPERATOR_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["kubeflow.org"], "resources": list(JOB_RESOURCES), "verbs": [*READ, "delete"]},
    {"apiGroups": ["kubeflow.org"], "resources": [f"{r}/status" for r in JOB_RESOURCES],
     "verbs": ["get", "update", "patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": [*READ, "create", "delete", "patch"]},
    {"apiGroups": [""], "resources": ["services"], "verbs": [*READ, "create", "delete", "patch"]},
    {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"],
     "verbs": [*READ, "create", "update", "delete", "patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
    # MPIJob: what the launcher needs, and what its Role grants.
    {"apiGroups": [""], "resources": ["configmaps", "serviceaccounts"], "verbs": list(OWNED)},
    {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles", "rolebindings"], "verbs": list(OWNED)},
    {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]},
    # An elastic PyTorchJob's HorizontalPodAutoscaler (controller/job/hpa.py), as the original's role.
    {"apiGroups": ["autoscaling"], "resources": ["horizontalpodautoscalers"], "verbs": list(OWNED)},
]

SCHEDULER_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": READ},
    {"apiGroups": [""], "resources": ["pods"], "verbs": [*READ, "patch", "delete"]},  # delete: evictions
    {"apiGroups": [""], "resources": ["pods/binding"], "verbs": ["create"]},
    {"apiGroups": [""], "resources": ["pods/status"], "verbs": ["update", "patch"]},
    {"apiGroups": [""], "resources": ["pods/finalizers"], "verbs": ["update"]},
    {"apiGroups": ["scheduling.volcano.sh"], "resources": ["podgroups"], "verbs": [*READ, "create", "update"]},
    {"apiGroups": ["scheduling.volcano.sh"], "resources": ["queues"], "verbs": [*READ, "create", "patch"]},
    {"apiGroups": ["scheduling.k8s.io"], "resources": ["priorityclasses"], "verbs": READ},
    {"apiGroups": ["scheduling.volcano.sh"], "resources": ["queues/status"], "verbs": ["update"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
]


# Leader election (``--leader-elect``), in the install namespace only: kubebuilder's leader-election-role.
LEADER_ELECTION_ROLE = "phalanx-leader-election"
LEADER_ELECTION_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
     "verbs": [*READ, "create", "update", "patch"]},
    {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]},
]


def leader_election_role(namespace: str, labels: dict[str, str]) -> dict[str, Any]:
    return role(LEADER_ELECTION_ROLE, namespace, LEADER_ELECTION_RULES, labels)


def leader_election_role_binding(namespace: str, service_accounts: list[str],
                                 labels: dict[str, str]) -> dict[str, Any]:
    binding = role_binding(LEADER_ELECTION_ROLE, LEADER_ELECTION_ROLE, service_accounts[0], namespace, labels)
    binding["subjects"] = [{"kind": "ServiceAccount", "name": sa, "namespace": namespace} for sa in service_accounts]
    return binding


# The webhook's certificate rotator (controller.webhook.rotator).
WEBHOOK_CONFIG_RULES: list[dict[str, Any]] = [
    {"apiGroups": ["admissionregistration.k8s.io"],
     "resources": ["validatingwebhookconfigurations", "mutatingwebhookconfigurations"],
     "verbs": [*READ, "update", "patch"]},
]
WEBHOOK_SECRET_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["secrets"], "verbs": [*READ, "create", "update"]},
]


def role(name: str, namespace: str, rules: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "rules": [dict(r) for r in rules]}


def role_binding(name: str, role_name: str, service_account: str, namespace: str,
                 labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name},
            "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}]}


def cluster_role(name: str, rules: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": name, "labels": dict(labels)}, "rules": [dict(r) for r in rules]}


def cluster_role_binding(name: str, role: str, service_account: str, namespace: str,
                         labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": dict(labels)},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": service_account, "namespace": namespace}]}
