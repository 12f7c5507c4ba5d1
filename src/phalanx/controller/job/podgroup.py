"""The job's Volcano PodGroup: desired shape, sync, and no pods before Volcano admits the gang.

Unlike the original, an existing PodGroup is updated only when its spec really
differs (no churn), and fields we do not own are kept.
"""
from __future__ import annotations

import copy

from phalanx.api.constants import ANNOTATION_LAST_APPLIED, DEFAULT_QUEUE, VOLCANO_VERSION
from phalanx.controller.fields import as_dict, as_int, as_list, as_str, namespace, owner_reference, scheduling_policy
from phalanx.controller.frameworks.base import Framework, replicas_of
from phalanx.objects.meta import Obj, annotations_of, name_of
from phalanx.objects.quantity import ExactResources, add_exact, format_exact_resources, same_resources

# PodGroup phases in which Volcano has not admitted the gang yet (DelayPodCreationDueToPodGroup).
NOT_ADMITTED = ("", "Pending")


def min_member(job: Obj, fw: Framework) -> int:
    v = as_int(scheduling_policy(job).get("minAvailable"))
    return v if v is not None and v >= 0 else fw.gang_size(job)


def min_resources(job: Obj, fw: Framework, members: int) -> dict[str, str]:
    """``CalcPGMinResources``: requests (limits where requests are absent) of the
    first ``members`` pods, walking replica types in the framework's fixed order
    (the original sorts by PriorityClass value; PriorityClass objects are not
    served here, so every value is 0 and the fixed order decides)."""
    total: ExactResources = {}
    counted = 0
    for _, rspec in fw.replica_specs(job):
        pod_spec = as_dict(as_dict(rspec.get("template")).get("spec"))
        containers = [c for c in as_list(pod_spec.get("containers")) if isinstance(c, dict)]
        for _ in range(replicas_of(rspec)):
            if counted >= members:
                return format_exact_resources(total)
            counted += 1
            for c in containers:
                res = as_dict(c.get("resources"))
                req = as_dict(res.get("requests"))
                add_exact(total, req if req else as_dict(res.get("limits")))
    return format_exact_resources(total)


def desired_spec(job: Obj, fw: Framework, existing: Obj | None) -> Obj:
    """``{minMember, queue, priorityClassName, minResources}`` as the original fills it."""
    sp = scheduling_policy(job)
    members = min_member(job, fw)
    queue = as_str(sp.get("queue")) or DEFAULT_QUEUE
    existing_queue = as_str(as_dict(as_dict(existing).get("spec")).get("queue"))
    if existing_queue:
        queue = existing_queue
    out: Obj = {"minMember": members, "queue": queue}
    priority = as_str(sp.get("priorityClass"))
    if priority:
        out["priorityClassName"] = priority
    resources = sp.get("minResources")
    if not isinstance(resources, dict):
        resources = min_resources(job, fw, members)
    if resources:
        out["minResources"] = dict(resources)
    return out


def new_podgroup(job: Obj, fw: Framework) -> Obj:
    """A PodGroup named after the job, owned by it, with the job's annotations
    (minus kubectl's last-applied, which describes the job, not the group)."""
    metadata: Obj = {"name": name_of(job), "namespace": namespace(job)}
    ann = {k: v for k, v in annotations_of(job).items() if k != ANNOTATION_LAST_APPLIED and isinstance(v, str)}
    if ann:
        metadata["annotations"] = ann
    metadata["ownerReferences"] = [owner_reference(job)]
    return {"apiVersion": VOLCANO_VERSION, "kind": "PodGroup", "metadata": metadata,
            "spec": desired_spec(job, fw, None)}


def spec_differs(existing: Obj, desired: Obj) -> bool:
    cur = as_dict(existing.get("spec"))
    for key in ("minMember", "queue"):
        if cur.get(key) != desired.get(key):
            return True
    if as_str(cur.get("priorityClassName")) != as_str(desired.get("priorityClassName")):
        return True
    return not same_resources(as_dict(cur.get("minResources")), as_dict(desired.get("minResources")))


def updated_podgroup(job: Obj, fw: Framework, existing: Obj) -> Obj | None:
    """The existing PodGroup with our spec fields replaced, or None if nothing differs."""
    desired = desired_spec(job, fw, existing)
    if not spec_differs(existing, desired):
        return None
    pg = copy.deepcopy(existing)
    spec = as_dict(pg.get("spec"))
    for key in ("minMember", "queue", "priorityClassName", "minResources"):
        if key in desired:
            spec[key] = desired[key]
        else:
            spec.pop(key, None)
    pg["spec"] = spec
    return pg


def admitted(podgroup: Obj | None) -> bool:
    """Pods may be created once Volcano has moved the group past Pending."""
    if podgroup is None:
        return False
    phase = as_str(as_dict(podgroup.get("status")).get("phase"))
    return phase not in NOT_ADMITTED
