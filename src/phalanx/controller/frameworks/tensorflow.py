"""TFJob: TF_CONFIG and status rules (docs/REFERENCE.md §5.2, §6.4)."""
from __future__ import annotations

import json

from phalanx.controller.conditions import FAILED, RESTARTING, RUNNING, SUCCEEDED, StatusWriter
from phalanx.controller.fields import as_dict, as_int, as_list, namespace, spec
from phalanx.controller.frameworks.base import Addressing, Framework, ReplicaState, env_var, replicas_of
from phalanx.objects.meta import name_of

CHIEF, EVALUATOR, MASTER, PS, WORKER = "Chief", "Evaluator", "Master", "PS", "Worker"


def _exit_code(pod: dict | None, container: str) -> int | None:
    for cs in as_list(as_dict(as_dict(pod).get("status")).get("containerStatuses")):
        if isinstance(cs, dict) and cs.get("name") == container:
            term = as_dict(as_dict(cs.get("state")).get("terminated"))
            if term:
                return as_int(term.get("exitCode"))
    return None


class TensorFlowFramework(Framework):
    kind = "TFJob"
    controller_name = "tfjob-controller"
    replica_specs_field = "tfReplicaSpecs"
    # The original's fixed status order (tfjob_controller.go UpdateJobStatus).
    replica_types = (CHIEF, EVALUATOR, MASTER, PS, WORKER)
    default_container_name = "tensorflow"
    default_port_name = "tfjob-port"
    default_port = 2222
    default_restart_policy = "Never"

    def has_chief_or_master(self, job: dict) -> bool:
        return any(t in (CHIEF, MASTER) for t, _ in self.replica_specs(job))

    def is_master_role(self, job: dict, rtype: str, index: int) -> bool:
        if self.has_chief_or_master(job):
            return rtype in (CHIEF, MASTER)
        return rtype == WORKER and index == 0

    def is_distributed(self, job: dict) -> bool:
        return sum(replicas_of(s) for t, s in self.replica_specs(job) if t in self.replica_types) != 1

    def tf_config(self, job: dict, rtype: str, index: int, addressing: Addressing) -> str:
        """Compact JSON as Go's json.Marshal writes it: cluster keys sorted,
        then task, then environment (sparse format with enableDynamicWorker)."""
        cluster: dict[str, list[str]] = {}
        for t, s in self.replica_specs(job):
            cluster[t.lower()] = [
                f"{addressing.host(t, i, fqdn=True)}:{addressing.port(t, i, self.default_port_name, self.default_port)}"
                for i in range(replicas_of(s))
            ]
        rt = rtype.lower()
        task = {"type": rt, "index": index}
        if spec(job).get("enableDynamicWorker") is True:
            worker: dict[str, str] = {}
            ps: list[str] | None = []
            if rt == "ps":
                ps = [cluster[rt][index]] if index < len(cluster.get(rt, [])) else []
            elif rt == "worker":
                ps = cluster.get("ps")  # nil slice -> null, as the original
                if index < len(cluster.get(rt, [])):
                    worker[str(index)] = cluster[rt][index]
            cfg: dict = {"sparseCluster": {"worker": worker, "ps": ps}, "task": task}
        else:
            cfg = {"cluster": dict(sorted(cluster.items())), "task": task, "environment": "cloud"}
        return json.dumps(cfg, separators=(",", ":"))

    def pod_env(self, job: dict, rtype: str, index: int, addressing: Addressing) -> list[dict]:
        if not self.is_distributed(job):
            return []
        return [env_var("TF_CONFIG", self.tf_config(job, rtype, index, addressing))]

    def env_targets(self, containers: list[dict]) -> list[dict]:
        """Only the first container named ``tensorflow``."""
        for c in containers:
            if c.get("name") == self.default_container_name:
                return [c]
        return []

    def update_status(self, job: dict, replicas: list[ReplicaState], st: StatusWriter) -> None:
        """Chief/Master decides if present, else worker-0 (or all workers)."""
        jname, ns = name_of(job), namespace(job)
        by_type = {r.rtype: r for r in replicas}
        worker = by_type.get(WORKER)
        if worker is None:
            worker0_completed = True
        else:
            pod0 = worker.pods[0] if worker.pods else None
            worker0_completed = (
                pod0 is not None
                and as_dict(pod0.get("status")).get("phase") == "Succeeded"
                and _exit_code(pod0, self.default_container_name) == 0
            )
        restarting = st.condition(RESTARTING)
        remembered = (restarting.get("reason"), restarting.get("message")) if restarting else None
        chief_or_master = CHIEF in by_type or MASTER in by_type
        all_workers = spec(job).get("successPolicy") == "AllWorkers"
        dynamic = spec(job).get("enableDynamicWorker") is True
        for t in self.replica_types:
            r = by_type.get(t)
            if r is None:
                continue
            expected = r.replicas - r.succeeded
            running = r.active
            if chief_or_master:
                if t in (CHIEF, MASTER):
                    if running > 0:
                        st.set(RUNNING, st.reason("Running"), f"TFJob {ns}/{jname} is running.", event="Normal")
                    if expected == 0:
                        st.set_completion_time()
                        st.set(SUCCEEDED, st.reason("Succeeded"), f"TFJob {ns}/{jname} successfully completed.",
                               event="Normal")
            elif t == WORKER:
                if expected == 0 or (worker0_completed and not all_workers):
                    st.set_completion_time()
                    st.set(SUCCEEDED, st.reason("Succeeded"), f"TFJob {ns}/{jname} successfully completed.",
                           event="Normal")
                elif running > 0:
                    st.set(RUNNING, st.reason("Running"), f"TFJob {ns}/{jname} is running.", event="Normal")
            if r.failed > 0:
                if remembered is not None:
                    st.set(RESTARTING, str(remembered[0] or st.reason("Restarting")), str(remembered[1] or ""),
                           event="Warning")
                elif dynamic and t == WORKER:
                    continue
                else:
                    st.set_completion_time()
                    st.set(FAILED, st.reason("Failed"),
                           f"TFJob {ns}/{jname} has failed because {r.failed} {t} replica(s) failed.", event="Normal")
