"""PyTorchJob plugin: env (docs/REFERENCE.md P3, docs/REFERENCE.md §5.1), init container, status rules (docs/REFERENCE.md §6.3, docs/SEMANTICS.md S7)."""
from __future__ import annotations

from datetime import datetime, timezone

from phalanx.controller.conditions import StatusWriter
from phalanx.controller.frameworks import ReplicaState, get_framework
from phalanx.controller.job import ReconcileOptions
from tests.unit.test_job_core import PODS, started
from tests.unit.test_job_world import World, env_of, pytorch_job

PYTORCH = get_framework("PyTorchJob")
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
INITWAIT = ["/venv/bin/python", "-m", "phalanx.node.initwait"]


def expected_env(rank: int, addr: str = "pytest-master-0", port: str = "23456", world: str = "4",
                 nproc: str = "auto") -> list[tuple[str, str]]:
    return [("PYTHONUNBUFFERED", "1"), ("MASTER_PORT", port), ("PET_MASTER_PORT", port),
            ("MASTER_ADDR", addr), ("PET_MASTER_ADDR", addr), ("WORLD_SIZE", world), ("RANK", str(rank)),
            ("PET_NODE_RANK", str(rank)), ("PET_NPROC_PER_NODE", nproc), ("PET_NNODES", "4")]


def env_list(pod: dict, container: int = 0) -> list[tuple[str, str]]:
    return [(e["name"], e["value"]) for e in pod["spec"]["containers"][container]["env"]]


# ------------------------------------------------------------------------------ P3


def test_s10_p3_env_of_master_and_workers_with_resolvable_names():
    # docs/REFERENCE.md P3: ranks distinct 0..3, master rank 0, MASTER_ADDR the master's service name.
    w = started()
    for i, n in enumerate(PODS):
        assert env_list(w.pods[n]) == expected_env(i), n


def test_p3_env_uses_the_service_address_when_names_do_not_resolve():
    w = started(options=ReconcileOptions(resolvable_names=False, init_container_command=INITWAIT))
    ip = w.services["pytest-master-0"]["metadata"]["annotations"]["phalanx.dev/address"]
    assert ip.startswith("127.")
    for i, n in enumerate(PODS):
        assert env_list(w.pods[n]) == expected_env(i, addr=ip), n
    assert w.pods["pytest-worker-0"]["spec"]["initContainers"][0]["command"] == [*INITWAIT, ip]


def test_p3_master_port_is_the_masters_effective_host_port():
    # DESIGN "Ports are shared on one host": 23456 taken by another job -> the allocated port.
    w = started(taken_ports={23456})
    port = w.services["pytest-master-0"]["metadata"]["annotations"]["phalanx.dev/host-ports"]
    assert port == '{"pytorchjob-port": 23457}'
    for i, n in enumerate(PODS):
        assert env_list(w.pods[n]) == expected_env(i, port="23457"), n


def test_p3_kubernetes_mode_uses_names_and_declared_ports():
    w = started(options=ReconcileOptions(local_runtime=False, resolvable_names=False))
    for i, n in enumerate(PODS):
        assert env_list(w.pods[n]) == expected_env(i), n


def test_env_is_appended_to_every_container_after_the_users_own():
    job = pytorch_job()
    tmpl = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    tmpl["containers"][0]["env"] = [{"name": "RANK", "value": "mine"}]
    tmpl["containers"].append({"name": "sidecar", "image": "x"})
    w = started(job)
    pod = w.pods["pytest-worker-1"]
    assert env_list(pod)[0] == ("RANK", "mine") and env_list(pod)[1:] == expected_env(2)
    assert env_list(pod, 1) == expected_env(2)


def test_nproc_per_node_integer_multiplies_world_size():
    job = pytorch_job()
    job["spec"]["nprocPerNode"] = "2"
    w = started(job)
    env = env_of(w.pods["pytest-worker-2"])
    assert (env["WORLD_SIZE"], env["PET_NPROC_PER_NODE"], env["RANK"]) == ("8", "2", "3")


def test_worker_only_job_gets_no_master_variables():
    w = started(pytorch_job(master=None, workers=2))
    env = env_list(w.pods["pytest-worker-1"])
    assert env == [("PYTHONUNBUFFERED", "1"), ("PET_NPROC_PER_NODE", "auto"), ("PET_NNODES", "2")]
    assert "initContainers" not in w.pods["pytest-worker-1"]["spec"]
    assert w.pods["pytest-worker-0"]["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"


def test_elastic_env():
    job = pytorch_job(master=None, workers=2)
    job["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3, "rdzvBackend": "c10d", "rdzvId": "abc",
                                    "maxRestarts": 5, "rdzvConf": [{"key": "a", "value": "1"}, {"key": "b", "value": "2"}],
                                    "standalone": True}
    w = started(job, taken_ports={23456})
    env = env_list(w.pods["pytest-worker-1"])
    assert env == [("PYTHONUNBUFFERED", "1"), ("PET_NPROC_PER_NODE", "auto"),
                   ("PET_RDZV_ENDPOINT", "pytest-worker-0:23457"), ("PET_RDZV_BACKEND", "c10d"),
                   ("PET_NNODES", "1:3"), ("PET_MAX_RESTARTS", "5"), ("PET_RDZV_ID", "abc"),
                   ("PET_RDZV_CONF", "a=1,b=2"), ("PET_STANDALONE", "")]


def test_elastic_defaults_nnodes_to_worker_replicas_and_keeps_a_user_endpoint():
    job = pytorch_job(master=None, workers=2)
    job["spec"]["elasticPolicy"] = {"rdzvHost": "etcd.example", "rdzvPort": 2379}
    w = started(job)
    env = env_of(w.pods["pytest-worker-0"])
    # setElasticPolicy defaults both bounds to the Worker's replicas before the env is built: "2:2".
    assert (env["PET_RDZV_ENDPOINT"], env["PET_RDZV_BACKEND"], env["PET_NNODES"]) == ("etcd.example:2379", "c10d", "2:2")


# ------------------------------------------------------------------------ init container


def test_init_container_local_runtime_runs_initwait_with_the_master_host():
    w = started(options=ReconcileOptions(init_container_command=INITWAIT))
    for n in PODS[1:]:
        assert w.pods[n]["spec"]["initContainers"] == [{
            "name": "init-pytorch", "image": "alpine:3.10", "imagePullPolicy": "IfNotPresent",
            "command": [*INITWAIT, "pytest-master-0"],
            "resources": {"limits": {"cpu": "100m", "memory": "20Mi"}, "requests": {"cpu": "50m", "memory": "10Mi"}},
        }]
    assert "initContainers" not in w.pods["pytest-master-0"]["spec"]


def test_init_container_cluster_mode_is_the_originals_nslookup_loop():
    w = started(options=ReconcileOptions(local_runtime=False))
    assert w.pods["pytest-worker-0"]["spec"]["initContainers"][0]["command"] == [
        "sh", "-c",
        "err=1;for i in $(seq 100); do if nslookup pytest-master-0; then err=0 && break; fi;"
        "echo waiting for master; sleep 2; done; exit $err"]


# ------------------------------------------------------------------------- status rules


def rs(rtype, replicas, active=0, succeeded=0, failed=0, policy="OnFailure"):
    return ReplicaState(rtype, replicas, policy, active, succeeded, failed)


def run_rules(job, states):
    st = StatusWriter("PyTorchJob", "pytest", "default", {}, NOW)
    PYTORCH.update_status(job, states, st)
    status, events = st.finish()
    return [(c["type"], c["status"], c["message"]) for c in status.get("conditions", [])], events, status


def test_s7_with_a_master_only_the_master_drives_running_and_success():
    job = pytorch_job()
    conds, _, _ = run_rules(job, [rs("Master", 1), rs("Worker", 3, active=3)])
    assert conds == []
    conds, _, status = run_rules(job, [rs("Master", 1, succeeded=1), rs("Worker", 3, active=1, succeeded=2)])
    assert conds == [("Succeeded", "True", "PyTorchJob pytest is successfully completed.")]
    assert status["completionTime"] == "2026-01-01T00:00:00Z"


def test_s7_master_success_returns_before_looking_at_workers():
    # Fixed order Master, Worker: the original's early return, now deterministic.
    conds, _, _ = run_rules(pytorch_job(policy="Never"),
                            [rs("Master", 1, succeeded=1, policy="Never"), rs("Worker", 3, failed=1, policy="Never")])
    assert [c[0] for c in conds] == ["Succeeded"]


def test_s7_worker_only_job_messages_carry_the_namespace():
    job = pytorch_job(master=None, workers=2)
    conds, events, _ = run_rules(job, [rs("Worker", 2, active=1, succeeded=1)])
    assert conds == [("Running", "True", "PyTorchJob default/pytest is running.")]
    assert events == [("Normal", "PyTorchJobRunning", "PyTorchJob default/pytest is running.")]
    conds, _, _ = run_rules(job, [rs("Worker", 2, succeeded=2)])
    assert conds == [("Succeeded", "True", "PyTorchJob default/pytest successfully completed.")]


def test_s7_elastic_job_succeeds_when_any_worker_succeeded():
    job = pytorch_job(master=None, workers=3)
    job["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3}
    conds, _, _ = run_rules(job, [rs("Worker", 3, active=2, succeeded=1)])
    assert [c[0] for c in conds] == ["Succeeded"]


def test_s7_failure_under_on_failure_restarts_and_under_never_fails():
    conds, events, _ = run_rules(pytorch_job(), [rs("Master", 1, active=1), rs("Worker", 3, active=2, failed=1)])
    msg = "PyTorchJob pytest is restarting because 1 Worker replica(s) failed."
    assert conds == [("Restarting", "True", msg)]
    assert events == [("Warning", "PyTorchJobRestarting", msg)]
    conds, _, status = run_rules(pytorch_job(policy="Never"),
                                 [rs("Master", 1, active=1, policy="Never"), rs("Worker", 3, active=2, failed=1, policy="Never")])
    assert conds == [("Running", "False", "PyTorchJob pytest is running."),
                     ("Failed", "True", "PyTorchJob pytest is failed because 1 Worker replica(s) failed.")]
    assert status["completionTime"]


def test_failed_replica_that_is_already_replaced_is_not_a_restart():
    # failed > 0 but replicas == succeeded + running: nothing to restart.
    conds, _, _ = run_rules(pytorch_job(), [rs("Master", 1, active=1), rs("Worker", 1, active=1, failed=1)])
    assert conds == [("Running", "True", "PyTorchJob pytest is running.")]


def test_is_master_role():
    job = pytorch_job()
    assert PYTORCH.is_master_role(job, "Master", 0)
    assert not PYTORCH.is_master_role(job, "Worker", 0)
    assert PYTORCH.is_master_role(pytorch_job(master=None), "Worker", 0)
    assert not PYTORCH.is_master_role(pytorch_job(master=None), "Worker", 1)


def test_replica_statuses_carry_the_label_selector():
    w = World(pytorch_job())
    w.settle()
    w.admit()
    w.settle()
    assert w.status["replicaStatuses"]["Worker"]["selector"] == (
        "training.kubeflow.org/job-name=pytest,training.kubeflow.org/operator-name=pytorchjob-controller,"
        "training.kubeflow.org/replica-type=worker")
