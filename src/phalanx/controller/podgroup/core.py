"""The pure podgroup-controller decision: (pod, served scheduler names) -> the
PodGroup a pod without one gets, and the group-name annotation it is given.

Volcano's pg-controller (pkg/controllers/podgroup, docs/REFERENCE.md A.1):
a pod whose schedulerName is served and that has no
``scheduling.k8s.io/group-name`` annotation gets a PodGroup of one:

- name ``podgroup-<uid>``: the uid of the pod's controller owner, or the
  pod's own uid when it has none (helpers.GeneratePodgroupName);
- ownerReferences: the pod's own when one of them is a controller, else a
  controller reference to the pod (newPGOwnerReferences), so the garbage
  collector deletes the group with the pod or with its owner;
- minMember 1; minResources the pod's effective requests (requests, limits
  where no request is given, the init-container peak, overhead), as
  CalTaskRequests × 1; the quota-only names Volcano's quota helper adds
  (``pods``, ``count/pods``, ``requests.*``, ``limits.*``) are left out, since
  the scheduler would take them for resources no node offers;
- queue from the pod annotation ``scheduling.volcano.sh/queue-name``, else
  unset (the PodGroup CRD defaults it to ``default``); priorityClassName
  copied; status phase Pending.

A pod being deleted, or gone, gets nothing: its group, if any, goes with it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from phalanx.api.constants import ANNOTATION_GROUP_NAME, ANNOTATION_QUEUE_NAME, PODGROUP_NAME_PREFIX, VOLCANO_VERSION
from phalanx.objects.meta import Obj, annotations_of, controller_uid, metadata_of, owner_ref, serves
from phalanx.objects.quantity import format_resource_list, pod_requests


@dataclass(frozen=True)
class GroupPlan:
    """What to do for one pod: make sure ``podgroup`` exists (create it; one
    already there is fine), then annotate the pod (``uid``) with its name."""

    podgroup: Obj
    pod_uid: str

    @property
    def group_name(self) -> str:
        return str(self.podgroup["metadata"]["name"])


def needs_group(pod: Obj | None, scheduler_names: frozenset[str]) -> bool:
    """The pod is one this controller makes a PodGroup for: it exists, is not
    being deleted, is for a served scheduler and names no group yet."""
    if not isinstance(pod, dict):
        return False
    meta = metadata_of(pod)
    if meta.get("deletionTimestamp"):
        return False
    uid = meta.get("uid")
    if not isinstance(uid, str) or not uid:
        return False
    spec = pod.get("spec")
    if not isinstance(spec, dict) or not serves(scheduler_names, spec.get("schedulerName")):
        return False
    return not annotations_of(pod).get(ANNOTATION_GROUP_NAME)


def group_name(pod: Obj) -> str:
    """``podgroup-<controller owner uid>``, or ``podgroup-<pod uid>`` without one."""
    uid = controller_uid(pod) or metadata_of(pod).get("uid")
    return f"{PODGROUP_NAME_PREFIX}{uid}"


def owner_references(pod: Obj) -> list[dict[str, Any]]:
    """The pod's references when one is a controller (the group lives as long as
    the pod's owner), else a controller reference to the pod itself."""
    refs = [r for r in metadata_of(pod).get("ownerReferences") or [] if isinstance(r, dict)]
    if any(r.get("controller") is True for r in refs):
        return [dict(r) for r in refs]
    # Listed pods may lack apiVersion and kind (Kubernetes list items do): a Pod is v1/Pod.
    return [owner_ref({"apiVersion": "v1", "kind": "Pod", "metadata": metadata_of(pod)})]


def build_podgroup(pod: Obj) -> Obj:
    """The PodGroup of one that Volcano builds for ``pod`` (buildPodGroupFromPod)."""
    meta = metadata_of(pod)
    given = pod.get("spec")
    spec: dict[str, Any] = given if isinstance(given, dict) else {}
    pg_spec: dict[str, Any] = {"minMember": 1, "minResources": format_resource_list(pod_requests(spec))}
    queue = annotations_of(pod).get(ANNOTATION_QUEUE_NAME)
    if isinstance(queue, str) and queue:
        pg_spec["queue"] = queue
    priority_class = spec.get("priorityClassName")
    if isinstance(priority_class, str) and priority_class:
        pg_spec["priorityClassName"] = priority_class
    return {
        "apiVersion": VOLCANO_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": group_name(pod), "namespace": meta.get("namespace") or "default",
                     "ownerReferences": owner_references(pod)},
        "spec": pg_spec,
        "status": {"phase": "Pending"},
    }


def decide(pod: Obj | None, scheduler_names: frozenset[str]) -> GroupPlan | None:
    """The plan for ``pod`` (None when it needs nothing). Idempotent: the same
    pod always gives the same group, and a pod that names one needs nothing.

    Raises ValueError when the pod's resources are malformed (admitted pods
    have none; the caller logs it and leaves the pod alone)."""
    if pod is None or not needs_group(pod, scheduler_names):
        return None
    return GroupPlan(podgroup=build_podgroup(pod), pod_uid=str(metadata_of(pod)["uid"]))
