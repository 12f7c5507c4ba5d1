"""JAXJob plugin: env (docs/REFERENCE.md §5.5, docs/SEMANTICS.md S10), job-role (docs/REFERENCE.md §4.2), status rules (docs/REFERENCE.md §6.8, docs/SEMANTICS.md S7, S11)."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from phalanx.controller.conditions import StatusWriter
from phalanx.controller.frameworks import ReplicaState, get_framework
from phalanx.controller.job import ReconcileOptions
from tests.unit.test_job_core import assert_fixpoint, started
from tests.unit.test_job_world import COMMAND, IMAGE, JOB_UID, T0, World

JAX = get_framework("JAXJob")
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
K8S = ReconcileOptions(local_runtime=False)
PODS = ["jx-worker-0", "jx-worker-1", "jx-worker-2"]
SEL = ("training.kubeflow.org/job-name=jx,training.kubeflow.org/operator-name=jaxjob-controller,"
       "training.kubeflow.org/replica-type=worker")


def jax_job(workers: int = 3, policy: str = "Never", backoff: int | None = 3, **run_policy) -> dict:
    """A JAXJob as admission stores it (docs/SEMANTICS.md S1: defaults persisted)."""
    rp = {"cleanPodPolicy": "None", "suspend": False, **run_policy}
    if backoff is not None:
        rp["backoffLimit"] = backoff
    worker = {"replicas": workers, "restartPolicy": policy, "template": {"spec": {"containers": [{
        "name": "jax", "image": IMAGE, "command": list(COMMAND),
        "resources": {"limits": {"cpu": "1", "memory": "100Mi"}},
        "ports": [{"name": "jaxjob-port", "containerPort": 6666}]}]}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "JAXJob",
            "metadata": {"name": "jx", "namespace": "default", "uid": JOB_UID, "resourceVersion": "1",
                         "creationTimestamp": T0},
            "spec": {"jaxReplicaSpecs": {"Worker": worker}, "runPolicy": rp}}


def env_list(pod: dict, container: int = 0) -> list[tuple[str, str]]:
    return [(e["name"], e["value"]) for e in pod["spec"]["containers"][container]["env"]]


def expected_env(pid: int, addr: str = "jx-worker-0", port: int = 6666, n: int = 3) -> list[tuple[str, str]]:
    return [("PYTHONUNBUFFERED", "1"), ("COORDINATOR_PORT", str(port)), ("COORDINATOR_ADDRESS", addr),
            ("NUM_PROCESSES", str(n)), ("PROCESS_ID", str(pid))]


def host_port(w: World, svc: str) -> int:
    return json.loads(w.services[svc]["metadata"]["annotations"]["phalanx.dev/host-ports"])["jaxjob-port"]


# ------------------------------------------------------------------------------- env


def test_s10_env_with_resolvable_names():
    w = started(jax_job())
    assert sorted(w.pods) == PODS and host_port(w, "jx-worker-0") == 6666
    for pid, n in enumerate(PODS):
        assert env_list(w.pods[n]) == expected_env(pid), n


def test_coordinator_port_is_worker_0s_host_port_when_taken():
    w = started(jax_job(), taken_ports={6666})
    port = host_port(w, "jx-worker-0")
    assert port != 6666
    for pid, n in enumerate(PODS):
        assert env_list(w.pods[n]) == expected_env(pid, port=port), n


def test_env_with_ip_addressing_when_names_do_not_resolve():
    w = started(jax_job(), options=ReconcileOptions(resolvable_names=False))
    ip = w.services["jx-worker-0"]["metadata"]["annotations"]["phalanx.dev/address"]
    assert ip.startswith("127.")
    for pid, n in enumerate(PODS):
        assert env_list(w.pods[n]) == expected_env(pid, addr=ip), n


def test_env_kubernetes_mode_and_every_container():
    job = jax_job(workers=2)
    job["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"].append(
        {"name": "sidecar", "image": "x", "command": ["true"]})
    w = started(job, options=K8S)
    pod = w.pods["jx-worker-1"]
    assert env_list(pod) == env_list(pod, 1) == expected_env(1, n=2)


def test_pod_names_labels_and_master_role_is_index_0():
    w = started(jax_job())
    for i, n in enumerate(PODS):
        want = {"training.kubeflow.org/operator-name": "jaxjob-controller",
                "training.kubeflow.org/job-name": "jx",
                "training.kubeflow.org/replica-type": "worker",
                "training.kubeflow.org/replica-index": str(i)}
        if i == 0:
            want["training.kubeflow.org/job-role"] = "master"
        assert w.pods[n]["metadata"]["labels"] == want, n
        assert w.pods[n]["spec"]["restartPolicy"] == "Never"
    assert w.status["replicaStatuses"] == {"Worker": {"selector": SEL}}
    # Any replica type with index 0, as the original (the type is not looked at).
    assert JAX.is_master_role(jax_job(), "Other", 0) and not JAX.is_master_role(jax_job(), "Worker", 1)


# ----------------------------------------------------------------------- status rules


def rs(replicas: int, active: int = 0, succeeded: int = 0, failed: int = 0, policy: str = "Never",
       rtype: str = "Worker") -> ReplicaState:
    return ReplicaState(rtype, replicas, policy, active, succeeded, failed)


def run_rules(states: list[ReplicaState]):
    st = StatusWriter("JAXJob", "jx", "default", {}, NOW)
    JAX.update_status(jax_job(), states, st)
    out, events = st.finish()
    return [(c["type"], c["status"], c["reason"], c["message"]) for c in out.get("conditions", [])], events, out


RUNNING_MSG = "JAXJob default/jx is running."
DONE_MSG = "JAXJob default/jx successfully completed."


def test_s7_running_and_success_need_every_worker():
    conds, events, _ = run_rules([rs(3)])
    assert conds == [] and events == []
    conds, events, status = run_rules([rs(3, active=2, succeeded=1)])
    assert conds == [("Running", "True", "JAXJobRunning", RUNNING_MSG)]
    assert events == [("Normal", "JAXJobRunning", RUNNING_MSG)]
    assert "completionTime" not in status
    conds, events, status = run_rules([rs(3, succeeded=3)])
    assert conds == [("Succeeded", "True", "JAXJobSucceeded", DONE_MSG)]
    assert events == [("Normal", "JAXJobSucceeded", DONE_MSG)]
    assert status["completionTime"] == "2026-01-01T00:00:00Z"


@pytest.mark.parametrize("policy,ctype", [("OnFailure", "Restarting"), ("Always", "Restarting"),
                                          ("ExitCode", "Restarting"), ("Never", "Failed")])
def test_s7_failure_table(policy, ctype):
    conds, events, status = run_rules([rs(3, active=1, failed=2, policy=policy)])
    if ctype == "Restarting":
        msg = "JAXJob jx is restarting because 2 Worker replica(s) failed."
        assert conds == [("Restarting", "True", "JAXJobRestarting", msg)]
        assert events == [("Warning", "JAXJobRestarting", msg)]
        assert "completionTime" not in status
    else:
        msg = "JAXJob jx is failed because 2 Worker replica(s) failed."
        assert conds == [("Running", "False", "JAXJobRunning", RUNNING_MSG), ("Failed", "True", "JAXJobFailed", msg)]
        assert events == [("Normal", "JAXJobFailed", msg)]
        assert status["completionTime"] == "2026-01-01T00:00:00Z"


def test_a_failed_replica_already_replaced_is_neither_restart_nor_failure():
    conds, _, _ = run_rules([rs(2, active=2, failed=1)])
    assert conds == [("Running", "True", "JAXJobRunning", RUNNING_MSG)]


def test_s11_rules_do_not_depend_on_the_order_they_are_given():
    # One known replica type; an unknown one (rejected at admission) only adds the
    # failure rule, and the result is the same whichever comes first.
    states = [rs(2, succeeded=2), rs(1, failed=1, rtype="Other")]
    results = [run_rules(order)[0] for order in (states, list(reversed(states)))]
    assert results[0] == results[1]
    assert [c[0] for c in results[0]] == ["Succeeded", "Failed"]


# -------------------------------------------------------------------- through reconcile


def test_run_succeeds_when_every_worker_succeeded():
    w = started(jax_job())
    w.running(*PODS)
    w.step()
    assert w.state() == "Running"
    w.succeeded("jx-worker-0")
    w.step()
    assert w.state() == "Running"  # worker-0 alone does not decide (unlike TFJob)
    w.advance(9)
    w.succeeded("jx-worker-1", "jx-worker-2")
    plan = w.step()
    assert w.conditions() == [("Created", "True", "JAXJobCreated"), ("Running", "False", "JAXJobRunning"),
                              ("Succeeded", "True", "JAXJobSucceeded")]
    assert w.status["completionTime"] == "2026-01-01T12:00:09Z"
    assert w.status["replicaStatuses"] == {"Worker": {"succeeded": 3, "selector": SEL}}
    assert plan.podgroup_delete
    assert_fixpoint(w)


def test_s7_worker_failure_under_never_fails_the_job_and_cleans_up():
    w = started(jax_job(policy="Never"))
    w.running(*PODS)
    w.step()
    w.advance(4)
    w.failed("jx-worker-2", exit_code=1)
    plan = w.step()
    msg = "JAXJob jx is failed because 1 Worker replica(s) failed."
    assert w.conditions() == [("Created", "True", "JAXJobCreated"), ("Running", "False", "JAXJobRunning"),
                              ("Failed", "True", "JAXJobFailed")]
    assert w.status["conditions"][-1]["message"] == msg
    assert w.status["completionTime"] == "2026-01-01T12:00:04Z"
    assert ("Normal", "JAXJobFailed", msg) in plan.events
    assert sorted(plan.delete_pods) == PODS and sorted(plan.delete_services) == PODS
    assert plan.podgroup_delete
    assert_fixpoint(w)


def test_exit_code_retryable_restarts_and_permanent_fails():
    w = started(jax_job(policy="ExitCode", backoff=5))
    w.running(*PODS)
    w.step()
    w.failed("jx-worker-1", exit_code=None)  # evicted: never terminated, retryable
    plan = w.step()
    assert plan.delete_pods == ["jx-worker-1"] and w.state() == "Restarting"
    plan = w.step()
    assert [p["metadata"]["name"] for p in plan.create_pods] == ["jx-worker-1"]
    w.running("jx-worker-1")
    w.step()
    assert w.state() == "Running" and w.status["restartCount"] == 1
    w.failed("jx-worker-0", exit_code=127)
    plan = w.step()
    assert w.state() == "Failed" and w.status["completionTime"]
    assert w.status["conditions"][-1]["message"] == 'job "jx" is failing because "Worker" replica(s) failed.'
    assert sorted(plan.delete_pods) == PODS
