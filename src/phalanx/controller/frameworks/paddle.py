"""PaddleJob: env (reference §5) and status rules (§6). SKELETON: hooks to be written."""
from __future__ import annotations

from ..job.conditions import StatusWriter
from .base import Addressing, Framework, ReplicaState


class PaddleFramework(Framework):
    kind = "PaddleJob"
    controller_name = "paddlejob-controller"
    replica_specs_field = "paddleReplicaSpecs"
    replica_types = ("Master", "Worker")
    default_container_name = "paddle"
    default_port_name = "master"
    default_port = 36543
    default_restart_policy = "OnFailure"

    def is_master_role(self, job: dict, rtype: str, index: int) -> bool:
        raise NotImplementedError

    def pod_env(self, job: dict, rtype: str, index: int, addressing: Addressing) -> list[dict]:
        raise NotImplementedError

    def update_status(self, job: dict, replicas: list[ReplicaState], st: StatusWriter) -> None:
        raise NotImplementedError
