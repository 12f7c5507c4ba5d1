"""Validation of kubeflow.org/v1 jobs: the CRD schema rules and the training operator's
validating webhooks (docs/REFERENCE.md §2), with their exact messages.
"""
from __future__ import annotations

from typing import Any

from phalanx.api.core import validate_container_strings
from phalanx.api.kubeflow import (
    MPI,
    PYTORCH,
    SUPPORTED_MANAGED_BY,
    TENSORFLOW,
    XGBOOST,
    Framework,
)
from phalanx.objects.errors import FieldError
from phalanx.objects.names import is_dns1035_label, is_dns1123_label, name_is_dns1035_label


def validate_job_schema(job: dict[str, Any], old: dict[str, Any] | None, fw: Framework) -> list[FieldError]:
    """What the apiserver itself refuses (CRD schema and CEL), before any webhook:
    the immutable ``schedulingPolicy.queue`` (rule ``self == oldSelf``, checked
    only when both old and new set it), and Phalanx's own rules on replica
    types (they become parts of pod names)."""
    errs: list[FieldError] = []
    spec = job.get("spec") or {}
    if old is not None:
        new_q = _get(spec, "runPolicy", "schedulingPolicy", "queue")
        old_q = _get(old, "spec", "runPolicy", "schedulingPolicy", "queue")
        if new_q is not None and old_q is not None and new_q != old_q:
            errs.append(FieldError("spec.runPolicy.schedulingPolicy.queue", "Invalid",
                                   "spec.runPolicy.schedulingPolicy.queue is immutable", "string"))
    specs = spec.get(fw.replica_specs_field) or {}
    base = f"spec.{fw.replica_specs_field}"
    lowered: dict[str, str] = {}
    for rtype in fw.replica_order(list(specs)):
        path = f"{base}[{rtype}]"
        low = rtype.lower()
        if low in lowered:
            errs.append(FieldError(path, "Duplicate", value=rtype))
            continue
        lowered[low] = rtype
        if fw.any_replica_type and is_dns1035_label(low):
            errs.append(FieldError(path, "Invalid",
                                   "a replica type, lower-cased, names pods and services: it must be a DNS-1035 "
                                   "label of lower case alphanumeric characters or '-', start with an alphabetic "
                                   "character and end with an alphanumeric character", rtype))
        replicas = specs[rtype].get("replicas")
        if replicas is not None and replicas < 0:
            errs.append(FieldError(f"{path}.replicas", "Invalid", "must be greater than or equal to 0", replicas))
        errs += _template_process_rules(specs[rtype], f"{path}.template.spec")
    if fw is MPI:
        errs += _mpi_schema_rules(spec)
    return errs


def _mpi_schema_rules(spec: dict[str, Any]) -> list[FieldError]:
    """Phalanx: ``mainContainer`` is written into the launcher's rsh agent
    script, so it must be a container name (a DNS label), and a worker needs
    at least one slot in the hostfile."""
    errs: list[FieldError] = []
    main = spec.get("mainContainer")
    if isinstance(main, str) and main:
        errs += [FieldError("spec.mainContainer", "Invalid", m, main) for m in is_dns1123_label(main)]
    slots = spec.get("slotsPerWorker")
    if slots is not None and slots < 1:
        errs.append(FieldError("spec.slotsPerWorker", "Invalid", "must be greater than or equal to 1", slots))
    return errs


def _template_process_rules(replica: dict[str, Any], path: str) -> list[FieldError]:
    """Phalanx: what would make every pod of the replica invalid, refused with
    the job rather than as a pod creation failing forever: container names
    (they name log directories) must be DNS labels, and argv, env and the
    working directory must hold no NUL character (exec cannot take one)."""
    spec = (replica.get("template") or {}).get("spec")
    if not isinstance(spec, dict):
        return []
    errs: list[FieldError] = []
    for key in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(key) or []):
            name = c.get("name")
            if isinstance(name, str) and name:
                errs += [FieldError(f"{path}.{key}[{i}].name", "Invalid", m, name) for m in is_dns1123_label(name)]
    return errs + validate_container_strings(spec, path)


def validate_job_webhook(job: dict[str, Any], old: dict[str, Any] | None, fw: Framework,
                         warnings: list[str] | None = None) -> list[FieldError]:
    """The training operator's validating webhook (docs/REFERENCE.md §2.1–2.3), on
    the defaulted object; for MPIJob, the rules its controller checks
    (docs/REFERENCE.md §2.5), as field errors. Replica types are checked in ``fw.replica_order``.

    managedBy (supported values, immutability) is checked the same way for
    every kind. Fixed bugs of the original: its PyTorch webhook compared the
    new object with itself (never immutable), its JAX webhook and MPI
    controller did not check managedBy at all.
    """
    spec = job.get("spec") or {}
    errs = _name_rules(job) + _managed_by_rules(spec, old)
    if fw is PYTORCH:
        errs += _pytorch_elastic_rules(spec, warnings)
    base = f"spec.{fw.replica_specs_field}"
    specs = spec.get(fw.replica_specs_field)
    if not specs:  # nil in the original; an empty map is refused too (a job with no replicas)
        errs.append(FieldError(base, "Required", "must be required"))
        if fw is XGBOOST:  # the original's XGBoost webhook also says the Master is missing
            errs.append(FieldError(f"{base}[Master]", "Required", "must be present"))
        return errs
    if fw is MPI:
        return errs + _mpi_replica_rules(specs, base)
    if fw in (PYTORCH, TENSORFLOW):
        errs += _replica_rules_v19(specs, base, fw)
    else:
        errs += _replica_rules(specs, base, fw)
    if fw is TENSORFLOW and sum(1 for t in specs if t in ("Chief", "Master")) > 1:
        errs.append(FieldError(base, "Forbidden", "must not have more than 1 Chief or Master role"))
    if fw is XGBOOST and "Master" not in specs:
        errs.append(FieldError(f"{base}[Master]", "Required", "must be present"))
    return errs


def _name_rules(job: dict[str, Any]) -> list[FieldError]:
    """NameIsDNS1035Label: the name becomes part of Service (DNS) names."""
    name = (job.get("metadata") or {}).get("name") or ""
    if not name:  # a generateName job is named by the store; its prefix was checked already
        return []
    msgs = name_is_dns1035_label(name)
    return [FieldError("metadata.name", "Invalid", "should match: " + ",".join(msgs), name)] if msgs else []


def _managed_by_rules(spec: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """ValidateRunPolicyUpdate (immutable) and ValidateRunPolicy (supported values)."""
    errs: list[FieldError] = []
    new_mb = (spec.get("runPolicy") or {}).get("managedBy")
    if old is not None:
        old_mb = _get(old, "spec", "runPolicy", "managedBy")
        if old_mb != new_mb:
            errs.append(FieldError("spec.runPolicy.managedBy", "Invalid", "field is immutable", new_mb))
    if new_mb is not None and new_mb not in SUPPORTED_MANAGED_BY:
        errs.append(FieldError("spec.runPolicy.managedBy", "NotSupported", value=new_mb,
                               supported=tuple(sorted(SUPPORTED_MANAGED_BY))))
    return errs


def _pytorch_elastic_rules(spec: dict[str, Any], warnings: list[str] | None) -> list[FieldError]:
    errs: list[FieldError] = []
    elastic = spec.get("elasticPolicy")
    if elastic is None:
        return errs
    if "Worker" not in (spec.get("pytorchReplicaSpecs") or {}):
        errs.append(FieldError("spec.pytorchReplicaSpecs[Worker]", "Required",
                               "must be configured if elastic policy is used"))
    if elastic.get("nProcPerNode") is not None:
        if warnings is not None:
            warnings.append("spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead")
        if spec.get("nprocPerNode") is not None:
            errs.append(FieldError("spec.elasticPolicy.nProcPerNode", "Forbidden",
                                   "must not be used with spec.nprocPerNode"))
    return errs


def validate_elastic_bounds(job: dict[str, Any], old: dict[str, Any] | None, fw: Framework) -> list[FieldError]:
    """Phalanx rule (docs/SEMANTICS.md S17): an update of a PyTorchJob with an elasticPolicy
    that changes its Worker replicas or the bounds must keep the replicas within
    [minReplicas, maxReplicas]; an update that changes neither is never refused by it."""
    if fw is not PYTORCH or old is None:
        return []
    new_bounds = _elastic_bounds(job)
    if new_bounds is None:
        return []
    replicas = _get(job, "spec", fw.replica_specs_field, "Worker", "replicas")
    if not isinstance(replicas, int) or isinstance(replicas, bool):
        return []
    if (replicas, new_bounds) == (_get(old, "spec", fw.replica_specs_field, "Worker", "replicas"), _elastic_bounds(old)):
        return []
    detail = elastic_bounds_error(replicas, *new_bounds)
    if detail is None:
        return []
    return [FieldError(worker_replicas_field(fw), "Invalid", detail, replicas)]


def worker_replicas_field(fw: Framework) -> str:
    """The field the elastic bounds name on the job."""
    return f"spec.{fw.replica_specs_field}[Worker].replicas"


def elastic_bounds_error(replicas: int, lo: int, hi: int) -> str | None:
    """What is wrong with Worker ``replicas`` under the bounds of an elasticPolicy, or None."""
    if lo <= replicas <= hi:
        return None
    return f"must be between minReplicas ({lo}) and maxReplicas ({hi}) of spec.elasticPolicy"


def _elastic_bounds(job: dict[str, Any]) -> tuple[int, int] | None:
    """minReplicas and maxReplicas (both set once defaulted), or None."""
    elastic = _get(job, "spec", "elasticPolicy")
    lo, hi = _get(elastic, "minReplicas"), _get(elastic, "maxReplicas")
    if isinstance(lo, int) and isinstance(hi, int):
        return lo, hi
    return None


def _containers(replica: dict[str, Any]) -> list[dict[str, Any]]:
    return ((replica.get("template") or {}).get("spec") or {}).get("containers") or []


def _default_container_rule(containers: list[dict[str, Any]], path: str, fw: Framework) -> list[FieldError]:
    if any(c.get("name") == fw.container_name for c in containers):
        return []
    shown = f'"{fw.container_name}"' if fw.quote_container_name else fw.container_name
    return [FieldError(path, "Required", f"must have at least one container with name {shown}")]


def _images_rule(containers: list[dict[str, Any]], path: str) -> list[FieldError]:
    return [FieldError(f"{path}[{i}].image", "Required", "must be required")
            for i, c in enumerate(containers) if not c.get("image")]


def _replica_rules_v19(specs: dict[str, Any], base: str, fw: Framework) -> list[FieldError]:
    """PyTorchJob and TFJob, per replica type: containers, type, images, the
    default container, then PyTorch's replica counts."""
    errs: list[FieldError] = []
    for rtype in fw.replica_order(list(specs)):
        replica = specs[rtype]
        path = f"{base}[{rtype}]"
        containers_path = f"{path}.template.spec.containers"
        containers = _containers(replica)
        if not containers:
            errs.append(FieldError(containers_path, "Required", "must be specified"))
        if not fw.any_replica_type and rtype not in fw.replica_types:
            errs.append(FieldError(path, "NotSupported", value=rtype, supported=fw.replica_types))
        errs += _images_rule(containers, containers_path)
        errs += _default_container_rule(containers, containers_path, fw)
        if fw is PYTORCH:
            replicas = replica.get("replicas")
            if rtype == "Master" and replicas != 1:
                errs.append(FieldError(f"{path}.replicas", "Forbidden", "must be 1"))
            if rtype == "Worker" and replicas is not None and replicas < 1:
                errs.append(FieldError(f"{path}.replicas", "Forbidden", "must be at least 1"))
    return errs


def _replica_rules(specs: dict[str, Any], base: str, fw: Framework) -> list[FieldError]:
    """XGBoostJob, PaddleJob and JAXJob (the webhooks' shared ValidateReplicaSpecs),
    per replica type: type, containers, images, the default container, then
    XGBoost's Master count."""
    errs: list[FieldError] = []
    for rtype in fw.replica_order(list(specs)):
        replica = specs[rtype]
        path = f"{base}[{rtype}]"
        containers_path = f"{path}.template.spec.containers"
        containers = _containers(replica)
        if rtype not in fw.replica_types:
            errs.append(FieldError(path, "NotSupported", value=rtype, supported=fw.replica_types))
        if not containers:
            errs.append(FieldError(containers_path, "Required", "must be specified"))
        errs += _images_rule(containers, containers_path)
        errs += _default_container_rule(containers, containers_path, fw)
        if fw is XGBOOST and rtype == "Master" and replica.get("replicas") != 1:
            errs.append(FieldError(f"{path}.replicas", "Forbidden", "must be 1"))
    return errs


def _mpi_replica_rules(specs: dict[str, Any], base: str) -> list[FieldError]:
    """MPIJob: the original's ValidateV1MpiJobSpec (docs/REFERENCE.md §2.5), which its
    controller checks on every reconcile (a Warning event, the job stuck
    forever). Phalanx refuses the job at admission instead, with a field error
    per rule, in the order the original checks them: containers, type, each
    container's image and name, one Launcher; then a Launcher must exist."""
    errs: list[FieldError] = []
    for rtype in MPI.replica_order(list(specs)):
        replica = specs[rtype]
        path = f"{base}[{rtype}]"
        containers_path = f"{path}.template.spec.containers"
        containers = _containers(replica)
        if not containers:
            errs.append(FieldError(containers_path, "Required", "must be specified"))
        if rtype not in MPI.replica_types:
            errs.append(FieldError(path, "NotSupported", value=rtype, supported=MPI.replica_types))
        for i, c in enumerate(containers):
            if not c.get("image"):
                errs.append(FieldError(f"{containers_path}[{i}].image", "Required", "must be required"))
            if not c.get("name"):
                errs.append(FieldError(f"{containers_path}[{i}].name", "Required", "must be required"))
        if rtype == "Launcher" and replica.get("replicas") != 1:
            errs.append(FieldError(f"{path}.replicas", "Forbidden", "must be 1"))
    if "Launcher" not in specs:
        errs.append(FieldError(f"{base}[Launcher]", "Required", "must be present"))
    return errs


def _get(d: Any, *keys: str) -> Any:
    """d[k1][k2]... or None when any level is missing or not a mapping."""
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d
