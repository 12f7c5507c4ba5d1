"""What one reconcile decided (Plan) and the operator-wide knobs (ReconcileOptions).

The pure core returns a Plan; the shell applies it through the Client. A Plan
computed on the state its own application produced is empty (idempotence).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from phalanx.controller.conditions import Event


@dataclass(frozen=True)
class ReconcileOptions:
    """Operator-wide settings; the shell builds one and passes it to every reconcile.

    ``resolvable_names`` False (local runtime without nss_wrapper) puts the
    Service's ``phalanx.dev/address`` IP into MASTER_ADDR / TF_CONFIG instead of
    DNS names. ``init_container_command`` is the argv of the PyTorch worker init
    container on the local runtime; the master's host is appended to it.
    """

    gang_scheduler: str | None = "volcano"
    local_runtime: bool = True
    resolvable_names: bool = True
    init_container_command: list[str] | None = None
    default_backoff_limit: int = 0
    cluster_domain: str | None = None
    init_container_image: str = "alpine:3.10"
    init_container_max_tries: int = 100
    # Local runtime: the argv of ``phalanx exec`` (MPI's rsh agent runs
    # ``<exec_command> -n <ns> <pod> -- <cmd>``); None: ``phalanx exec`` from PATH.
    exec_command: tuple[str, ...] | None = None
    # Local runtime: the argv prefix of ``python -m phalanx.node.podwait`` (the MPI
    # launcher's init container waits with it until every worker pod runs).
    pod_wait_command: tuple[str, ...] | None = None
    # Cluster mode: the MPI launcher's init container image (--mpi-kubectl-delivery-image).
    mpi_kubectl_delivery_image: str = "kubeflow/kubectl-delivery:latest"


@dataclass
class Plan:
    """Writes to make, in the order the shell applies them: status, adoptions, PodGroup,
    deletions, services, pods, events; then ``requeue_after`` seconds."""

    create_services: list[dict[str, Any]] = field(default_factory=list)
    create_pods: list[dict[str, Any]] = field(default_factory=list)
    delete_pods: list[str] = field(default_factory=list)
    delete_services: list[str] = field(default_factory=list)
    podgroup_create: dict[str, Any] | None = None
    podgroup_update: dict[str, Any] | None = None  # only when the spec really differs (no churn)
    podgroup_delete: bool = False
    status: dict[str, Any] | None = None  # the new job status, only when it differs
    events: list[Event] = field(default_factory=list)
    requeue_after: float | None = None
    delete_job: bool = False  # ttlSecondsAfterFinished expired
    # Pods a finished job keeps, to mark "never restart again".
    stop_restarting: list[str] = field(default_factory=list)
    # Live pods to mark "no restart after a failure": backoffLimit leaves no restart.
    stop_failure_restarts: list[str] = field(default_factory=list)
    # Other owned objects (Framework.owned_objects) to create, or replace when different;
    # applied after the status and PodGroup, before services and pods.
    apply_objects: list[dict[str, Any]] = field(default_factory=list)
    # Orphans (their cached state) to adopt: patched with the job's controller reference after the status.
    adopt: list[dict[str, Any]] = field(default_factory=list)

    def is_empty(self) -> bool:
        """No write and no event (a pending ``requeue_after`` alone is not work)."""
        return not (
            self.create_services or self.create_pods or self.delete_pods or self.delete_services
            or self.podgroup_create is not None or self.podgroup_update is not None
            or self.podgroup_delete or self.status is not None or self.events or self.delete_job
            or self.stop_restarting or self.stop_failure_restarts or self.apply_objects or self.adopt
        )

    def requeue_at_most(self, seconds: float | None) -> None:
        """Ask to be called again no later than ``seconds`` from now."""
        if seconds is None:
            return
        seconds = max(0.0, float(seconds))
        if self.requeue_after is None or seconds < self.requeue_after:
            self.requeue_after = seconds
