"""PaddleJob: env and status rules (docs/REFERENCE.md §5.4, §6.7), in the fixed order Master, Worker."""
from __future__ import annotations

from phalanx.controller.conditions import FAILED, RESTARTING, RUNNING, SUCCEEDED, StatusWriter
from phalanx.controller.fields import namespace
from phalanx.controller.frameworks.base import Addressing, Framework, ReplicaState, env_var
from phalanx.objects.meta import name_of

MASTER = "Master"
WORKER = "Worker"
POD_IP_DUMMY = "POD_IP_DUMMY"


class PaddleFramework(Framework):
    kind = "PaddleJob"
    controller_name = "paddlejob-controller"
    replica_specs_field = "paddleReplicaSpecs"
    replica_types = (MASTER, WORKER)
    default_container_name = "paddle"
    default_port_name = "master"
    default_port = 36543
    default_restart_policy = "OnFailure"
    sets_replica_selector = True

    def has_master(self, job: dict) -> bool:
        """PS mode when a Master spec exists, collective mode otherwise."""
        return self.replica_spec(job, MASTER) is not None

    def is_master_role(self, job: dict, rtype: str, index: int) -> bool:
        """Every Master pod (the original compares the type only)."""
        return rtype == MASTER

    def pod_env(self, job: dict, rtype: str, index: int, addressing: Addressing) -> list[dict]:
        """``setPodEnv``: PYTHONUNBUFFERED, PADDLE_JOB_ID, PADDLE_NNODES, then
        PADDLE_MASTER, the rendezvous endpoint: Master-0 in PS mode, Worker-0 in
        collective mode. That pod itself gets POD_IP_DUMMY (its own podIP) first,
        so ``$(POD_IP_DUMMY)`` in PADDLE_MASTER expands. PS mode adds
        PADDLE_SERVER_NUM=1 on Masters, PADDLE_TRAINER_NUM=1 on the others."""
        env = [
            env_var("PYTHONUNBUFFERED", "1"),
            env_var("PADDLE_JOB_ID", name_of(job)),
            env_var("PADDLE_NNODES", self.total_replicas(job)),
        ]
        ps_mode = self.has_master(job)
        rendezvous = MASTER if ps_mode else WORKER
        port = addressing.port(rendezvous, 0, self.default_port_name, self.default_port)
        # Collective mode tests the index only, as the original.
        if index == 0 and (not ps_mode or rtype == MASTER):
            env.append({"name": POD_IP_DUMMY, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
            env.append(env_var("PADDLE_MASTER", f"$({POD_IP_DUMMY}):{port}"))
        else:
            env.append(env_var("PADDLE_MASTER", f"{addressing.host(rendezvous, 0)}:{port}"))
        if ps_mode:
            env.append(env_var("PADDLE_SERVER_NUM" if rtype == MASTER else "PADDLE_TRAINER_NUM", "1"))
        return env

    def _in_order(self, replicas: list[ReplicaState]) -> list[ReplicaState]:
        rank = {t: i for i, t in enumerate(self.replica_types)}
        return sorted(replicas, key=lambda r: (rank.get(r.rtype, len(rank)), r.rtype))

    def update_status(self, job: dict, replicas: list[ReplicaState], st: StatusWriter) -> None:
        """PyTorch's rules without the elastic shortcut, in the fixed order
        Master, Worker (the original used map order, so a Master success could
        lose to a Worker failure seen first)."""
        jname, ns = name_of(job), namespace(job)
        has_master = any(r.rtype == MASTER for r in replicas)
        for r in self._in_order(replicas):
            expected = r.replicas - r.succeeded
            running = r.active
            if has_master:
                if r.rtype == MASTER:
                    if running > 0:
                        st.set(RUNNING, st.reason("Running"), f"PaddleJob {jname} is running.", event="Normal")
                    if expected == 0:
                        st.set_completion_time()
                        st.set(SUCCEEDED, st.reason("Succeeded"), f"PaddleJob {jname} is successfully completed.",
                               event="Normal")
                        return
            elif r.rtype == WORKER:
                if expected == 0:
                    st.set_completion_time()
                    st.set(SUCCEEDED, st.reason("Succeeded"), f"PaddleJob {ns}/{jname} successfully completed.",
                           event="Normal")
                elif running > 0:
                    st.set(RUNNING, st.reason("Running"), f"PaddleJob {ns}/{jname} is running.", event="Normal")
            if r.failed > 0 and r.replicas > r.succeeded + running:
                if r.restart_policy != "Never":
                    msg = f"PaddleJob {jname} is restarting because {r.failed} {r.rtype} replica(s) failed."
                    st.set(RESTARTING, st.reason("Restarting"), msg, event="Warning")
                else:
                    msg = f"PaddleJob {jname} is failed because {r.failed} {r.rtype} replica(s) failed."
                    st.set_completion_time()
                    st.set(FAILED, st.reason("Failed"), msg, event="Normal")
