"""MPIJob plugin: launcher/worker pods, ConfigMap and RBAC (docs/REFERENCE.md §5.6), status rules (docs/REFERENCE.md §6.5, docs/SEMANTICS.md S7, S11).

Driven through the pure reconciler with a fake clock, in both modes: Kubernetes
(the original's kubectl-delivery, ServiceAccount, Role, RoleBinding) and the
local runtime (``phalanx exec`` as rsh agent, a pod-wait init container).
"""
from __future__ import annotations

import copy
import shlex
from datetime import datetime, timezone

from phalanx.controller.conditions import StatusWriter
from phalanx.controller.frameworks import ReplicaState, get_framework
from phalanx.controller.job import Plan, ReconcileOptions, reconcile
from tests.unit.test_job_world import JOB_UID, T0, World

MPI = get_framework("MPIJob")
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
EXEC = ("/venv/bin/python", "-m", "phalanx", "exec", "--home", "/var/lib/phalanx home")
PODWAIT = ("/venv/bin/python", "-m", "phalanx.node.podwait", "--home", "/var/lib/phalanx home")
LOCAL = ReconcileOptions(exec_command=EXEC, pod_wait_command=PODWAIT)
K8S = ReconcileOptions(local_runtime=False, mpi_kubectl_delivery_image="ghcr.io/kubeflow/kubectl-delivery:v1.9.4")
OWNER = {"apiVersion": "kubeflow.org/v1", "kind": "MPIJob", "name": "pi", "uid": JOB_UID,
         "controller": True, "blockOwnerDeletion": True}
WORKERS = ["pi-worker-0", "pi-worker-1"]
PODS = ["pi-launcher", *WORKERS]
LAUNCHER_COMMAND = ["mpirun", "-np", "2", "python3", "pi.py"]


def mpi_job(workers: int | None = 2, launcher_policy: str = "Never", worker_policy: str = "Never",
            backoff: int | None = 3, **spec_extra) -> dict:
    """An MPIJob as admission stores it (docs/SEMANTICS.md S1: defaults persisted)."""
    def replica(n: int, policy: str, command: list[str] | None) -> dict:
        c = {"name": "mpi", "image": "mpioperator/mpi-pi", "imagePullPolicy": "IfNotPresent",
             "ports": [{"name": "mpi-port", "containerPort": 9999, "protocol": "TCP"}]}
        if command:
            c["command"] = list(command)
        return {"replicas": n, "restartPolicy": policy, "template": {"spec": {"containers": [c]}}}
    specs = {"Launcher": replica(1, launcher_policy, LAUNCHER_COMMAND)}
    if workers is not None:
        specs["Worker"] = replica(workers, worker_policy, None)
    rp = {"cleanPodPolicy": "None", "suspend": False}
    if backoff is not None:
        rp["backoffLimit"] = backoff
    return {
        "apiVersion": "kubeflow.org/v1", "kind": "MPIJob",
        "metadata": {"name": "pi", "namespace": "default", "uid": JOB_UID, "resourceVersion": "1",
                     "creationTimestamp": T0},
        "spec": {"slotsPerWorker": 1, "mpiReplicaSpecs": specs, "runPolicy": rp, **spec_extra},
    }


class MPIWorld(World):
    """The fake world, also holding the objects the job owns (ConfigMap, RBAC)
    as the store would: created or replaced by ``plan.apply_objects``."""

    def __init__(self, job: dict, **kw) -> None:
        super().__init__(job, **kw)
        self.others: dict[tuple[str, str], dict] = {}

    def reconcile(self) -> Plan:
        inputs = (copy.deepcopy(self.job), [copy.deepcopy(p) for p in self.pods.values()],
                  [copy.deepcopy(s) for s in self.services.values()], copy.deepcopy(self.podgroup))
        others = [copy.deepcopy(o) for o in self.others.values()]
        before = copy.deepcopy((inputs, others))
        plan = reconcile(*inputs, self.now, self.fw, self.options, others)
        assert (inputs, others) == before, "reconcile must not change its inputs"
        return plan

    def apply(self, plan: Plan) -> None:
        super().apply(plan)
        for obj in plan.apply_objects:
            key = (obj["kind"], obj["metadata"]["name"])
            stored = copy.deepcopy(obj)
            stored["metadata"]["uid"] = self.others.get(key, {}).get("metadata", {}).get("uid") or self._new_uid()
            self.others[key] = stored

    def owned(self, kind: str, name_: str) -> dict:
        return self.others[(kind, name_)]


def started(job: dict | None = None, options: ReconcileOptions = LOCAL) -> MPIWorld:
    w = MPIWorld(job or mpi_job(), options=options)
    w.step()
    w.admit()
    w.settle()
    return w


def assert_fixpoint(w: MPIWorld) -> None:
    w.settle()
    assert w.reconcile().is_empty()


def strip(obj: dict) -> dict:
    """An owned object without what the world added (uid)."""
    obj = copy.deepcopy(obj)
    obj["metadata"].pop("uid", None)
    return obj


def env_pairs(container: dict) -> list[tuple[str, str]]:
    return [(e["name"], e["value"]) for e in container.get("env", [])]


GENERIC = {"training.kubeflow.org/operator-name": "mpijob-controller", "training.kubeflow.org/job-name": "pi"}
ANNOTATIONS = {"scheduling.k8s.io/group-name": "pi"}
PORTS = [{"name": "mpi-port", "containerPort": 9999, "protocol": "TCP"}]
KUBEXEC_ITEM = {"key": "kubexec.sh", "path": "kubexec.sh", "mode": 0o555}
LAUNCHER_ITEMS = [KUBEXEC_ITEM, {"key": "hostfile", "path": "hostfile", "mode": 0o444},
                  {"key": "discover_hosts.sh", "path": "discover_hosts.sh", "mode": 0o555}]


def expected_worker(i: int) -> dict:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"pi-worker-{i}", "namespace": "default",
            "labels": {**GENERIC, "training.kubeflow.org/replica-type": "worker",
                       "training.kubeflow.org/replica-index": str(i)},
            "annotations": {**ANNOTATIONS, "volcano.sh/task-spec": "worker"},
            "ownerReferences": [OWNER],
        },
        "spec": {
            "containers": [{
                "name": "mpi", "image": "mpioperator/mpi-pi", "imagePullPolicy": "IfNotPresent", "ports": PORTS,
                "command": ["sleep"], "args": ["365d"],
                "volumeMounts": [{"name": "mpi-job-config", "mountPath": "/etc/mpi"}],
            }],
            "restartPolicy": "Never",
            "schedulerName": "volcano",
            "volumes": [{"name": "mpi-job-config", "configMap": {"name": "pi-config", "items": [KUBEXEC_ITEM]}}],
        },
    }


def expected_launcher_meta() -> dict:
    return {
        "name": "pi-launcher", "namespace": "default",
        "labels": {**GENERIC, "training.kubeflow.org/replica-type": "launcher",
                   "training.kubeflow.org/replica-index": "0", "training.kubeflow.org/job-role": "master"},
        "annotations": {**ANNOTATIONS, "volcano.sh/task-spec": "launcher"},
        "ownerReferences": [OWNER],
    }


def created_pod(w: MPIWorld, name_: str) -> dict:
    pod = copy.deepcopy(w.pods[name_])
    pod["metadata"].pop("uid")
    pod.pop("status")
    return pod


# ------------------------------------------------------------------- local runtime: pods


def test_local_launcher_pod_exact():
    w = started()
    root = "$(PHALANX_ROOT)/etc/mpi"
    assert created_pod(w, "pi-launcher") == {
        "apiVersion": "v1", "kind": "Pod", "metadata": expected_launcher_meta(),
        "spec": {
            "containers": [{
                "name": "mpi", "image": "mpioperator/mpi-pi", "imagePullPolicy": "IfNotPresent", "ports": PORTS,
                "command": LAUNCHER_COMMAND,
                "env": [{"name": "OMPI_MCA_plm_rsh_agent", "value": f"{root}/kubexec.sh"},
                        {"name": "OMPI_MCA_orte_default_hostfile", "value": f"{root}/hostfile"},
                        {"name": "NVIDIA_VISIBLE_DEVICES", "value": ""},
                        {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": ""},
                        {"name": "I_MPI_HYDRA_BOOTSTRAP", "value": "rsh"},
                        {"name": "I_MPI_HYDRA_BOOTSTRAP_EXEC", "value": f"{root}/kubexec.sh"},
                        {"name": "OMPI_MCA_btl_tcp_if_include", "value": "lo"},
                        {"name": "OMPI_MCA_oob_tcp_if_include", "value": "lo"}],
                "volumeMounts": [{"name": "mpi-job-config", "mountPath": "/etc/mpi"}],
            }],
            "initContainers": [{
                "name": "kubectl-delivery", "image": "kubeflow/kubectl-delivery:latest",
                "imagePullPolicy": "IfNotPresent",
                "command": [*PODWAIT, "-n", "default", "--timeout", "600", *WORKERS],
            }],
            "restartPolicy": "Never",
            "schedulerName": "volcano",
            "volumes": [{"name": "mpi-job-config", "configMap": {"name": "pi-config", "items": LAUNCHER_ITEMS}}],
        },
    }
    assert "serviceAccountName" not in w.pods["pi-launcher"]["spec"]


def test_local_worker_pods_exact():
    w = started()
    assert sorted(w.pods) == PODS
    for i in range(2):
        assert created_pod(w, f"pi-worker-{i}") == expected_worker(i)


def test_pods_are_created_with_the_config_map_launcher_first():
    w = MPIWorld(mpi_job(), options=LOCAL)
    w.step()
    w.admit()
    plan = w.step()
    assert [p["metadata"]["name"] for p in plan.create_pods] == PODS
    assert [(o["kind"], o["metadata"]["name"]) for o in plan.apply_objects] == [("ConfigMap", "pi-config")]


def test_no_services_ever():
    w = started()
    w.running(*PODS)
    w.settle()
    assert w.services == {} and all(not p.create_services for p in w.plans)


# ------------------------------------------------------------------ local runtime: ConfigMap


def test_local_config_map_exact():
    w = started()
    runner = " ".join(shlex.quote(a) for a in EXEC)
    assert runner.count("'") == 2  # the home with a space is quoted, the rest is not
    assert strip(w.owned("ConfigMap", "pi-config")) == {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "pi-config", "namespace": "default", "labels": {"app": "pi"},
                     "ownerReferences": [OWNER]},
        "data": {
            "hostfile": "pi-worker-0 slots=1\npi-worker-1 slots=1\n",
            "kubexec.sh": ("#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n"
                           f"{runner} -n default ${{POD_NAME}} -- /bin/sh -c \"$*\""),
            "discover_hosts.sh": "#!/bin/sh",
        },
    }
    assert set(w.others) == {("ConfigMap", "pi-config")}  # no RBAC on the local runtime


def test_kubexec_without_exec_command_uses_phalanx_from_path():
    w = started(options=ReconcileOptions())
    script = w.owned("ConfigMap", "pi-config")["data"]["kubexec.sh"]
    assert script.splitlines()[-1] == 'phalanx exec -n default ${POD_NAME} -- /bin/sh -c "$*"'
    init = w.pods["pi-launcher"]["spec"]["initContainers"][0]["command"]
    assert init[:3] == ["python3", "-m", "phalanx.node.podwait"]


def test_discover_hosts_follows_running_workers_sorted_and_reaches_a_fixpoint():
    w = started()
    w.running("pi-worker-1")
    plan = w.step()
    assert [o["data"]["discover_hosts.sh"] for o in plan.apply_objects] == ["#!/bin/sh\necho pi-worker-1:1"]
    w.running("pi-worker-0", "pi-launcher")
    w.step()
    assert w.owned("ConfigMap", "pi-config")["data"]["discover_hosts.sh"] == (
        "#!/bin/sh\necho pi-worker-0:1\necho pi-worker-1:1")
    assert_fixpoint(w)


def test_slots_per_worker_and_main_container():
    job = mpi_job(slotsPerWorker=4, mainContainer="mpi")
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"].insert(
        0, {"name": "sidecar", "image": "x", "command": ["sleep", "1"]})
    w = started(job)
    w.running(*PODS)
    w.settle()
    data = w.owned("ConfigMap", "pi-config")["data"]
    assert data["hostfile"] == "pi-worker-0 slots=4\npi-worker-1 slots=4\n"
    assert data["discover_hosts.sh"] == "#!/bin/sh\necho pi-worker-0:4\necho pi-worker-1:4"
    assert data["kubexec.sh"].endswith(' -n default --container mpi ${POD_NAME} -- /bin/sh -c "$*"')
    sidecar, main = w.pods["pi-launcher"]["spec"]["containers"]
    assert "env" not in sidecar and "volumeMounts" not in sidecar
    assert env_pairs(main)[0] == ("OMPI_MCA_plm_rsh_agent", "$(PHALANX_ROOT)/etc/mpi/kubexec.sh")


def test_odd_main_container_is_quoted_in_the_script():
    w = started(mpi_job(mainContainer="x; rm -rf /"), options=K8S)
    line = w.owned("ConfigMap", "pi-config")["data"]["kubexec.sh"].splitlines()[-1]
    assert line == "/opt/kube/kubectl exec ${POD_NAME} --container 'x; rm -rf /' -- /bin/sh -c \"$*\""


def test_gpu_launcher_is_a_host_and_keeps_the_gpus_visible():
    job = mpi_job()
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": 1}}
    w = started(job)
    w.running(*PODS)
    w.settle()
    data = w.owned("ConfigMap", "pi-config")["data"]
    assert data["hostfile"] == "pi-launcher slots=1\npi-worker-0 slots=1\npi-worker-1 slots=1\n"
    assert data["discover_hosts.sh"] == "#!/bin/sh\necho pi-launcher:1\n\necho pi-worker-0:1\necho pi-worker-1:1"
    names = [n for n, _ in env_pairs(w.pods["pi-launcher"]["spec"]["containers"][0])]
    assert "NVIDIA_VISIBLE_DEVICES" not in names and "NVIDIA_DRIVER_CAPABILITIES" not in names
    assert MPI.is_gpu_launcher(job)
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"example.org/gpu-slice": 1}}
    assert MPI.is_gpu_launcher(job)  # "contains gpu", as the original


def test_user_env_is_kept_first_and_never_duplicated():
    job = mpi_job()
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "I_MPI_HYDRA_BOOTSTRAP", "value": "ssh"},
        {"name": "OMPI_MCA_btl_tcp_if_include", "value": "eth0"},
    ]
    w = started(job)
    env = env_pairs(w.pods["pi-launcher"]["spec"]["containers"][0])
    names = [n for n, _ in env]
    assert env[:2] == [("I_MPI_HYDRA_BOOTSTRAP", "ssh"), ("OMPI_MCA_btl_tcp_if_include", "eth0")]
    assert len(names) == len(set(names))
    assert ("I_MPI_HYDRA_BOOTSTRAP_EXEC", "$(PHALANX_ROOT)/etc/mpi/kubexec.sh") in env
    assert ("OMPI_MCA_oob_tcp_if_include", "lo") in env


def test_worker_keeps_its_own_command_and_volumes():
    job = mpi_job()
    wspec = job["spec"]["mpiReplicaSpecs"]["Worker"]["template"]["spec"]
    wspec["containers"][0]["command"] = ["/usr/sbin/sshd", "-De"]
    wspec["volumes"] = [{"name": "data", "emptyDir": {}}]
    w = started(job)
    pod = w.pods["pi-worker-1"]["spec"]
    assert pod["containers"][0]["command"] == ["/usr/sbin/sshd", "-De"] and "args" not in pod["containers"][0]
    assert [v["name"] for v in pod["volumes"]] == ["data", "mpi-job-config"]


def test_no_workers_means_no_wait_and_an_empty_hostfile():
    w = started(mpi_job(workers=None))
    assert sorted(w.pods) == ["pi-launcher"]
    assert "initContainers" not in w.pods["pi-launcher"]["spec"]
    assert w.owned("ConfigMap", "pi-config")["data"]["hostfile"] == ""


# ----------------------------------------------------------------- Kubernetes mode


def test_k8s_launcher_pod_exact():
    w = started(options=K8S)
    resources = {"cpu": "100m", "memory": "512Mi", "ephemeral-storage": "5Gi"}
    assert created_pod(w, "pi-launcher") == {
        "apiVersion": "v1", "kind": "Pod", "metadata": expected_launcher_meta(),
        "spec": {
            "containers": [{
                "name": "mpi", "image": "mpioperator/mpi-pi", "imagePullPolicy": "IfNotPresent", "ports": PORTS,
                "command": LAUNCHER_COMMAND,
                "env": [{"name": "OMPI_MCA_plm_rsh_agent", "value": "/etc/mpi/kubexec.sh"},
                        {"name": "OMPI_MCA_orte_default_hostfile", "value": "/etc/mpi/hostfile"},
                        {"name": "NVIDIA_VISIBLE_DEVICES", "value": ""},
                        {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": ""},
                        {"name": "I_MPI_HYDRA_BOOTSTRAP", "value": "rsh"},
                        {"name": "I_MPI_HYDRA_BOOTSTRAP_EXEC", "value": "/etc/mpi/kubexec.sh"}],
                "volumeMounts": [{"name": "mpi-job-kubectl", "mountPath": "/opt/kube"},
                                 {"name": "mpi-job-config", "mountPath": "/etc/mpi"}],
            }],
            "initContainers": [{
                "name": "kubectl-delivery", "image": "ghcr.io/kubeflow/kubectl-delivery:v1.9.4",
                "imagePullPolicy": "IfNotPresent",
                "env": [{"name": "TARGET_DIR", "value": "/opt/kube"}, {"name": "NAMESPACE", "value": "default"}],
                "volumeMounts": [{"name": "mpi-job-kubectl", "mountPath": "/opt/kube"},
                                 {"name": "mpi-job-config", "mountPath": "/etc/mpi"}],
                "resources": {"limits": resources, "requests": resources},
            }],
            "restartPolicy": "Never",
            "schedulerName": "volcano",
            "serviceAccountName": "pi-launcher",
            "volumes": [{"name": "mpi-job-kubectl", "emptyDir": {}},
                        {"name": "mpi-job-config", "configMap": {"name": "pi-config", "items": LAUNCHER_ITEMS}}],
        },
    }


def test_k8s_worker_pods_are_the_same_as_locally():
    w = started(options=K8S)
    for i in range(2):
        assert created_pod(w, f"pi-worker-{i}") == expected_worker(i)


def test_k8s_owned_objects_exact():
    w = started(options=K8S)
    meta = {"name": "pi-launcher", "namespace": "default", "labels": {"app": "pi"}, "ownerReferences": [OWNER]}
    assert strip(w.owned("ConfigMap", "pi-config"))["data"] == {
        "hostfile": "pi-worker-0 slots=1\npi-worker-1 slots=1\n",
        "kubexec.sh": '#!/bin/sh\nset -x\nPOD_NAME=$1\nshift\n/opt/kube/kubectl exec ${POD_NAME} -- /bin/sh -c "$*"',
        "discover_hosts.sh": "#!/bin/sh",
    }
    assert strip(w.owned("ServiceAccount", "pi-launcher")) == {"apiVersion": "v1", "kind": "ServiceAccount",
                                                                "metadata": meta}
    assert strip(w.owned("Role", "pi-launcher")) == {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": meta,
        "rules": [{"verbs": ["get", "list", "watch"], "apiGroups": [""], "resources": ["pods"]},
                  {"verbs": ["create"], "apiGroups": [""], "resources": ["pods/exec"],
                   "resourceNames": WORKERS}],
    }
    assert strip(w.owned("RoleBinding", "pi-launcher")) == {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": meta,
        "subjects": [{"kind": "ServiceAccount", "name": "pi-launcher", "namespace": "default"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pi-launcher"},
    }
    assert_fixpoint(w)


def test_k8s_users_service_account_is_bound_not_created():
    job = mpi_job()
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["serviceAccountName"] = "mpi-runner"
    w = started(job, options=K8S)
    assert w.pods["pi-launcher"]["spec"]["serviceAccountName"] == "mpi-runner"
    assert ("ServiceAccount", "pi-launcher") not in w.others
    assert w.owned("RoleBinding", "pi-launcher")["subjects"][0]["name"] == "mpi-runner"
    assert_fixpoint(w)


def test_k8s_role_follows_worker_scaling():
    w = started(options=K8S)
    w.job["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 3
    w.settle()
    assert w.owned("Role", "pi-launcher")["rules"][1]["resourceNames"] == [*WORKERS, "pi-worker-2"]
    assert w.owned("ConfigMap", "pi-config")["data"]["hostfile"].count("\n") == 3
    assert "pi-worker-2" in w.pods


def test_owned_kinds():
    assert MPI.owned_kinds(LOCAL) == ("ConfigMap",)
    assert MPI.owned_kinds(K8S) == ("ConfigMap", "ServiceAccount", "Role", "RoleBinding")


def test_a_changed_owned_object_is_put_back():
    w = started(options=K8S)
    w.others[("Role", "pi-launcher")]["rules"] = []
    w.others[("ConfigMap", "pi-config")]["data"]["hostfile"] = "evil slots=64\n"
    plan = w.step()
    assert sorted(o["kind"] for o in plan.apply_objects) == ["ConfigMap", "Role"]
    assert w.owned("ConfigMap", "pi-config")["data"]["hostfile"] == "pi-worker-0 slots=1\npi-worker-1 slots=1\n"
    assert_fixpoint(w)


# ---------------------------------------------------------------------- status through the reconciler


def test_launcher_running_then_success_step_by_step():
    w = started()
    assert w.state() == "Created"
    w.running(*WORKERS)
    w.init("pi-launcher")
    w.settle()
    assert w.state() == "Created"  # the launcher is still waiting for the workers
    w.running("pi-launcher")
    w.advance(5)
    w.settle()
    assert w.conditions()[-1] == ("Running", "True", "MPIJobRunning")
    assert w.status["replicaStatuses"] == {"Launcher": {"active": 1}, "Worker": {"active": 2}}
    w.succeeded("pi-launcher")
    w.advance(5)
    plan = w.step()
    assert w.conditions() == [("Created", "True", "MPIJobCreated"), ("Running", "False", "MPIJobRunning"),
                              ("Succeeded", "True", "MPIJobSucceeded")]
    assert w.status["completionTime"] == "2026-01-01T12:00:10Z"
    assert ("Normal", "MPIJobSucceeded", "MPIJob pi is successfully completed.") in plan.events
    # cleanPodPolicy None: the sleeping workers are kept, never restarted (docs/SEMANTICS.md S5).
    assert sorted(plan.stop_restarting) == WORKERS and plan.delete_pods == []
    assert_fixpoint(w)


def test_success_with_clean_pod_policy_running_deletes_the_workers():
    job = mpi_job()
    job["spec"]["runPolicy"]["cleanPodPolicy"] = "Running"
    w = started(job)
    w.running(*PODS)
    w.settle()
    w.succeeded("pi-launcher")
    plan = w.step()
    assert w.state() == "Succeeded" and sorted(plan.delete_pods) == WORKERS
    assert plan.podgroup_delete


def test_worker_failure_under_never_fails_the_job():
    w = started()
    w.running(*PODS)
    w.settle()
    w.failed("pi-worker-1", exit_code=1)
    plan = w.step()
    msg = "MPIJob pi is failed because 1 Worker replica(s) failed."
    assert w.conditions()[-1] == ("Failed", "True", "MPIJobFailed")
    assert w.status["conditions"][-1]["message"] == msg
    assert ("Normal", "MPIJobFailed", msg) in plan.events
    assert w.status["completionTime"]
    assert sorted(plan.delete_pods) == PODS  # docs/SEMANTICS.md S5: a failed job's pods all go


def test_evicted_worker_under_never_fails_the_job_as_evicted():
    w = started()
    w.running(*PODS)
    w.settle()
    w.failed("pi-worker-0", exit_code=None)
    plan = w.step()
    assert w.conditions()[-1] == ("Failed", "True", "MPIJobEvicted")
    assert w.status["conditions"][-1]["message"] == "1/2 workers are evicted"
    assert ("Warning", "MPIJobEvicted", "1/2 workers are evicted") in plan.events


def test_worker_failure_under_on_failure_recreates_the_worker():
    # Phalanx: the shared restart machinery (the original never recreates a worker).
    w = started(mpi_job(worker_policy="OnFailure"))
    w.running(*PODS)
    w.settle()
    w.failed("pi-worker-0", exit_code=None)  # evicted: the kubelet cannot restart it in place
    plan = w.step()
    assert plan.delete_pods == ["pi-worker-0"]
    assert w.conditions()[-1] == ("Restarting", "True", "MPIJobRestarting")
    assert w.status["restartCount"] == 1
    w.settle()
    assert w.pods["pi-worker-0"]["status"]["phase"] == "Pending"  # recreated
    w.running("pi-worker-0")
    w.settle()
    assert w.conditions()[-1] == ("Running", "True", "MPIJobRunning")


def test_exit_code_policy_permanent_failure_fails_and_retryable_restarts():
    w = started(mpi_job(launcher_policy="ExitCode"))
    w.running(*PODS)
    w.settle()
    w.failed("pi-launcher", exit_code=137)
    plan = w.step()
    assert plan.delete_pods == ["pi-launcher"] and w.conditions()[-1][0] == "Restarting"
    w.settle()
    w.running("pi-launcher")
    w.settle()
    w.failed("pi-launcher", exit_code=2)
    w.step()
    assert w.conditions()[-1] == ("Failed", "True", "MPIJobFailed")
    assert w.status["completionTime"]


def test_launcher_deleted_from_outside_is_recreated_as_a_restart():
    # The launcher's name has no index: the reconciler maps it back by exact name.
    w = started()
    w.running(*PODS)
    w.settle()
    del w.pods["pi-launcher"]
    w.settle()
    assert "pi-launcher" in w.pods and w.status["restartCount"] == 1
    assert any(c[0] == "Restarting" for c in w.conditions())


def test_local_fixpoint_at_every_stage():
    w = started()
    assert_fixpoint(w)
    w.running(*WORKERS)
    assert_fixpoint(w)
    w.running("pi-launcher")
    assert_fixpoint(w)
    w.succeeded("pi-launcher")
    assert_fixpoint(w)


# ---------------------------------------------------------------------- status rules alone


def rs(rtype, replicas, active=0, succeeded=0, failed=0, policy="Never", pods=()):
    return ReplicaState(rtype, replicas, policy, active, succeeded, failed, tuple(pods))


def run_rules(states, status=None):
    st = StatusWriter("MPIJob", "pi", "default", status or {}, NOW)
    MPI.update_status(mpi_job(), states, st)
    new, events = st.finish()
    return [(c["type"], c["status"], c["reason"], c["message"]) for c in new.get("conditions", [])], events, new


def test_rules_launcher_drives_running_and_success():
    conds, events, _ = run_rules([rs("Launcher", 1, active=1), rs("Worker", 2, active=2)])
    assert conds == [("Running", "True", "MPIJobRunning", "MPIJob pi is running.")]
    assert events == [("Normal", "MPIJobRunning", "MPIJob pi is running.")]
    conds, _, _ = run_rules([rs("Launcher", 1), rs("Worker", 2, active=2)])
    assert conds == []  # workers alone never make the job Running
    conds, _, status = run_rules([rs("Launcher", 1, succeeded=1), rs("Worker", 2, failed=2)])
    assert conds == [("Succeeded", "True", "MPIJobSucceeded", "MPIJob pi is successfully completed.")]
    assert status["completionTime"] == "2026-01-01T00:00:00Z"  # docs/SEMANTICS.md S11


def test_rules_failures():
    conds, events, status = run_rules([rs("Launcher", 1, failed=1), rs("Worker", 2, active=2)])
    assert conds == [("Failed", "True", "MPIJobFailed", "MPIJob pi is failed because 1 Launcher replica(s) failed.")]
    assert status["completionTime"]
    for policy in ("OnFailure", "Always", "ExitCode"):
        conds, events, status = run_rules([rs("Launcher", 1, active=1), rs("Worker", 2, active=1, failed=1,
                                                                             policy=policy)])
        msg = "MPIJob pi is restarting because 1 Worker replica(s) failed."
        assert conds == [("Restarting", "True", "MPIJobRestarting", msg)], policy
        assert events == [("Warning", "MPIJobRestarting", msg)] and "completionTime" not in status


def test_rules_evicted_counts_evicted_of_present_workers():
    evicted = {"metadata": {"name": "pi-worker-0"}, "status": {"phase": "Failed", "reason": "Evicted"}}
    crashed = {"metadata": {"name": "pi-worker-1"}, "status": {"phase": "Failed"}}
    running = {"metadata": {"name": "pi-worker-2"}, "status": {"phase": "Running"}}
    conds, _, _ = run_rules([rs("Launcher", 1, active=1),
                             rs("Worker", 4, active=1, failed=2, pods=(evicted, crashed, running, None))])
    assert conds[-1] == ("Failed", "True", "MPIJobEvicted", "1/3 workers are evicted")


def test_rules_evicted_under_on_failure_restarts():
    evicted = {"metadata": {"name": "pi-worker-0"}, "status": {"phase": "Failed", "reason": "Evicted"}}
    conds, _, _ = run_rules([rs("Launcher", 1, active=1),
                             rs("Worker", 1, failed=1, policy="OnFailure", pods=(evicted,))])
    assert conds[-1][:3] == ("Restarting", "True", "MPIJobRestarting")


def test_names_and_roles():
    job = mpi_job()
    assert MPI.pod_name(job, "Launcher", 0) == MPI.pod_name(job, "Launcher", 3) == "pi-launcher"
    assert MPI.pod_name(job, "Worker", 3) == "pi-worker-3"
    assert MPI.is_master_role(job, "Launcher", 0) and not MPI.is_master_role(job, "Worker", 0)
    assert MPI.creates_services is False
