"""scheduling.volcano.sh/v1beta1 PodGroup and Queue (docs/REFERENCE.md A.1, A.2).

Bounds that the Volcano CRDs declare (minMember >= 0, weight 1..65535,
priority >= 0) are checked in admission with the apiserver's wording, not
here, so that one error list names every bad field.
"""
from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import ConfigDict, Field

from phalanx.api.constants import DEFAULT_QUEUE, ROOT_QUEUE
from phalanx.api.meta import FreeDict, Int32, K8sModel, LabelSelector, ObjectMeta, ResourceList, Time
from phalanx.objects.errors import FieldError


class NetworkTopologySpec(K8sModel):
    mode: Literal["hard", "soft"] | None = None
    highest_tier_allowed: Int32 | None = None
    highest_tier_name: str | None = None


class SubGroupPolicy(K8sModel):
    name: str | None = None
    sub_group_size: Int32 | None = None
    min_sub_groups: Int32 | None = None
    label_selector: LabelSelector | None = None
    match_label_keys: list[str] | None = None
    network_topology: NetworkTopologySpec | None = None


class PodGroupSpec(K8sModel):
    min_member: Int32 | None = None
    min_task_member: dict[str, Int32] | None = None
    min_resources: ResourceList | None = None
    queue: str | None = None
    priority_class_name: str | None = None
    network_topology: NetworkTopologySpec | None = None
    sub_group_policy: list[SubGroupPolicy] | None = None


class PodGroupCondition(K8sModel):
    model_config = ConfigDict(extra="allow")

    type: str | None = None
    status: str | None = None
    transition_id: str | None = Field(default=None, alias="transitionID")
    last_transition_time: Time | None = None
    reason: str | None = None
    message: str | None = None


class PodGroupStatus(K8sModel):
    """For typed reading; PodGroups accept any ``status`` dict (the scheduler owns it)."""

    model_config = ConfigDict(extra="allow")

    phase: Literal["Pending", "Running", "Unknown", "Inqueue", "Completed"] | None = None
    conditions: list[PodGroupCondition] | None = None
    running: Int32 | None = None
    succeeded: Int32 | None = None
    failed: Int32 | None = None


class PodGroup(K8sModel):
    api_version: Literal["scheduling.volcano.sh/v1beta1"] = "scheduling.volcano.sh/v1beta1"
    kind: Literal["PodGroup"] = "PodGroup"
    metadata: ObjectMeta | None = None
    spec: PodGroupSpec | None = None
    status: dict[str, Any] | None = None


class Guarantee(K8sModel):
    resource: ResourceList | None = None


class NodeGroupAffinity(K8sModel):
    required_during_scheduling_ignored_during_execution: list[str] | None = None
    preferred_during_scheduling_ignored_during_execution: list[str] | None = None


class QueueAffinity(K8sModel):
    node_group_affinity: NodeGroupAffinity | None = None
    node_group_anti_affinity: NodeGroupAffinity | None = None


class Cluster(K8sModel):
    name: str | None = None
    weight: Int32 | None = None
    capacity: ResourceList | None = None


class QueueSpec(K8sModel):
    weight: Int32 | None = None
    capability: ResourceList | None = None
    reclaimable: bool | None = None
    guarantee: Guarantee | None = None
    deserved: ResourceList | None = None
    parent: str | None = None
    priority: Int32 | None = None
    dequeue_strategy: Literal["fifo", "traverse"] | None = None
    affinity: QueueAffinity | None = None
    type: str | None = None
    extend_clusters: list[Cluster] | None = None


class QueueStatus(K8sModel):
    """For typed reading; Queues accept any ``status`` dict (scheduler and
    queue controller own it)."""

    model_config = ConfigDict(extra="allow")

    state: Literal["Open", "Closed", "Closing", "Unknown"] | None = None
    allocated: ResourceList | None = None
    pending: Int32 | None = None
    running: Int32 | None = None
    inqueue: Int32 | None = None
    unknown: Int32 | None = None
    completed: Int32 | None = None
    reservation: FreeDict | None = None


class Queue(K8sModel):
    """Cluster-scoped."""

    api_version: Literal["scheduling.volcano.sh/v1beta1"] = "scheduling.volcano.sh/v1beta1"
    kind: Literal["Queue"] = "Queue"
    metadata: ObjectMeta | None = None
    spec: QueueSpec | None = None
    status: dict[str, Any] | None = None


# --- defaulting and validation -------------------------------------------------------

_NAME_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_NAME_RE = re.compile(_NAME_PATTERN[1:-1])


def default_podgroup(pg: dict[str, Any]) -> None:
    """The CRD defaults: queue "default", networkTopology mode "hard",
    subGroupPolicy subGroupSize 1 / minSubGroups 0."""
    spec = pg.setdefault("spec", {})
    if not spec.get("queue"):
        spec["queue"] = DEFAULT_QUEUE
    if spec.get("networkTopology") is not None:
        spec["networkTopology"].setdefault("mode", "hard")
    for sg in spec.get("subGroupPolicy") or []:
        sg.setdefault("subGroupSize", 1)
        sg.setdefault("minSubGroups", 0)
        if sg.get("networkTopology") is not None:
            sg["networkTopology"].setdefault("mode", "hard")


def default_queue(queue: dict[str, Any]) -> None:
    """weight 1 and dequeueStrategy traverse (CRD defaults), reclaimable true
    (nil means true in Volcano), parent root for every queue but root (what
    Volcano's queue controller patches in)."""
    spec = queue.setdefault("spec", {})
    spec.setdefault("weight", 1)
    spec.setdefault("reclaimable", True)
    spec.setdefault("dequeueStrategy", "traverse")
    name = (queue.get("metadata") or {}).get("name")
    if not spec.get("parent") and name != ROOT_QUEUE:
        spec["parent"] = ROOT_QUEUE


def _minimum(value: Any, path: str, minimum: int) -> list[FieldError]:
    if value is not None and value < minimum:
        return [FieldError(path, "Invalid", f"{path} in body should be greater than or equal to {minimum}", value)]
    return []


def _maximum(value: Any, path: str, maximum: int) -> list[FieldError]:
    if value is not None and value > maximum:
        return [FieldError(path, "Invalid", f"{path} in body should be less than or equal to {maximum}", value)]
    return []


def _pattern(value: Any, path: str) -> list[FieldError]:
    if value and not _NAME_RE.fullmatch(value):
        return [FieldError(path, "Invalid", f"{path} in body should match '{_NAME_PATTERN}'", value)]
    return []


def validate_podgroup(pg: dict[str, Any]) -> list[FieldError]:
    """The PodGroup CRD's bounds and patterns, with the apiserver's wording."""
    spec = pg.get("spec") or {}
    errs = _minimum(spec.get("minMember"), "spec.minMember", 0)
    for task in sorted(spec.get("minTaskMember") or {}):
        errs += _minimum(spec["minTaskMember"][task], f"spec.minTaskMember.{task}", 0)
    errs += _pattern(spec.get("queue"), "spec.queue")
    errs += _minimum((spec.get("networkTopology") or {}).get("highestTierAllowed"),
                     "spec.networkTopology.highestTierAllowed", 0)
    for i, sg in enumerate(spec.get("subGroupPolicy") or []):
        errs += _minimum(sg.get("subGroupSize"), f"spec.subGroupPolicy[{i}].subGroupSize", 1)
        errs += _minimum(sg.get("minSubGroups"), f"spec.subGroupPolicy[{i}].minSubGroups", 0)
    return errs


def validate_queue(queue: dict[str, Any]) -> list[FieldError]:
    """The Queue CRD's bounds: weight 1..65535, priority >= 0, parent a DNS
    subdomain; a queue cannot be its own parent."""
    spec = queue.get("spec") or {}
    errs = _minimum(spec.get("weight"), "spec.weight", 1) + _maximum(spec.get("weight"), "spec.weight", 65535)
    errs += _minimum(spec.get("priority"), "spec.priority", 0)
    errs += _pattern(spec.get("parent"), "spec.parent")
    name = (queue.get("metadata") or {}).get("name")
    if name and spec.get("parent") == name:
        errs.append(FieldError("spec.parent", "Invalid", "a queue cannot be its own parent", name))
    return errs
