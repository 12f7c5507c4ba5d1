"""The elastic PyTorchJob's HorizontalPodAutoscaler, as training-operator v1.9's ReconcileHPA makes it.

Only a job with ``elasticPolicy.metrics`` has one (docs/REFERENCE.md §4.6): an autoscaling/v2 HPA named
after the job, in its namespace, controlled by it, targeting the job's scale subresource (its Worker
replicas) with ``elasticPolicy``'s bounds and metrics. Each round, before the job's own, the HPA of the
job's name is created when missing (not while the job is suspended), deleted while the job is suspended,
and replaced by the wanted one when its spec differs (compared as Go's semantic equality: quantities by
value). ``plan_hpa`` decides (pure), ``reconcile_hpa`` writes; a failed write fails the round, which is
retried with back-off, as the original returns the error before reconciling the job.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Callable

from phalanx.api.autoscaling import API_VERSION, KIND, canonical_quantity
from phalanx.client.interface import Client
from phalanx.controller.fields import as_dict, as_int, as_str, namespace, owner_reference, run_policy, spec
from phalanx.controller.frameworks import Framework
from phalanx.controller.job.core import MANAGED_BY_US, with_defaults
from phalanx.controller.job.plan import ReconcileOptions
from phalanx.objects.errors import AlreadyExists, NotFound
from phalanx.objects.meta import Obj, metadata_of, name_of

HPA_KIND = KIND
Lookup = Callable[[str, str, str], "Obj | None"]  # (kind, namespace, name) -> the cached object


@dataclass(frozen=True)
class HpaAction:
    """What one round does to the job's HPA: at most one of create, update (the whole object), delete."""

    create: Obj | None = None
    update: Obj | None = None
    delete: Obj | None = None  # the HPA to delete


def desired_hpa(job: Obj, kind: str) -> Obj | None:
    """The HPA ``job`` wants (``desiredHPA``), or None: no elasticPolicy, no metrics, or no maxReplicas
    even after the defaults (the original dereferences it and fails)."""
    raw = spec(job).get("elasticPolicy")
    if not isinstance(raw, dict) or raw.get("metrics") is None:
        return None  # the defaults never add an elasticPolicy or its metrics: no copy to default
    job = with_defaults(job, kind)
    ep = spec(job).get("elasticPolicy")
    if not isinstance(ep, dict) or ep.get("metrics") is None:
        return None
    high = as_int(ep.get("maxReplicas"))
    if high is None:
        return None
    hpa_spec: Obj = {"scaleTargetRef": {"kind": as_str(job.get("kind")) or kind, "name": name_of(job),
                                        "apiVersion": as_str(job.get("apiVersion")) or "kubeflow.org/v1"}}
    low = as_int(ep.get("minReplicas"))
    if low is not None:
        hpa_spec["minReplicas"] = low
    hpa_spec["maxReplicas"] = high
    if ep["metrics"]:  # omitempty: an empty list is left out (the apiserver then defaults it)
        hpa_spec["metrics"] = copy.deepcopy(ep["metrics"])
    return {"apiVersion": API_VERSION, "kind": HPA_KIND,
            "metadata": {"name": name_of(job), "namespace": namespace(job), "ownerReferences": [owner_reference(job)]},
            "spec": hpa_spec}


def plan_hpa(job: Obj, kind: str, current: Obj | None) -> HpaAction:
    """``ReconcileHPA``'s decision for ``job`` given the HPA of its name (``current``, if any)."""
    managed_by = as_str(run_policy(job).get("managedBy"))
    if managed_by and managed_by != MANAGED_BY_US:
        return HpaAction()
    want = desired_hpa(job, kind)
    if want is None:
        return HpaAction()
    suspended = run_policy(job).get("suspend") is True
    if current is None:
        return HpaAction() if suspended else HpaAction(create=want)
    if suspended:
        return HpaAction(delete=current)
    if semantic(want["spec"]) == semantic(as_dict(current.get("spec"))):
        return HpaAction()
    rv = metadata_of(current).get("resourceVersion")
    if rv is not None:
        want["metadata"]["resourceVersion"] = rv
    return HpaAction(update=want)


def semantic(hpa_spec: Obj) -> Obj:
    """An HPA spec as Go's semantic equality sees it: quantities by value ("0.5" is "500m")."""
    out = copy.deepcopy(hpa_spec)
    for metric in out.get("metrics") or []:
        for source in metric.values() if isinstance(metric, dict) else ():
            target = source.get("target") if isinstance(source, dict) else None
            for key in ("value", "averageValue"):
                if isinstance(target, dict) and target.get(key) is not None:
                    target[key] = canonical_quantity(target[key])
    behavior = out.get("behavior")
    for rules in behavior.values() if isinstance(behavior, dict) else ():
        if isinstance(rules, dict) and rules.get("tolerance") is not None:
            rules["tolerance"] = canonical_quantity(rules["tolerance"])
    return out


async def reconcile_hpa(client: Client, fw: Framework, options: ReconcileOptions, job: Obj, cached: Lookup) -> None:
    """The job's HPA round, for the frameworks that have one (``owned_kinds`` names the kind). API
    errors propagate (the round fails and is retried); AlreadyExists on create and NotFound on
    delete are the state wanted, reached by another round."""
    if HPA_KIND not in fw.owned_kinds(options):
        return
    action = plan_hpa(job, fw.kind, cached(HPA_KIND, namespace(job), name_of(job)))
    if action.create is not None:
        try:
            await client.create(action.create)
        except AlreadyExists:
            pass
    elif action.delete is not None:
        try:
            await client.delete(HPA_KIND, name_of(action.delete), namespace(action.delete))
        except NotFound:
            pass
    elif action.update is not None:
        await client.update(action.update)
