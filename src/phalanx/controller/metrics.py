"""The operator's Prometheus series, with the original's names and labels (pkg/common/metrics.go;
the pod and PodGroup counters of pkg/controller.v1/common).

One ``OperatorMetrics`` per job controller, on the ``CollectorRegistry`` it is given (never the
process-wide default: one process may run several control planes). The job shell feeds it with
what it actually wrote:

- ``training_operator_jobs_{created,successful,failed,restarted}_total{job_namespace,framework}``:
  once per transition of the job's condition of that type to True, counted when the status write
  that makes it succeeds (the original increments successful/failed/restarted each time its
  branch runs, and created on every informer add, a re-list included);
- ``training_operator_jobs_deleted_total``: a job the operator deleted (ttlSecondsAfterFinished);
- ``created_pods_total`` / ``deleted_pods_total``: pods the operator created / deleted;
  ``failed_pods_total``: Failed pods it deleted to be recreated (a restart);
- ``created_pod_groups_total`` / ``deleted_pod_groups_total``: PodGroups it created / deleted.

Phalanx's own (the original has none):

- ``phalanx_job_restarts_total{job_namespace,framework}``: restarts the operator counted into its
  jobs' ``status.restartCount`` (controller/job/restarts.py), added when the status write that raises
  it succeeds;
- ``phalanx_jobs{job_namespace,framework,state}``: jobs currently in each state, read from the
  controller's job caches at each scrape (``job_objects``); a job's state is its last condition that
  is True (``Unknown`` before the operator gave it one), every state of ``JOB_STATES`` is reported for
  each namespace and framework that has jobs.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable, Iterator

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.core import GaugeMetricFamily, Metric

from phalanx.controller.conditions import (
    CREATED,
    FAILED,
    RESTARTING,
    RUNNING,
    SUCCEEDED,
    SUSPENDED,
    conditions_of,
    has_condition,
)

# The original's GetFrameworkName() of each kind (kubeflow.org/v1 *JobFrameworkName).
FRAMEWORK_NAMES = {
    "PyTorchJob": "pytorch", "TFJob": "tensorflow", "MPIJob": "mpi",
    "XGBoostJob": "xgboost", "PaddleJob": "paddle", "JAXJob": "jax",
}
JOB_LABELS = ("job_namespace", "framework")
JOB_STATES = (CREATED, RUNNING, RESTARTING, SUSPENDED, SUCCEEDED, FAILED)
UNKNOWN_STATE = "Unknown"


def framework_name(kind: str) -> str:
    return FRAMEWORK_NAMES.get(kind, kind.lower().removesuffix("job"))


def job_state(job: Any) -> str:
    """The type of the job's last condition whose status is True; ``Unknown`` without one."""
    status = job.get("status") if isinstance(job, dict) else None
    true = [c.get("type") for c in conditions_of(status if isinstance(status, dict) else {})
            if c.get("status") == "True" and isinstance(c.get("type"), str)]
    return str(true[-1]) if true else UNKNOWN_STATE


def restart_count(status: Any) -> int:
    n = status.get("restartCount") if isinstance(status, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0


def _namespace(job: Any) -> str | None:
    meta = job.get("metadata") if isinstance(job, dict) else None
    ns = meta.get("namespace") if isinstance(meta, dict) else None
    return ns if isinstance(ns, str) else None


class OperatorMetrics:
    """The counters of one job controller; ``registry`` is where they are exposed."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.jobs_created = Counter("training_operator_jobs_created_total", "Counts number of jobs created",
                                    JOB_LABELS, registry=r)
        self.jobs_deleted = Counter("training_operator_jobs_deleted_total", "Counts number of jobs deleted",
                                    JOB_LABELS, registry=r)
        self.jobs_successful = Counter("training_operator_jobs_successful_total", "Counts number of jobs successful",
                                       JOB_LABELS, registry=r)
        self.jobs_failed = Counter("training_operator_jobs_failed_total", "Counts number of jobs failed",
                                   JOB_LABELS, registry=r)
        self.jobs_restarted = Counter("training_operator_jobs_restarted_total", "Counts number of jobs restarted",
                                      JOB_LABELS, registry=r)
        self.created_pods = Counter("created_pods_total", "The total number of created pods", registry=r)
        self.deleted_pods = Counter("deleted_pods_total", "The total number of deleted pods", registry=r)
        self.failed_pods = Counter("failed_pods_total", "The total number of failed pods", registry=r)
        self.created_pod_groups = Counter("created_pod_groups_total", "The total number of created pod groups",
                                          registry=r)
        self.deleted_pod_groups = Counter("deleted_pod_groups_total", "The total number of deleted pod groups",
                                          registry=r)
        self.job_restarts = Counter("phalanx_job_restarts_total",
                                    "Counts restarts of jobs' replicas, as counted into the jobs' status.restartCount",
                                    JOB_LABELS, registry=r)
        # The jobs as the controller sees them, as (kind, job): read by each scrape of ``phalanx_jobs``.
        self.job_objects: Callable[[], Iterable[tuple[str, Any]]] | None = None
        r.register(_JobStates(self))
        self._transitions = ((CREATED, self.jobs_created), (SUCCEEDED, self.jobs_successful),
                             (FAILED, self.jobs_failed), (RESTARTING, self.jobs_restarted))

    def status_written(self, kind: str, namespace: str, before: Any, after: Any) -> None:
        """A status write of a ``kind`` job succeeded: count each condition that became True."""
        b = before if isinstance(before, dict) else {}
        a = after if isinstance(after, dict) else {}
        for ctype, counter in self._transitions:
            if has_condition(a, ctype) and not has_condition(b, ctype):
                counter.labels(namespace, framework_name(kind)).inc()
        added = restart_count(a) - restart_count(b)
        if added > 0:
            self.job_restarts.labels(namespace, framework_name(kind)).inc(added)

    def job_deleted(self, kind: str, namespace: str) -> None:
        self.jobs_deleted.labels(namespace, framework_name(kind)).inc()


class _JobStates:
    """The ``phalanx_jobs`` gauge, counted from ``OperatorMetrics.job_objects`` at collection."""

    NAME = "phalanx_jobs"
    DOC = "Number of jobs currently in each state (the type of the job's last True condition)"

    def __init__(self, metrics: OperatorMetrics) -> None:
        self.metrics = metrics

    def describe(self) -> list[Metric]:
        return [GaugeMetricFamily(self.NAME, self.DOC, labels=[*JOB_LABELS, "state"])]

    def collect(self) -> Iterator[Metric]:
        fam = GaugeMetricFamily(self.NAME, self.DOC, labels=[*JOB_LABELS, "state"])
        counts: dict[tuple[str, str], dict[str, int]] = {}
        source = self.metrics.job_objects
        for kind, job in (source() if source is not None else ()):
            ns = _namespace(job)
            if ns is None:
                continue
            states = counts.setdefault((ns, framework_name(kind)), dict.fromkeys(JOB_STATES, 0))
            state = job_state(job)
            states[state] = states.get(state, 0) + 1
        for (ns, framework), states in sorted(counts.items()):
            for state, n in states.items():
                fam.add_metric([ns, framework, state], float(n))
        yield fam
