"""JAXJob: env (reference §5) and status rules (§6). SKELETON: hooks to be written."""
from __future__ import annotations

from ..job.conditions import StatusWriter
from .base import Addressing, Framework, ReplicaState


class JAXFramework(Framework):
    kind = "JAXJob"
    controller_name = "jaxjob-controller"
    replica_specs_field = "jaxReplicaSpecs"
    replica_types = ("Worker",)
    default_container_name = "jax"
    default_port_name = "jaxjob-port"
    default_port = 6666
    default_restart_policy = "Never"

    def is_master_role(self, job: dict, rtype: str, index: int) -> bool:
        raise NotImplementedError

    def pod_env(self, job: dict, rtype: str, index: int, addressing: Addressing) -> list[dict]:
        raise NotImplementedError

    def update_status(self, job: dict, replicas: list[ReplicaState], st: StatusWriter) -> None:
        raise NotImplementedError
