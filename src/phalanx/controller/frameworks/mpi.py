"""MPIJob: env (reference §5) and status rules (§6). SKELETON: hooks to be written."""
from __future__ import annotations

from ..job.conditions import StatusWriter
from .base import Addressing, Framework, ReplicaState


class MPIFramework(Framework):
    kind = "MPIJob"
    controller_name = "mpijob-controller"
    replica_specs_field = "mpiReplicaSpecs"
    replica_types = ("Launcher", "Worker")
    default_container_name = "mpi"
    default_port_name = "mpi-port"
    default_port = 9999
    default_restart_policy = "Never"

    def is_master_role(self, job: dict, rtype: str, index: int) -> bool:
        raise NotImplementedError

    def pod_env(self, job: dict, rtype: str, index: int, addressing: Addressing) -> list[dict]:
        raise NotImplementedError

    def update_status(self, job: dict, replicas: list[ReplicaState], st: StatusWriter) -> None:
        raise NotImplementedError
