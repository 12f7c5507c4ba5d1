"""MPIJob: launcher and worker pods, their ConfigMap and RBAC, status (docs/REFERENCE.md §5.6, §6.5).

The launcher runs ``mpirun``; Open MPI starts its daemons on the workers through
the rsh agent ``kubexec.sh`` from the job's ConfigMap ``<job>-config``, which also
holds the hostfile. Workers just sleep until a daemon is exec'd into them.

- Names: ``<job>-launcher`` and ``<job>-worker-<i>``; no Services. The launcher
  keeps the label ``replica-index=0`` (the original gives it none) so the shared
  reconciler slots it like every other pod; it alone gets ``job-role=master``.
- Kubernetes mode is the original: paths under ``/etc/mpi``, a ``kubectl-delivery``
  init container, ServiceAccount, Role (exec into the workers only) and RoleBinding
  ``<job>-launcher``, and ``kubexec.sh`` calling ``/opt/kube/kubectl exec``.
- Local runtime: the ConfigMap is materialised under each pod's root, so paths are
  ``$(PHALANX_ROOT)/etc/mpi/...``; ``kubexec.sh`` runs ``phalanx exec`` (no API
  server or RBAC needed, so the ConfigMap is the only owned object); the launcher's
  init container (still named ``kubectl-delivery``) waits until every worker pod
  runs, so ``mpirun`` never reaches a worker that is not there yet. All pods share
  this machine's loopback while Open MPI believes each worker is another host, so
  ranks talk over TCP, whose transport skips ``lo`` by default: on a machine with
  no other interface the first message fails (MPI_ERR_INTERN, seen in a
  loopback-only network namespace). The launcher therefore pins the TCP transport,
  and the daemons' out-of-band channel with it, to ``lo`` unless the user set them;
  mpirun passes both on to its daemons and ranks.
- Status, with Phalanx's fixes: a fixed Launcher-then-Worker order, reason
  ``MPIJobFailed`` (not ``MPIJobMPIJobFailed``), event ``MPIJobSucceeded`` (not
  ``mpijobsSucceeded``), a completionTime on every finish, and the evicted-worker
  failure (``MPIJobEvicted``) kept instead of being overwritten.
- Restarts: the shared machinery applies as for every kind, so a Failed worker or
  launcher is recreated as its restartPolicy says (the original never recreates a
  worker and fails the job on any failure but ExitCode's); a failure under Never
  fails the job.
"""
from __future__ import annotations

import shlex

from phalanx.api.constants import LABEL_REPLICA_TYPE
from phalanx.controller.conditions import FAILED, RESTARTING, RUNNING, SUCCEEDED, StatusWriter
from phalanx.controller.fields import as_dict, as_int, as_list, as_str, namespace, pod_phase, spec, status
from phalanx.controller.frameworks.base import Addressing, Framework, ReplicaState, env_var, general_name, replicas_of
from phalanx.objects.meta import labels_of, name_of

LAUNCHER = "Launcher"
WORKER = "Worker"

CONFIG_SUFFIX = "-config"
CONFIG_VOLUME = "mpi-job-config"
CONFIG_MOUNT = "/etc/mpi"
KUBEXEC = "kubexec.sh"
HOSTFILE = "hostfile"
DISCOVER_HOSTS = "discover_hosts.sh"
KUBECTL_DELIVERY = "kubectl-delivery"
KUBECTL_VOLUME = "mpi-job-kubectl"
KUBECTL_MOUNT = "/opt/kube"
SCRIPT_MODE = 0o555
HOSTFILE_MODE = 0o444
LOCAL_ROOT = "$(PHALANX_ROOT)"  # the pod's root on the local runtime, defined first in every container
POD_WAIT_TIMEOUT = 600  # seconds the launcher waits for its workers (local runtime)
DEFAULT_EXEC_COMMAND = ("phalanx", "exec")
DEFAULT_POD_WAIT_COMMAND = ("python3", "-m", "phalanx.node.podwait")
RBAC_GROUP = "rbac.authorization.k8s.io"
LOCAL_TRANSPORT_ENV = ("OMPI_MCA_btl_tcp_if_include", "OMPI_MCA_oob_tcp_if_include")


def _pod_spec(rspec: dict | None) -> dict:
    return as_dict(as_dict(as_dict(rspec).get("template")).get("spec"))


class MPIFramework(Framework):
    kind = "MPIJob"
    controller_name = "mpijob-controller"
    replica_specs_field = "mpiReplicaSpecs"
    replica_types = (LAUNCHER, WORKER)
    default_container_name = "mpi"
    default_port_name = "mpi-port"
    default_port = 9999
    default_restart_policy = "Never"
    creates_services = False

    # ---- names and spec reading ----------------------------------------------------------

    def pod_name(self, job: dict, rtype: str, index: int) -> str:
        if rtype == LAUNCHER:
            return f"{name_of(job)}-launcher"
        return general_name(name_of(job), rtype.lower(), index)

    def launcher_name(self, job: dict) -> str:
        return f"{name_of(job)}-launcher"

    def config_name(self, job: dict) -> str:
        return f"{name_of(job)}{CONFIG_SUFFIX}"

    def worker_names(self, job: dict) -> list[str]:
        rspec = self.replica_spec(job, WORKER)
        n = replicas_of(rspec) if rspec is not None else 0
        return [self.pod_name(job, WORKER, i) for i in range(n)]

    def slots_per_worker(self, job: dict) -> int:
        n = as_int(spec(job).get("slotsPerWorker"))
        return 1 if n is None else n

    def main_container(self, job: dict) -> str:
        return as_str(spec(job).get("mainContainer"))

    def is_gpu_launcher(self, job: dict) -> bool:
        """A launcher container limit named ``*.com/gpu`` or containing ``gpu`` (the original's test)."""
        for c in as_list(_pod_spec(self.replica_spec(job, LAUNCHER)).get("containers")):
            for key in as_dict(as_dict(as_dict(c).get("resources")).get("limits")):
                if isinstance(key, str) and (key.endswith(".com/gpu") or "gpu" in key):
                    return True
        return False

    def is_master_role(self, job: dict, rtype: str, index: int) -> bool:
        return rtype == LAUNCHER

    def pod_env(self, job: dict, rtype: str, index: int, addressing: Addressing) -> list[dict]:
        return []  # the launcher's env depends on the user's own: decorate_pod adds it

    def env_targets(self, containers: list[dict]) -> list[dict]:
        return []

    # ---- paths ---------------------------------------------------------------------------

    @staticmethod
    def config_path(file: str, options) -> str:
        """Where a ConfigMap file is seen from the container: under the pod's root locally."""
        root = LOCAL_ROOT if options.local_runtime else ""
        return f"{root}{CONFIG_MOUNT}/{file}"

    # ---- the ConfigMap -------------------------------------------------------------------

    def kubexec(self, job: dict, options) -> str:
        """The rsh agent: ``kubexec.sh <pod> <command...>`` runs the command in that pod."""
        main = self.main_container(job)
        container = f" --container {shlex.quote(main)}" if main else ""
        if options.local_runtime:
            argv = [*(options.exec_command or DEFAULT_EXEC_COMMAND), "-n", namespace(job)]
            runner = " ".join(shlex.quote(str(a)) for a in argv) + container + " ${POD_NAME}"
        else:
            runner = f"{KUBECTL_MOUNT}/kubectl exec ${{POD_NAME}}{container}"
        return f'#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n{runner} -- /bin/sh -c "$*"'

    def hostfile(self, job: dict) -> str:
        slots = self.slots_per_worker(job)
        lines = [f"{self.launcher_name(job)} slots={slots}\n"] if self.is_gpu_launcher(job) else []
        lines += [f"{w} slots={slots}\n" for w in self.worker_names(job)]
        return "".join(lines)

    def discover_hosts(self, job: dict, pods: list[dict]) -> str:
        """``echo <pod>:<slots>`` for every running worker, sorted (the original's
        text, including the blank line after a GPU launcher's entry)."""
        slots = self.slots_per_worker(job)
        text = "#!/bin/sh"
        if self.is_gpu_launcher(job):
            text += f"\necho {self.launcher_name(job)}:{slots}\n"
        running = sorted(name_of(p) for p in pods
                         if as_str(labels_of(p).get(LABEL_REPLICA_TYPE)) == WORKER.lower() and pod_phase(p) == "Running")
        for pod_name in running:
            text += f"\necho {pod_name}:{slots}"
        return text

    def config_map(self, job: dict, pods: list[dict], options) -> dict:
        return {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": self.config_name(job), "namespace": namespace(job), "labels": {"app": name_of(job)}},
            "data": {
                HOSTFILE: self.hostfile(job),
                KUBEXEC: self.kubexec(job, options),
                DISCOVER_HOSTS: self.discover_hosts(job, pods),
            },
        }

    # ---- owned objects -------------------------------------------------------------------

    def owned_kinds(self, options) -> tuple[str, ...]:
        if options.local_runtime:
            return ("ConfigMap",)
        return ("ConfigMap", "ServiceAccount", "Role", "RoleBinding")

    def launcher_service_account(self, job: dict) -> tuple[str, bool]:
        """The launcher's ServiceAccount and whether the job creates it (the template's own is the user's)."""
        own = as_str(_pod_spec(self.replica_spec(job, LAUNCHER)).get("serviceAccountName"))
        return (own, False) if own else (self.launcher_name(job), True)

    def owned_objects(self, job: dict, pods: list[dict], options) -> list[dict]:
        objs = [self.config_map(job, pods, options)]
        if options.local_runtime:
            return objs
        ns, launcher = namespace(job), self.launcher_name(job)
        meta = {"name": launcher, "namespace": ns, "labels": {"app": name_of(job)}}
        sa, create_sa = self.launcher_service_account(job)
        if create_sa:
            objs.append({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": dict(meta)})
        exec_rule: dict = {"verbs": ["create"], "apiGroups": [""], "resources": ["pods/exec"]}
        workers = self.worker_names(job)
        if workers:  # Go's nil slice is omitted
            exec_rule["resourceNames"] = workers
        objs.append({
            "apiVersion": f"{RBAC_GROUP}/v1", "kind": "Role", "metadata": dict(meta),
            "rules": [{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]}, exec_rule],
        })
        objs.append({
            "apiVersion": f"{RBAC_GROUP}/v1", "kind": "RoleBinding", "metadata": dict(meta),
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}],
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": launcher},
        })
        return objs

    # ---- pods ----------------------------------------------------------------------------

    def init_containers(self, job: dict, rtype: str, index: int, options, addressing: Addressing) -> list[dict]:
        """The launcher's ``kubectl-delivery``: the original's (copies kubectl), or, on the
        local runtime, a wait until every worker pod runs."""
        if rtype != LAUNCHER:
            return []
        ns = namespace(job)
        container: dict = {"name": KUBECTL_DELIVERY, "image": options.mpi_kubectl_delivery_image,
                           "imagePullPolicy": "IfNotPresent"}
        if options.local_runtime:
            workers = self.worker_names(job)
            if not workers:
                return []
            container["command"] = [*(options.pod_wait_command or DEFAULT_POD_WAIT_COMMAND),
                                    "-n", ns, "--timeout", str(POD_WAIT_TIMEOUT), *workers]
            return [container]
        resources = {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"}
        container.update({
            "env": [env_var("TARGET_DIR", KUBECTL_MOUNT), env_var("NAMESPACE", ns)],
            "volumeMounts": [{"name": KUBECTL_VOLUME, "mountPath": KUBECTL_MOUNT},
                             {"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT}],
            "resources": {"limits": dict(resources), "requests": dict(resources)},
        })
        return [container]

    def _config_volume(self, job: dict, items: list[tuple[str, int]]) -> dict:
        return {"name": CONFIG_VOLUME, "configMap": {
            "name": self.config_name(job),
            "items": [{"key": k, "path": k, "mode": mode} for k, mode in items],
        }}

    def decorate_pod(self, job: dict, rtype: str, index: int, pod: dict, options) -> None:
        pod_spec = pod["spec"]
        containers = [c for c in as_list(pod_spec.get("containers")) if isinstance(c, dict)]
        if not containers:
            return  # refused at admission; nothing to wire
        volumes = [v for v in as_list(pod_spec.get("volumes")) if isinstance(v, dict)]
        if rtype == WORKER:
            c = containers[0]
            if not as_list(c.get("command")):
                c["command"], c["args"] = ["sleep"], ["365d"]
            # Open MPI checks that the rsh agent exists on every rank's host.
            c["volumeMounts"] = [*as_list(c.get("volumeMounts")), {"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT}]
            pod_spec["volumes"] = [*volumes, self._config_volume(job, [(KUBEXEC, SCRIPT_MODE)])]
            return
        if rtype != LAUNCHER:
            return
        main = self.main_container(job)
        c = next((x for x in containers if main and x.get("name") == main), containers[0])
        user_env = [e for e in as_list(c.get("env"))]
        given = {as_str(as_dict(e).get("name")) for e in user_env}
        kubexec = self.config_path(KUBEXEC, options)
        env = [env_var("OMPI_MCA_plm_rsh_agent", kubexec),
               env_var("OMPI_MCA_orte_default_hostfile", self.config_path(HOSTFILE, options))]
        if not self.is_gpu_launcher(job):
            env += [env_var("NVIDIA_VISIBLE_DEVICES", ""), env_var("NVIDIA_DRIVER_CAPABILITIES", "")]
        if "I_MPI_HYDRA_BOOTSTRAP" not in given:
            env.append(env_var("I_MPI_HYDRA_BOOTSTRAP", "rsh"))
        if "I_MPI_HYDRA_BOOTSTRAP_EXEC" not in given:
            env.append(env_var("I_MPI_HYDRA_BOOTSTRAP_EXEC", kubexec))
        if options.local_runtime:
            env += [env_var(n, "lo") for n in LOCAL_TRANSPORT_ENV if n not in given]
        c["env"] = user_env + env
        mounts = as_list(c.get("volumeMounts"))
        if not options.local_runtime:
            mounts = [*mounts, {"name": KUBECTL_VOLUME, "mountPath": KUBECTL_MOUNT}]
            volumes = [*volumes, {"name": KUBECTL_VOLUME, "emptyDir": {}}]
            if not as_str(pod_spec.get("serviceAccountName")):
                pod_spec["serviceAccountName"] = self.launcher_name(job)
        c["volumeMounts"] = [*mounts, {"name": CONFIG_VOLUME, "mountPath": CONFIG_MOUNT}]
        pod_spec["volumes"] = [*volumes, self._config_volume(
            job, [(KUBEXEC, SCRIPT_MODE), (HOSTFILE, HOSTFILE_MODE), (DISCOVER_HOSTS, SCRIPT_MODE)])]

    # ---- status --------------------------------------------------------------------------

    def update_status(self, job: dict, replicas: list[ReplicaState], st: StatusWriter) -> None:
        """In the fixed order Launcher, Worker: the launcher drives Running and
        success; a failure restarts unless its policy is Never, which fails the job
        (MPIJobEvicted when failed workers were evicted)."""
        jname = name_of(job)
        for r in replicas:
            if r.rtype == LAUNCHER:
                if r.active > 0:
                    st.set(RUNNING, st.reason("Running"), f"MPIJob {jname} is running.", event="Normal")
                if r.replicas - r.succeeded == 0:
                    st.set_completion_time()
                    st.set(SUCCEEDED, st.reason("Succeeded"), f"MPIJob {jname} is successfully completed.",
                           event="Normal")
                    return
            if r.failed <= 0:
                continue
            if r.restart_policy != "Never":
                # Recreated by the shared reconciler (ExitCode: a permanent code already failed the job).
                st.set(RESTARTING, st.reason("Restarting"),
                       f"MPIJob {jname} is restarting because {r.failed} {r.rtype} replica(s) failed.",
                       event="Warning")
                continue
            st.set_completion_time()
            evicted = [p for p in r.pods if p is not None and pod_phase(p) == "Failed"
                       and status(p).get("reason") == "Evicted"]
            if r.rtype == WORKER and evicted:
                present = sum(1 for p in r.pods if p is not None)
                msg = f"{len(evicted)}/{present} workers are evicted"
                st.set(FAILED, st.reason("Evicted"), msg, event="Warning")
            else:
                st.set(FAILED, st.reason("Failed"),
                       f"MPIJob {jname} is failed because {r.failed} {r.rtype} replica(s) failed.", event="Normal")
