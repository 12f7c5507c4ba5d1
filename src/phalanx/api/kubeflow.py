"""kubeflow.org/v1 PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob and MPIJob
(training operator v1.9 field set).

Per-kind constants (replica types, default container name and port, default
restartPolicy, webhook name) live in ``FRAMEWORKS``, the one table defaulting
and validation (``api.kubeflow_validation``) read. The defaulting below works
on the JSON-shaped dict after the models have parsed it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ConfigDict

from phalanx.api.core import PodTemplateSpec, default_container_ports
from phalanx.api.meta import FreeDict, Int32, Int64, K8sModel, ObjectMeta, ResourceList, Time

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
    ``status`` dict (the controller owns it and may add counters, such as restarts)."""

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
    """What differs between job kinds (docs/REFERENCE.md §1.3)."""

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
# The original validates MPIJobs inside its controller (no webhook, docs/REFERENCE.md §2.5);
# Phalanx refuses them at admission like the other kinds, under this name.
MPI = Framework(
    kind="MPIJob", replica_specs_field="mpiReplicaSpecs", replica_types=("Launcher", "Worker"),
    container_name="mpi", port_name="mpi-port", port=9999, restart_policy="Never",
    webhook="validator.mpijob.phalanx.dev", normalise_replica_keys=False, sets_default_port=False,
    zero_default_replicas=("Worker",),
)
FRAMEWORKS: dict[str, Framework] = {f.kind: f for f in (PYTORCH, TENSORFLOW, XGBOOST, PADDLE, JAX, MPI)}


# --- defaulting (applied at admission and stored, then validated) ----------------------

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
    """SetDefaults_<Kind> (docs/REFERENCE.md §1.3), plus the CRD's
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
