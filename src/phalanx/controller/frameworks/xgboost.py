"""XGBoostJob: env and status rules (docs/REFERENCE.md §5.3, §6.6), in the fixed order Master, Worker."""
from __future__ import annotations

from phalanx.controller.conditions import FAILED, RESTARTING, RUNNING, SUCCEEDED, StatusWriter
from phalanx.controller.frameworks.base import Addressing, Framework, ReplicaState, env_var, replicas_of
from phalanx.objects.meta import name_of

MASTER = "Master"
WORKER = "Worker"


class XGBoostFramework(Framework):
    kind = "XGBoostJob"
    controller_name = "xgboostjob-controller"
    replica_specs_field = "xgbReplicaSpecs"
    replica_types = (MASTER, WORKER)
    default_container_name = "xgboost"
    default_port_name = "xgboostjob-port"
    default_port = 9999
    default_restart_policy = "Never"

    def is_master_role(self, job: dict, rtype: str, index: int) -> bool:
        """Every Master pod (the original compares the type only)."""
        return rtype == MASTER

    def pod_env(self, job: dict, rtype: str, index: int, addressing: Addressing) -> list[dict]:
        """``SetPodEnv`` order: MASTER_PORT, MASTER_ADDR, WORLD_SIZE, RANK,
        PYTHONUNBUFFERED, then (LightGBM, more than one pod) WORKER_PORT and
        WORKER_ADDRS.

        WORKER_ADDRS lists ``total - 1`` worker hosts, as the original (the worker
        count, the Master being exactly one). WORKER_PORT is worker-0's effective
        port: in Kubernetes every worker declares the same port; on the local
        runtime host ports are unique on the machine, so the other workers' Services
        were given other host ports and WORKER_PORT is only exact for worker-0.
        """
        total = self.total_replicas(job)
        rank = index
        if rtype == WORKER:
            rank += replicas_of(self.replica_spec(job, MASTER) or {"replicas": 0})
        env = [
            env_var("MASTER_PORT", addressing.port(MASTER, 0, self.default_port_name, self.default_port)),
            env_var("MASTER_ADDR", addressing.host(MASTER, 0)),
            env_var("WORLD_SIZE", total),
            env_var("RANK", rank),
            env_var("PYTHONUNBUFFERED", "1"),
        ]
        if total > 1:
            env.append(env_var("WORKER_PORT", addressing.port(WORKER, 0, self.default_port_name, self.default_port)))
            env.append(env_var("WORKER_ADDRS", ",".join(addressing.host(WORKER, i) for i in range(total - 1))))
        return env

    def _in_order(self, replicas: list[ReplicaState]) -> list[ReplicaState]:
        rank = {t: i for i, t in enumerate(self.replica_types)}
        return sorted(replicas, key=lambda r: (rank.get(r.rtype, len(rank)), r.rtype))

    def update_status(self, job: dict, replicas: list[ReplicaState], st: StatusWriter) -> None:
        """The original's XGBoostJob rules in the fixed order Master, Worker (it used map order).

        The Master decides Running and success (early return). Any failed replica
        first sets Running, then Restarting under ExitCode, else Failed, whatever
        the policy (OnFailure and Always included), as the original.
        """
        jname = name_of(job)
        running_msg = f"XGBoostJob {jname} is running."
        for r in self._in_order(replicas):
            expected = r.replicas - r.succeeded
            if r.rtype == MASTER:
                if r.active > 0:
                    st.set(RUNNING, st.reason("Running"), running_msg, event="Normal")
                if expected == 0:
                    st.set(RUNNING, st.reason("Running"), running_msg, event="Normal")
                    st.set_completion_time()
                    st.set(SUCCEEDED, st.reason("Succeeded"), f"XGBoostJob {jname} is successfully completed.",
                           event="Normal")
                    return
            if r.failed > 0:
                st.set(RUNNING, st.reason("Running"), running_msg, event="Normal")
                if r.restart_policy == "ExitCode":
                    msg = f"XGBoostJob {jname} is restarting because {r.failed} {r.rtype} replica(s) failed."
                    st.set(RESTARTING, st.reason("Restarting"), msg, event="Warning")
                else:
                    msg = f"XGBoostJob {jname} is failed because {r.failed} {r.rtype} replica(s) failed."
                    st.set_completion_time()
                    st.set(FAILED, st.reason("Failed"), msg, event="Normal")
