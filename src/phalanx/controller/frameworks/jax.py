"""JAXJob: env and status rules (docs/REFERENCE.md §5.5, §6.8)."""
from __future__ import annotations

from phalanx.controller.conditions import FAILED, RESTARTING, RUNNING, SUCCEEDED, StatusWriter
from phalanx.controller.fields import namespace
from phalanx.controller.frameworks.base import Addressing, Framework, ReplicaState, env_var
from phalanx.objects.meta import name_of

WORKER = "Worker"


class JAXFramework(Framework):
    kind = "JAXJob"
    controller_name = "jaxjob-controller"
    replica_specs_field = "jaxReplicaSpecs"
    replica_types = (WORKER,)
    default_container_name = "jax"
    default_port_name = "jaxjob-port"
    default_port = 6666
    default_restart_policy = "Never"
    sets_replica_selector = True

    def is_master_role(self, job: dict, rtype: str, index: int) -> bool:
        """Index 0 of any replica type, as the original."""
        return index == 0

    def pod_env(self, job: dict, rtype: str, index: int, addressing: Addressing) -> list[dict]:
        """``setPodEnv`` order: PYTHONUNBUFFERED, COORDINATOR_PORT (Worker-0's
        effective port), COORDINATOR_ADDRESS (Worker-0's host, no port),
        NUM_PROCESSES, PROCESS_ID (the index)."""
        return [
            env_var("PYTHONUNBUFFERED", "1"),
            env_var("COORDINATOR_PORT", addressing.port(WORKER, 0, self.default_port_name, self.default_port)),
            env_var("COORDINATOR_ADDRESS", addressing.host(WORKER, 0)),
            env_var("NUM_PROCESSES", self.total_replicas(job)),
            env_var("PROCESS_ID", index),
        ]

    def _in_order(self, replicas: list[ReplicaState]) -> list[ReplicaState]:
        rank = {t: i for i, t in enumerate(self.replica_types)}
        return sorted(replicas, key=lambda r: (rank.get(r.rtype, len(rank)), r.rtype))

    def update_status(self, job: dict, replicas: list[ReplicaState], st: StatusWriter) -> None:
        """All workers succeeded -> Succeeded, else any running -> Running;
        a failed replica not yet replaced -> Restarting unless its policy is
        Never, which fails the job."""
        jname, ns = name_of(job), namespace(job)
        for r in self._in_order(replicas):
            expected = r.replicas - r.succeeded
            running = r.active
            if r.rtype == WORKER:
                if expected == 0:
                    st.set_completion_time()
                    st.set(SUCCEEDED, st.reason("Succeeded"), f"JAXJob {ns}/{jname} successfully completed.",
                           event="Normal")
                elif running > 0:
                    st.set(RUNNING, st.reason("Running"), f"JAXJob {ns}/{jname} is running.", event="Normal")
            if r.failed > 0 and r.replicas > r.succeeded + running:
                if r.restart_policy != "Never":
                    msg = f"JAXJob {jname} is restarting because {r.failed} {r.rtype} replica(s) failed."
                    st.set(RESTARTING, st.reason("Restarting"), msg, event="Warning")
                else:
                    msg = f"JAXJob {jname} is failed because {r.failed} {r.rtype} replica(s) failed."
                    st.set_completion_time()
                    st.set(FAILED, st.reason("Failed"), msg, event="Normal")
