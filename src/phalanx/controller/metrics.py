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
"""
from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry, Counter

from phalanx.controller.conditions import CREATED, FAILED, RESTARTING, SUCCEEDED, has_condition

# The original's GetFrameworkName() of each kind (kubeflow.org/v1 *JobFrameworkName).
FRAMEWORK_NAMES = {
    "PyTorchJob": "pytorch", "TFJob": "tensorflow", "MPIJob": "mpi",
    "XGBoostJob": "xgboost", "PaddleJob": "paddle", "JAXJob": "jax",
}
JOB_LABELS = ("job_namespace", "framework")


def framework_name(kind: str) -> str:
    return FRAMEWORK_NAMES.get(kind, kind.lower().removesuffix("job"))


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
        self._transitions = ((CREATED, self.jobs_created), (SUCCEEDED, self.jobs_successful),
                             (FAILED, self.jobs_failed), (RESTARTING, self.jobs_restarted))

    def status_written(self, kind: str, namespace: str, before: Any, after: Any) -> None:
        """A status write of a ``kind`` job succeeded: count each condition that became True."""
        b = before if isinstance(before, dict) else {}
        a = after if isinstance(after, dict) else {}
        for ctype, counter in self._transitions:
            if has_condition(a, ctype) and not has_condition(b, ctype):
                counter.labels(namespace, framework_name(kind)).inc()

    def job_deleted(self, kind: str, namespace: str) -> None:
        self.jobs_deleted.labels(namespace, framework_name(kind)).inc()
