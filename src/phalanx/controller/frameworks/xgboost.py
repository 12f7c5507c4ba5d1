"""XGBoostJob: env (reference §5) and status rules (§6). SKELETON: hooks to be written."""
from __future__ import annotations

from ..job.conditions import StatusWriter
from .base import Addressing, Framework, ReplicaState


class XGBoostFramework(Framework):
    kind = "XGBoostJob"
    controller_name = "xgboostjob-controller"
    replica_specs_field = "xgbReplicaSpecs"
    replica_types = ("Master", "Worker")
    default_container_name = "xgboost"
    default_port_name = "xgboostjob-port"
    default_port = 9999
    default_restart_policy = "Never"

    def is_master_role(self, job: dict, rtype: str, index: int) -> bool:
        raise NotImplementedError

    def pod_env(self, job: dict, rtype: str, index: int, addressing: Addressing) -> list[dict]:
        raise NotImplementedError

    def update_status(self, job: dict, replicas: list[ReplicaState], st: StatusWriter) -> None:
        raise NotImplementedError
