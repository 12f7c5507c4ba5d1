"""PyTorchJob: env, worker init container, status rules (docs/REFERENCE.md §5.1, §6.3)."""
from __future__ import annotations

from typing import Mapping

from phalanx.controller.conditions import FAILED, RESTARTING, RUNNING, SUCCEEDED, StatusWriter
from phalanx.controller.fields import as_int, as_list, as_str, namespace, spec
from phalanx.controller.frameworks.base import Addressing, Framework, ReplicaState, env_var, replicas_of
from phalanx.objects.meta import name_of
from phalanx.objects.names import is_dns_subdomain

MASTER = "Master"
WORKER = "Worker"

class PyTorchFramework(Framework):
    kind = "PyTorchJob"
    controller_name = "pytorchjob-controller"
    replica_specs_field = "pytorchReplicaSpecs"
    replica_types = (MASTER, WORKER)
    default_container_name = "pytorch"
    default_port_name = "pytorchjob-port"
    default_port = 23456
    default_restart_policy = "OnFailure"
    sets_replica_selector = True

    def has_master(self, job: dict) -> bool:
        return self.replica_spec(job, MASTER) is not None

    def is_master_role(self, job: dict, rtype: str, index: int) -> bool:
        if self.has_master(job):
            return rtype == MASTER
        return rtype == WORKER and index == 0

    def owned_kinds(self, options) -> tuple[str, ...]:
        """The HorizontalPodAutoscaler of an elastic job with metrics (controller.job.hpa)."""
        return ("HorizontalPodAutoscaler",)

    def gang_size(self, job: dict) -> int:
        """Elastic: the gang is the job's minimum, the other replicas plus ``minReplicas`` workers, so
        workers above it start as capacity allows and may be lost without breaking the gang
        (docs/SEMANTICS.md, elastic jobs)."""
        ep = spec(job).get("elasticPolicy")
        total = self.total_replicas(job)
        if not isinstance(ep, dict):
            return total
        workers = replicas_of(self.replica_spec(job, WORKER) or {})
        lo = as_int(ep.get("minReplicas"))
        if lo is None:
            lo = as_int(ep.get("maxReplicas"))
        if lo is None or lo < 0 or lo >= workers:
            return total
        return total - workers + lo

    def runs_on_without_evicted(self, job: dict, running: Mapping[str, int]) -> bool:
        """Elastic: while every other replica and at least ``minReplicas`` workers run, the workers
        evicted above that are lost capacity, not a restart: torchrun's group forms again smaller."""
        ep = spec(job).get("elasticPolicy")
        if not isinstance(ep, dict):
            return False
        floor = self.gang_size(job)
        others = [(rt, replicas_of(rs)) for rt, rs in self.replica_specs(job) if rt != WORKER]
        workers = floor - sum(n for _, n in others)
        return all(running.get(rt, 0) >= n for rt, n in others) and running.get(WORKER, 0) >= workers

    def _nproc_int(self, job: dict) -> int:
        n = as_int(spec(job).get("nprocPerNode"))
        return n if n is not None and n > 0 else 1

    def pod_env(self, job: dict, rtype: str, index: int, addressing: Addressing) -> list[dict]:
        s = spec(job)
        total = self.total_replicas(job)
        env = [env_var("PYTHONUNBUFFERED", "1")]
        if self.has_master(job):
            port = addressing.port(MASTER, 0, self.default_port_name, self.default_port)
            host = addressing.host(MASTER, 0)
            rank = index + 1 if rtype == WORKER else index
            env += [
                env_var("MASTER_PORT", port), env_var("PET_MASTER_PORT", port),
                env_var("MASTER_ADDR", host), env_var("PET_MASTER_ADDR", host),
                env_var("WORLD_SIZE", total * self._nproc_int(job)),
                env_var("RANK", rank), env_var("PET_NODE_RANK", rank),
            ]
        nproc = s.get("nprocPerNode")
        if isinstance(nproc, (str, int)) and not isinstance(nproc, bool):
            env.append(env_var("PET_NPROC_PER_NODE", nproc))
        elastic = s.get("elasticPolicy")
        if isinstance(elastic, dict):
            env += self._elastic_env(job, elastic, addressing)
        else:
            env.append(env_var("PET_NNODES", total))
        return env

    def _elastic_env(self, job: dict, ep: dict, addressing: Addressing) -> list[dict]:
        host = as_str(ep.get("rdzvHost")) or addressing.host(WORKER, 0)
        port = as_int(ep.get("rdzvPort"))
        if port is None:
            port = addressing.port(WORKER, 0, self.default_port_name, self.default_port)
        env = [env_var("PET_RDZV_ENDPOINT", f"{host}:{port}"),
               env_var("PET_RDZV_BACKEND", as_str(ep.get("rdzvBackend")) or "c10d")]
        lo, hi = as_int(ep.get("minReplicas")), as_int(ep.get("maxReplicas"))
        if lo is None and hi is None:
            env.append(env_var("PET_NNODES", replicas_of(self.replica_spec(job, WORKER) or {})))
        else:
            lo = lo if lo is not None else hi
            hi = hi if hi is not None else lo
            env.append(env_var("PET_NNODES", f"{lo}:{hi}"))
        if as_int(ep.get("maxRestarts")) is not None:
            env.append(env_var("PET_MAX_RESTARTS", as_int(ep.get("maxRestarts"))))
        if as_int(ep.get("nProcPerNode")) is not None:
            env.append(env_var("PET_NPROC_PER_NODE", as_int(ep.get("nProcPerNode"))))
        if isinstance(ep.get("rdzvId"), str):
            env.append(env_var("PET_RDZV_ID", ep["rdzvId"]))
        conf = [c for c in as_list(ep.get("rdzvConf")) if isinstance(c, dict)]
        if conf:
            env.append(env_var("PET_RDZV_CONF", ",".join(f"{as_str(c.get('key'))}={as_str(c.get('value'))}" for c in conf)))
        if ep.get("standalone") is True:
            env.append(env_var("PET_STANDALONE", ""))
        return env

    def init_containers(self, job: dict, rtype: str, index: int, options, addressing: Addressing) -> list[dict]:
        """``init-pytorch`` on workers when a master exists: wait until the master is reachable."""
        if rtype != WORKER or not self.has_master(job):
            return []
        master = addressing.host(MASTER, 0)
        if options.local_runtime and options.init_container_command:
            command = [*options.init_container_command, master]
        else:
            if not is_dns_subdomain(master):  # never splice an odd string into a shell script
                return []
            tries = max(1, int(options.init_container_max_tries))
            command = ["sh", "-c",
                       f"err=1;for i in $(seq {tries}); do if nslookup {master}; then err=0 && break; "
                       f"fi;echo waiting for master; sleep 2; done; exit $err"]
        return [{
            "name": "init-pytorch",
            "image": options.init_container_image,
            "imagePullPolicy": "IfNotPresent",
            "command": command,
            "resources": {"limits": {"cpu": "100m", "memory": "20Mi"},
                          "requests": {"cpu": "50m", "memory": "10Mi"}},
        }]

    def update_status(self, job: dict, replicas: list[ReplicaState], st: StatusWriter) -> None:
        """The original's PyTorchJob rules, in the fixed order Master, Worker (the original used map order)."""
        jname, ns = name_of(job), namespace(job)
        has_master = any(r.rtype == MASTER for r in replicas)
        elastic = isinstance(spec(job).get("elasticPolicy"), dict)
        for r in replicas:
            expected = r.replicas - r.succeeded
            running = r.active
            if has_master:
                if r.rtype == MASTER:
                    if running > 0:
                        st.set(RUNNING, st.reason("Running"), f"PyTorchJob {jname} is running.", event="Normal")
                    if expected == 0:
                        msg = f"PyTorchJob {jname} is successfully completed."
                        st.set_completion_time()
                        st.set(SUCCEEDED, st.reason("Succeeded"), msg, event="Normal")
                        return
            elif r.rtype == WORKER:
                if expected == 0 or (elastic and r.succeeded > 0):
                    st.set_completion_time()
                    st.set(SUCCEEDED, st.reason("Succeeded"), f"PyTorchJob {ns}/{jname} successfully completed.",
                           event="Normal")
                elif running > 0:
                    st.set(RUNNING, st.reason("Running"), f"PyTorchJob {ns}/{jname} is running.", event="Normal")
            if r.failed > 0 and r.replicas > r.succeeded + running:
                if r.restart_policy != "Never":
                    msg = f"PyTorchJob {jname} is restarting because {r.failed} {r.rtype} replica(s) failed."
                    st.set(RESTARTING, st.reason("Restarting"), msg, event="Warning")
                else:
                    msg = f"PyTorchJob {jname} is failed because {r.failed} {r.rtype} replica(s) failed."
                    st.set_completion_time()
                    st.set(FAILED, st.reason("Failed"), msg, event="Normal")
