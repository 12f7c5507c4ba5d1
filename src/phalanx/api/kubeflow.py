"""kubeflow.org/v1 PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob and MPIJob
(training operator v1.9 field set).

Per-kind constants (replica types, default container name and port, default
restartPolicy, webhook name) live in ``FRAMEWORKS``, the one table defaulting
and validation read (reference/kubeflow-v1.md §1.3). The functions below work
on the JSON-shaped dict after the models have parsed it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict

from phalanx.api.core import PodTemplateSpec, default_container_ports, validate_container_strings
from phalanx.api.meta import FreeDict, Int32, Int64, K8sModel, ObjectMeta, ResourceList, Time
from phalanx.objects.errors import FieldError
from phalanx.objects.names import is_dns1035_label, is_dns1123_label, name_is_dns1035_label

RestartPolicy = Literal["Always", "OnFailure", "Never", "ExitCode", ""]  # "" = unset: defaulted per kind
CleanPodPolicy = Literal["All", "Running", "None"]

MANAGED_BY_TRAINING_OPERATOR = "kubeflow.org/training-operator"
MANAGED_BY_MULTIKUEUE = "kueue.x-k8s.io/multikueue"
SUPPORTED_MANAGED_BY = (MANAGED_BY_TRAINING_OPERATOR, MANAGED_BY_MULTIKUEUE)


class SchedulingPolicy(K8sModel):
    min_available: Int32 | None = None
    queue: str | None = None
    min_resources: ResourceList | None = None
    priority_class: str | None = None
    schedule_timeout_seconds: Int32 | None = None


class RunPolicy(K8sModel):
    clean_pod_policy: CleanPodPolicy | None = None
    ttl_seconds_after_finished: Int32 | None = None
    active_deadline_seconds: Int64 | None = None
    backoff_limit: Int32 | None = None
    scheduling_policy: SchedulingPolicy | None = None
    suspend: bool | None = None
    managed_by: str | None = None


class ReplicaSpec(K8sModel):
    replicas: Int32 | None = None
    template: PodTemplateSpec | None = None
    restart_policy: RestartPolicy | None = None


class RDZVConf(K8sModel):
    key: str | None = None
    value: str | None = None


class ElasticPolicy(K8sModel):
    min_replicas: Int32 | None = None
    max_replicas: Int32 | None = None
    rdzv_backend: str | None = None  # c10d | etcd | etcd-v2
    rdzv_port: Int32 | None = None
    rdzv_host: str | None = None
    rdzv_id: str | None = None
    rdzv_conf: list[RDZVConf] | None = None
    standalone: bool | None = None
    n_proc_per_node: Int32 | None = None  # deprecated since v1.7: use spec.nprocPerNode
    max_restarts: Int32 | None = None
    metrics: list[FreeDict] | None = None  # autoscaling/v2 MetricSpec


class PyTorchJobSpec(K8sModel):
    run_policy: RunPolicy | None = None
    elastic_policy: ElasticPolicy | None = None
    pytorch_replica_specs: dict[str, ReplicaSpec]
    nproc_per_node: str | None = None  # auto | cpu | gpu | an integer


class TFJobSpec(K8sModel):
    run_policy: RunPolicy | None = None
    success_policy: Literal["", "AllWorkers"] | None = None
    tf_replica_specs: dict[str, ReplicaSpec]
    enable_dynamic_worker: bool | None = None


class XGBoostJobSpec(K8sModel):
    run_policy: RunPolicy | None = None
    xgb_replica_specs: dict[str, ReplicaSpec]


class PaddleElasticPolicy(K8sModel):
    min_replicas: Int32 | None = None
    max_replicas: Int32 | None = None
    max_restarts: Int32 | None = None
    metrics: list[FreeDict] | None = None  # autoscaling/v2 MetricSpec (no HPA is reconciled, as the original)


class PaddleJobSpec(K8sModel):
    run_policy: RunPolicy | None = None
    elastic_policy: PaddleElasticPolicy | None = None
    paddle_replica_specs: dict[str, ReplicaSpec]


class JAXJobSpec(K8sModel):
    run_policy: RunPolicy | None = None
    jax_replica_specs: dict[str, ReplicaSpec]


class MPIJobSpec(K8sModel):
    slots_per_worker: Int32 | None = None
    clean_pod_policy: CleanPodPolicy | None = None  # deprecated: runPolicy.cleanPodPolicy wins
    mpi_replica_specs: dict[str, ReplicaSpec]
    main_container: str | None = None
    run_policy: RunPolicy | None = None


class JobCondition(K8sModel):
    model_config = ConfigDict(extra="allow")

    type: str
    status: str
    reason: str | None = None
    message: str | None = None
    last_update_time: Time | None = None
    last_transition_time: Time | None = None


class ReplicaStatus(K8sModel):
    model_config = ConfigDict(extra="allow")

    active: Int32 | None = None
    succeeded: Int32 | None = None
    failed: Int32 | None = None
    label_selector: FreeDict | None = None
    selector: str | None = None


class JobStatus(K8sModel):
    """The training operator's JobStatus, for typed reading. Jobs accept any
    ``status`` dict (the controller owns it and may add counters, S2)."""

    model_config = ConfigDict(extra="allow")

    conditions: list[JobCondition] | None = None
    replica_statuses: dict[str, ReplicaStatus] | None = None
    start_time: Time | None = None
    completion_time: Time | None = None
    last_reconcile_time: Time | None = None


class PyTorchJob(K8sModel):
    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["PyTorchJob"] = "PyTorchJob"
    metadata: ObjectMeta | None = None
    spec: PyTorchJobSpec | None = None
    status: dict[str, Any] | None = None


class TFJob(K8sModel):
    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["TFJob"] = "TFJob"
    metadata: ObjectMeta | None = None
    spec: TFJobSpec | None = None
    status: dict[str, Any] | None = None


class XGBoostJob(K8sModel):
    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["XGBoostJob"] = "XGBoostJob"
    metadata: ObjectMeta | None = None
    spec: XGBoostJobSpec | None = None
    status: dict[str, Any] | None = None


class PaddleJob(K8sModel):
    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["PaddleJob"] = "PaddleJob"
    metadata: ObjectMeta | None = None
    spec: PaddleJobSpec | None = None
    status: dict[str, Any] | None = None


class JAXJob(K8sModel):
    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["JAXJob"] = "JAXJob"
    metadata: ObjectMeta | None = None
    spec: JAXJobSpec | None = None
    status: dict[str, Any] | None = None


class MPIJob(K8sModel):
    api_version: Literal["kubeflow.org/v1"] = "kubeflow.org/v1"
    kind: Literal["MPIJob"] = "MPIJob"
    metadata: ObjectMeta | None = None
    spec: MPIJobSpec | None = None
    status: dict[str, Any] | None = None


@dataclass(frozen=True)
class Framework:
    """What differs between job kinds (reference/kubeflow-v1.md §1.3)."""

    kind: str
    replica_specs_field: str  # "pytorchReplicaSpecs"
    replica_types: tuple[str, ...]  # canonical spelling, in validation order
    container_name: str
    port_name: str
    port: int
    restart_policy: str
    webhook: str  # name of the validating webhook, as the apiserver quotes it
    any_replica_type: bool = False  # TFJob's webhook accepts any key; PyTorchJob's only its own
    normalise_replica_keys: bool = True  # setTypeNameToCamelCase (SetDefaults_MPIJob has none)
    sets_default_port: bool = True  # setDefaultPort (MPI creates no services: no port)
    zero_default_replicas: tuple[str, ...] = ()  # types whose nil replicas default to 0 (MPI Worker)
    quote_container_name: bool = False  # Paddle's webhook prints the name with %q

    def replica_order(self, keys: list[str]) -> list[str]:
        """Known replica types first (in this table's order), then the rest sorted:
        a fixed order, so error lists and plans never depend on map order."""
        known = [t for t in self.replica_types if t in keys]
        return known + sorted(k for k in keys if k not in self.replica_types)


PYTORCH = Framework(
    kind="PyTorchJob", replica_specs_field="pytorchReplicaSpecs", replica_types=("Master", "Worker"),
    container_name="pytorch", port_name="pytorchjob-port", port=23456, restart_policy="OnFailure",
    webhook="validator.pytorchjob.training-operator.kubeflow.org",
)
TENSORFLOW = Framework(
    kind="TFJob", replica_specs_field="tfReplicaSpecs",
    replica_types=("Chief", "Evaluator", "Master", "PS", "Worker"),
    container_name="tensorflow", port_name="tfjob-port", port=2222, restart_policy="Never",
    webhook="validator.tfjob.training-operator.kubeflow.org", any_replica_type=True,
)
XGBOOST = Framework(
    kind="XGBoostJob", replica_specs_field="xgbReplicaSpecs", replica_types=("Master", "Worker"),
    container_name="xgboost", port_name="xgboostjob-port", port=9999, restart_policy="Never",
    webhook="validator.xgboostjob.training-operator.kubeflow.org",
)
PADDLE = Framework(
    kind="PaddleJob", replica_specs_field="paddleReplicaSpecs", replica_types=("Master", "Worker"),
    container_name="paddle", port_name="master", port=36543, restart_policy="OnFailure",
    webhook="validator.paddlejob.training-operator.kubeflow.org", quote_container_name=True,
)
JAX = Framework(
    kind="JAXJob", replica_specs_field="jaxReplicaSpecs", replica_types=("Worker",),
    container_name="jax", port_name="jaxjob-port", port=6666, restart_policy="Never",
    webhook="validator.jaxjob.training-operator.kubeflow.org",
)
# The original validates MPIJobs inside its controller (no webhook, reference §2.5);
# Phalanx refuses them at admission like the other kinds, under this name.
MPI = Framework(
    kind="MPIJob", replica_specs_field="mpiReplicaSpecs", replica_types=("Launcher", "Worker"),
    container_name="mpi", port_name="mpi-port", port=9999, restart_policy="Never",
    webhook="validator.mpijob.phalanx.dev", normalise_replica_keys=False, sets_default_port=False,
    zero_default_replicas=("Worker",),
)
FRAMEWORKS: dict[str, Framework] = {f.kind: f for f in (PYTORCH, TENSORFLOW, XGBOOST, PADDLE, JAX, MPI)}


# --- defaulting (S1: applied at admission and stored) ------------------------------

DEFAULT_NPROC_PER_NODE = "auto"
DEFAULT_SLOTS_PER_WORKER = 1  # MPIJob: the hostfile's slots when slotsPerWorker is unset


def _canonical_replica_keys(specs: dict[str, Any], fw: Framework) -> dict[str, Any]:
    """``worker`` -> ``Worker`` (setTypeNameToCamelCase), keeping the order.
    A key whose canonical spelling is also present is left as written, for
    validation to refuse."""
    out: dict[str, Any] = {}
    for key, rs in specs.items():
        canon = next((t for t in fw.replica_types if t.lower() == key.lower()), key)
        if canon != key and canon in specs:
            canon = key
        out[canon] = rs
    return out


def _default_port(replica: dict[str, Any], fw: Framework) -> None:
    """setDefaultPort: the default container (by name, else the first) gets the
    framework's port unless it already has a port of that *name*."""
    containers = ((replica.get("template") or {}).get("spec") or {}).get("containers") or []
    if not containers:
        return
    target = next((c for c in containers if c.get("name") == fw.container_name), containers[0])
    ports = target.setdefault("ports", [])
    if not any(p.get("name") == fw.port_name for p in ports):
        ports.append({"name": fw.port_name, "containerPort": fw.port, "protocol": "TCP"})


def default_job(job: dict[str, Any], fw: Framework) -> None:
    """SetDefaults_<Kind> of reference/kubeflow-v1.md §1.3, plus the CRD's
    ``runPolicy.suspend: false``. schedulingPolicy is never invented: the
    PodGroup carries the queue default."""
    spec = job.get("spec")
    if spec is None:
        return  # nothing to default; validation says what is missing
    run_policy = spec.setdefault("runPolicy", {})
    if fw is MPI:
        _default_mpi_clean_pod_policy(spec, run_policy)
    else:
        run_policy.setdefault("cleanPodPolicy", "None")
    run_policy.setdefault("suspend", False)
    specs = spec.get(fw.replica_specs_field)
    if specs:
        if fw.normalise_replica_keys:
            specs = spec[fw.replica_specs_field] = _canonical_replica_keys(specs, fw)
        for rtype, replica in specs.items():
            replica.setdefault("replicas", 0 if rtype in fw.zero_default_replicas else 1)
            if not replica.get("restartPolicy"):
                replica["restartPolicy"] = fw.restart_policy
            if fw.sets_default_port:
                _default_port(replica, fw)
            template_spec = (replica.get("template") or {}).get("spec")
            if template_spec:
                default_container_ports(template_spec)
    if fw is PYTORCH:
        _default_elastic_policy(spec, fw)
        _default_nproc_per_node(spec)
    elif fw is PADDLE:
        _default_elastic_policy(spec, fw)  # setPaddleElasticPolicy: the same rules
    elif fw is TENSORFLOW:
        spec.setdefault("successPolicy", "")
    elif fw is MPI:
        spec.setdefault("slotsPerWorker", DEFAULT_SLOTS_PER_WORKER)


def _default_mpi_clean_pod_policy(spec: dict[str, Any], run_policy: dict[str, Any]) -> None:
    """MPIJob has the deprecated ``spec.cleanPodPolicy`` besides ``runPolicy``'s:
    runPolicy's wins when set, else the deprecated one, else None; the chosen
    value is stored in both (what the original's Reconcile derives each time)."""
    chosen = run_policy.get("cleanPodPolicy") or spec.get("cleanPodPolicy") or "None"
    run_policy["cleanPodPolicy"] = spec["cleanPodPolicy"] = chosen


def _default_elastic_policy(spec: dict[str, Any], fw: Framework) -> None:
    """setElasticPolicy (PyTorch) and setPaddleElasticPolicy: a missing bound
    takes the other one; with neither, both take the Worker's replicas."""
    elastic = spec.get("elasticPolicy")
    if elastic is None:
        return
    lo, hi = elastic.get("minReplicas"), elastic.get("maxReplicas")
    if lo is not None and hi is None:
        elastic["maxReplicas"] = lo
    elif hi is not None and lo is None:
        elastic["minReplicas"] = hi
    elif lo is None and hi is None:
        worker = (spec.get(fw.replica_specs_field) or {}).get("Worker")
        if worker is not None:  # the original reads only the Worker's replicas (issue #2277)
            elastic["minReplicas"] = elastic["maxReplicas"] = worker.get("replicas", 1)


def _default_nproc_per_node(spec: dict[str, Any]) -> None:
    """setDefaultNprocPerNode."""
    elastic = spec.get("elasticPolicy")
    if (elastic is None or elastic.get("nProcPerNode") is None) and spec.get("nprocPerNode") is None:
        spec["nprocPerNode"] = DEFAULT_NPROC_PER_NODE


# --- validation -----------------------------------------------------------------------

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
    """The training operator's validating webhook (reference §2.1–2.3), on
    the defaulted object; for MPIJob, the rules its controller checks
    (§2.5), as field errors. Replica types are checked in ``fw.replica_order``.

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
    """MPIJob: the original's ValidateV1MpiJobSpec (reference §2.5), which its
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
