"""PaddleJob plugin: env (docs/REFERENCE.md §5.4, docs/SEMANTICS.md S10), job-role (docs/REFERENCE.md §4.2), status rules (docs/REFERENCE.md §6.7, docs/SEMANTICS.md S7, S11)."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from phalanx.controller.conditions import StatusWriter
from phalanx.controller.frameworks import ReplicaState, get_framework
from phalanx.controller.job import ReconcileOptions
from phalanx.node.env import PodContext, container_env
from tests.unit.test_job_core import assert_fixpoint, started
from tests.unit.test_job_world import COMMAND, IMAGE, JOB_UID, T0, World

PADDLE = get_framework("PaddleJob")
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
K8S = ReconcileOptions(local_runtime=False)
WORKERS = ["pd-worker-0", "pd-worker-1", "pd-worker-2"]
PS_PODS = ["pd-master-0", "pd-worker-0", "pd-worker-1"]
DUMMY = {"name": "POD_IP_DUMMY", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
SEL = ("training.kubeflow.org/job-name=pd,training.kubeflow.org/operator-name=paddlejob-controller,"
       "training.kubeflow.org/replica-type=")


def paddle_job(master: int | None = None, workers: int | None = 3, policy: str = "OnFailure",
               backoff: int | None = 3, worker_first: bool = False, **run_policy) -> dict:
    """A PaddleJob as admission stores it (docs/SEMANTICS.md S1); collective mode unless ``master``."""
    def spec(n: int) -> dict:
        return {"replicas": n, "restartPolicy": policy, "template": {"spec": {"containers": [{
            "name": "paddle", "image": IMAGE, "command": list(COMMAND),
            "resources": {"limits": {"cpu": "1", "memory": "100Mi"}},
            "ports": [{"name": "master", "containerPort": 36543}]}]}}}
    specs = {}
    if master is not None:
        specs["Master"] = spec(master)
    if workers is not None:
        specs["Worker"] = spec(workers)
    if worker_first:
        specs = dict(reversed(list(specs.items())))
    rp = {"cleanPodPolicy": "None", "suspend": False, **run_policy}
    if backoff is not None:
        rp["backoffLimit"] = backoff
    return {"apiVersion": "kubeflow.org/v1", "kind": "PaddleJob",
            "metadata": {"name": "pd", "namespace": "default", "uid": JOB_UID, "resourceVersion": "1",
                         "creationTimestamp": T0},
            "spec": {"paddleReplicaSpecs": specs, "runPolicy": rp}}


def env(pod: dict, container: int = 0) -> list[dict]:
    return pod["spec"]["containers"][container]["env"]


def v(name: str, value: object) -> dict:
    return {"name": name, "value": str(value)}


def common(nnodes: int) -> list[dict]:
    return [v("PYTHONUNBUFFERED", "1"), v("PADDLE_JOB_ID", "pd"), v("PADDLE_NNODES", nnodes)]


def address(w: World, svc: str) -> str:
    return w.services[svc]["metadata"]["annotations"]["phalanx.dev/address"]


def host_port(w: World, svc: str) -> int:
    return json.loads(w.services[svc]["metadata"]["annotations"]["phalanx.dev/host-ports"])["master"]


# --------------------------------------------------------------------- collective mode


def test_s10_collective_mode_env_worker_0_is_the_rendezvous():
    w = started(paddle_job())
    assert sorted(w.pods) == WORKERS and host_port(w, "pd-worker-0") == 36543
    assert env(w.pods["pd-worker-0"]) == common(3) + [DUMMY, v("PADDLE_MASTER", "$(POD_IP_DUMMY):36543")]
    for n in WORKERS[1:]:
        assert env(w.pods[n]) == common(3) + [v("PADDLE_MASTER", "pd-worker-0:36543")], n


def test_collective_mode_port_is_worker_0s_host_port_when_taken():
    w = started(paddle_job(), taken_ports={36543})
    port = host_port(w, "pd-worker-0")
    assert port != 36543
    assert env(w.pods["pd-worker-0"])[-1] == v("PADDLE_MASTER", f"$(POD_IP_DUMMY):{port}")
    assert env(w.pods["pd-worker-2"])[-1] == v("PADDLE_MASTER", f"pd-worker-0:{port}")


def test_collective_mode_with_ip_addressing():
    w = started(paddle_job(), options=ReconcileOptions(resolvable_names=False))
    ip = address(w, "pd-worker-0")
    assert ip.startswith("127.")
    assert env(w.pods["pd-worker-0"])[-1] == v("PADDLE_MASTER", "$(POD_IP_DUMMY):36543")
    for n in WORKERS[1:]:
        assert env(w.pods[n])[-1] == v("PADDLE_MASTER", f"{ip}:36543"), n


def test_pod_ip_dummy_precedes_paddle_master_so_it_expands_to_the_pods_own_address():
    # Locally, the pod selected by a headless Service gets that Service's address as podIP.
    w = started(paddle_job(), options=ReconcileOptions(resolvable_names=False))
    ip = address(w, "pd-worker-0")
    pod = w.pods["pd-worker-0"]
    resolved = dict(container_env(pod, pod["spec"]["containers"][0], PodContext(pod_ip=ip), "spec.containers[0]"))
    assert resolved["POD_IP_DUMMY"] == ip
    assert resolved["PADDLE_MASTER"] == f"{ip}:36543"
    # ... and every other pod names the same endpoint.
    other = dict(container_env(w.pods["pd-worker-1"], w.pods["pd-worker-1"]["spec"]["containers"][0],
                               PodContext(pod_ip=address(w, "pd-worker-1")), "spec.containers[0]"))
    assert other["PADDLE_MASTER"] == resolved["PADDLE_MASTER"]


def test_collective_mode_kubernetes_names_and_no_job_role():
    w = started(paddle_job(), options=K8S)
    assert env(w.pods["pd-worker-1"])[-1] == v("PADDLE_MASTER", "pd-worker-0:36543")
    # IsMasterRole is Master only: a collective job has no job-role pod.
    assert all("training.kubeflow.org/job-role" not in p["metadata"]["labels"] for p in w.pods.values())


# ------------------------------------------------------------------------------ PS mode


def test_s10_ps_mode_env_master_0_is_the_rendezvous():
    w = started(paddle_job(master=1, workers=2))
    assert sorted(w.pods) == PS_PODS
    mport = host_port(w, "pd-master-0")
    assert mport == 36543 and host_port(w, "pd-worker-0") != 36543
    assert env(w.pods["pd-master-0"]) == common(3) + [
        DUMMY, v("PADDLE_MASTER", f"$(POD_IP_DUMMY):{mport}"), v("PADDLE_SERVER_NUM", "1")]
    for n in PS_PODS[1:]:
        assert env(w.pods[n]) == common(3) + [v("PADDLE_MASTER", f"pd-master-0:{mport}"),
                                              v("PADDLE_TRAINER_NUM", "1")], n


def test_ps_mode_second_master_and_ip_addressing():
    w = started(paddle_job(master=2, workers=1), options=ReconcileOptions(resolvable_names=False))
    ip = address(w, "pd-master-0")
    assert env(w.pods["pd-master-1"]) == common(3) + [v("PADDLE_MASTER", f"{ip}:36543"),
                                                      v("PADDLE_SERVER_NUM", "1")]
    assert env(w.pods["pd-worker-0"])[-2:] == [v("PADDLE_MASTER", f"{ip}:36543"), v("PADDLE_TRAINER_NUM", "1")]


def test_ps_mode_kubernetes_mode_and_every_container():
    job = paddle_job(master=1, workers=1)
    job["spec"]["paddleReplicaSpecs"]["Worker"]["template"]["spec"]["containers"].append(
        {"name": "sidecar", "image": "x", "command": ["true"], "env": [{"name": "A", "value": "1"}]})
    w = started(job, options=K8S)
    pod = w.pods["pd-worker-0"]
    want = common(2) + [v("PADDLE_MASTER", "pd-master-0:36543"), v("PADDLE_TRAINER_NUM", "1")]
    assert env(pod) == want and env(pod, 1) == [v("A", "1")] + want


def test_pod_names_labels_and_master_role():
    w = started(paddle_job(master=1, workers=2))
    for n in PS_PODS:
        rt, idx = n.split("-")[1], n.split("-")[2]
        want = {"training.kubeflow.org/operator-name": "paddlejob-controller",
                "training.kubeflow.org/job-name": "pd",
                "training.kubeflow.org/replica-type": rt,
                "training.kubeflow.org/replica-index": idx}
        if rt == "master":
            want["training.kubeflow.org/job-role"] = "master"
        assert w.pods[n]["metadata"]["labels"] == want, n
        assert w.pods[n]["spec"]["restartPolicy"] == "OnFailure"
    assert w.status["replicaStatuses"] == {"Master": {"selector": SEL + "master"},
                                           "Worker": {"selector": SEL + "worker"}}


# ----------------------------------------------------------------------- status rules


def rs(rtype: str, replicas: int, active: int = 0, succeeded: int = 0, failed: int = 0,
       policy: str = "OnFailure") -> ReplicaState:
    return ReplicaState(rtype, replicas, policy, active, succeeded, failed)


def run_rules(job: dict, states: list[ReplicaState]):
    st = StatusWriter("PaddleJob", "pd", "default", {}, NOW)
    PADDLE.update_status(job, states, st)
    out, events = st.finish()
    return [(c["type"], c["status"], c["reason"], c["message"]) for c in out.get("conditions", [])], events, out


def test_s7_ps_mode_the_master_drives_running_and_success():
    job = paddle_job(master=1, workers=2)
    conds, _, _ = run_rules(job, [rs("Master", 1), rs("Worker", 2, active=2)])
    assert conds == []
    conds, events, _ = run_rules(job, [rs("Master", 1, active=1), rs("Worker", 2)])
    assert conds == [("Running", "True", "PaddleJobRunning", "PaddleJob pd is running.")]
    assert events == [("Normal", "PaddleJobRunning", "PaddleJob pd is running.")]
    conds, events, status = run_rules(job, [rs("Master", 1, succeeded=1), rs("Worker", 2, active=2)])
    msg = "PaddleJob pd is successfully completed."
    assert conds == [("Succeeded", "True", "PaddleJobSucceeded", msg)]
    assert events == [("Normal", "PaddleJobSucceeded", msg)]
    assert status["completionTime"] == "2026-01-01T00:00:00Z"


def test_s7_collective_mode_needs_every_worker_and_messages_carry_the_namespace():
    job = paddle_job()
    conds, _, status = run_rules(job, [rs("Worker", 3, active=2, succeeded=1)])
    assert conds == [("Running", "True", "PaddleJobRunning", "PaddleJob default/pd is running.")]
    assert "completionTime" not in status
    conds, _, status = run_rules(job, [rs("Worker", 3, succeeded=3)])
    assert conds == [("Succeeded", "True", "PaddleJobSucceeded", "PaddleJob default/pd successfully completed.")]
    assert status["completionTime"]


@pytest.mark.parametrize("policy,ctype", [("OnFailure", "Restarting"), ("Always", "Restarting"),
                                          ("ExitCode", "Restarting"), ("Never", "Failed")])
@pytest.mark.parametrize("master", [None, 1])
def test_s7_failure_table(policy, ctype, master):
    job = paddle_job(master=master, workers=2, policy=policy)
    states = ([rs("Master", 1, active=1, policy=policy)] if master else []) + [
        rs("Worker", 2, active=1, failed=1, policy=policy)]
    conds, events, status = run_rules(job, states)
    if ctype == "Restarting":
        msg = "PaddleJob pd is restarting because 1 Worker replica(s) failed."
        assert conds[-1] == ("Restarting", "True", "PaddleJobRestarting", msg)
        assert ("Warning", "PaddleJobRestarting", msg) in events
        assert "completionTime" not in status
    else:
        msg = "PaddleJob pd is failed because 1 Worker replica(s) failed."
        assert conds[-1] == ("Failed", "True", "PaddleJobFailed", msg)
        assert ("Normal", "PaddleJobFailed", msg) in events
        assert status["completionTime"]


def test_a_failed_replica_already_replaced_is_neither_restart_nor_failure():
    conds, _, _ = run_rules(paddle_job(policy="Never"), [rs("Worker", 2, active=2, failed=1, policy="Never")])
    assert conds == [("Running", "True", "PaddleJobRunning", "PaddleJob default/pd is running.")]


def test_no_elastic_shortcut_one_worker_success_is_not_job_success():
    job = paddle_job()
    job["spec"]["elasticPolicy"] = {"minReplicas": 1, "maxReplicas": 3}
    conds, _, _ = run_rules(job, [rs("Worker", 3, active=2, succeeded=1)])
    assert [c[0] for c in conds] == ["Running"]


def test_s11_fixed_order_master_success_wins_whatever_the_order():
    job = paddle_job(master=1, workers=2, policy="Never")
    states = [rs("Master", 1, succeeded=1, policy="Never"), rs("Worker", 2, active=1, failed=1, policy="Never")]
    for order in (states, list(reversed(states))):
        conds, _, _ = run_rules(job, order)
        assert [c[0] for c in conds] == ["Succeeded"], order


def test_s11_fixed_order_through_the_reconciler_whatever_the_spec_dict_order():
    results = []
    for worker_first in (False, True):
        w = started(paddle_job(master=1, workers=2, policy="Never", worker_first=worker_first))
        w.running(*PS_PODS)
        w.step()
        w.succeeded("pd-master-0")
        w.failed("pd-worker-1", exit_code=1)
        plan = w.step()
        results.append((w.conditions(), sorted(plan.delete_pods), plan.podgroup_delete))
    assert results[0] == results[1]
    assert results[0][0][-1] == ("Succeeded", "True", "PaddleJobSucceeded")


# -------------------------------------------------------------------- through reconcile


def test_collective_run_succeeds_when_every_worker_succeeded():
    w = started(paddle_job())
    w.running(*WORKERS)
    plan = w.step()
    assert plan.events == [("Normal", "PaddleJobRunning", "PaddleJob default/pd is running.")]
    w.succeeded("pd-worker-0", "pd-worker-1")
    w.step()
    assert w.state() == "Running"
    w.advance(7)
    w.succeeded("pd-worker-2")
    plan = w.step()
    assert w.conditions() == [("Created", "True", "PaddleJobCreated"), ("Running", "False", "PaddleJobRunning"),
                              ("Succeeded", "True", "PaddleJobSucceeded")]
    assert w.status["completionTime"] == "2026-01-01T12:00:07Z"
    assert plan.podgroup_delete
    assert_fixpoint(w)


def test_s7_worker_failure_under_never_fails_the_job_and_cleans_up():
    w = started(paddle_job(master=1, workers=2, policy="Never"))
    w.running(*PS_PODS)
    w.step()
    w.advance(3)
    w.failed("pd-worker-0", exit_code=2)
    plan = w.step()
    msg = "PaddleJob pd is failed because 1 Worker replica(s) failed."
    assert w.conditions() == [("Created", "True", "PaddleJobCreated"), ("Running", "False", "PaddleJobRunning"),
                              ("Failed", "True", "PaddleJobFailed")]
    assert w.status["conditions"][-1]["message"] == msg
    assert w.status["completionTime"] == "2026-01-01T12:00:03Z"
    assert ("Normal", "PaddleJobFailed", msg) in plan.events
    assert sorted(plan.delete_pods) == PS_PODS and sorted(plan.delete_services) == PS_PODS
    assert plan.podgroup_delete
    assert_fixpoint(w)


def test_exit_code_retryable_restarts_and_permanent_fails():
    w = started(paddle_job(policy="ExitCode", backoff=5))
    w.running(*WORKERS)
    w.step()
    w.failed("pd-worker-2", exit_code=143)
    plan = w.step()
    assert plan.delete_pods == ["pd-worker-2"] and w.state() == "Restarting"
    assert "completionTime" not in w.status
    plan = w.step()
    assert [p["metadata"]["name"] for p in plan.create_pods] == ["pd-worker-2"]
    w.running("pd-worker-2")
    w.step()
    assert w.state() == "Running"
    w.failed("pd-worker-1", exit_code=1)
    plan = w.step()
    assert w.state() == "Failed" and w.status["completionTime"]
    assert w.status["conditions"][-1]["message"] == 'job "pd" is failing because "Worker" replica(s) failed.'
    assert sorted(plan.delete_pods) == WORKERS
