"""XGBoostJob plugin: env (docs/REFERENCE.md §5.3, docs/SEMANTICS.md S10), job-role (docs/REFERENCE.md §4.2), status rules (docs/REFERENCE.md §6.6, docs/SEMANTICS.md S7, S11)."""
from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from phalanx.controller.conditions import StatusWriter
from phalanx.controller.frameworks import ReplicaState, get_framework
from phalanx.controller.job import ReconcileOptions
from tests.unit.test_job_core import assert_fixpoint, started
from tests.unit.test_job_world import COMMAND, IMAGE, JOB_UID, T0, World, env_of

XGB = get_framework("XGBoostJob")
NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
K8S = ReconcileOptions(local_runtime=False)
PODS = ["xgb-master-0", "xgb-worker-0", "xgb-worker-1"]


def xgb_job(master: int | None = 1, workers: int | None = 2, policy: str = "Never", backoff: int | None = 3,
            worker_first: bool = False, **run_policy) -> dict:
    """An XGBoostJob as admission stores it (docs/SEMANTICS.md S1: defaults persisted)."""
    def spec(n: int) -> dict:
        return {"replicas": n, "restartPolicy": policy, "template": {"spec": {"containers": [{
            "name": "xgboost", "image": IMAGE, "command": list(COMMAND),
            "resources": {"limits": {"cpu": "1", "memory": "100Mi"}},
            "ports": [{"name": "xgboostjob-port", "containerPort": 9999}]}]}}}
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
    return {"apiVersion": "kubeflow.org/v1", "kind": "XGBoostJob",
            "metadata": {"name": "xgb", "namespace": "default", "uid": JOB_UID, "resourceVersion": "1",
                         "creationTimestamp": T0},
            "spec": {"xgbReplicaSpecs": specs, "runPolicy": rp}}


def env_list(pod: dict, container: int = 0) -> list[tuple[str, str]]:
    return [(e["name"], e["value"]) for e in pod["spec"]["containers"][container]["env"]]


def expected_env(rank: int, master: str = "xgb-master-0", mport: int = 9999, wport: int | None = 10000,
                 workers: tuple[str, ...] = ("xgb-worker-0", "xgb-worker-1"), world: int = 3) -> list:
    env = [("MASTER_PORT", str(mport)), ("MASTER_ADDR", master), ("WORLD_SIZE", str(world)),
           ("RANK", str(rank)), ("PYTHONUNBUFFERED", "1")]
    if wport is not None:
        env += [("WORKER_PORT", str(wport)), ("WORKER_ADDRS", ",".join(workers))]
    return env


def host_port(w: World, svc: str) -> int:
    return json.loads(w.services[svc]["metadata"]["annotations"]["phalanx.dev/host-ports"])["xgboostjob-port"]


# ------------------------------------------------------------------------------- env


def test_s10_env_local_runtime_with_resolvable_names_uses_host_ports():
    # Every Service declares 9999; host ports are unique on the machine, so the
    # master keeps 9999 and the workers get others. MASTER_PORT is the master's,
    # WORKER_PORT worker-0's (the original's single Worker port).
    w = started(xgb_job())
    assert sorted(w.pods) == PODS
    assert host_port(w, "xgb-master-0") == 9999 and host_port(w, "xgb-worker-0") == 10000
    for rank, n in enumerate(PODS):
        assert env_list(w.pods[n]) == expected_env(rank), n


def test_env_when_the_masters_port_is_taken_by_another_job():
    w = started(xgb_job(), taken_ports={9999, 10000})
    mport, wport = host_port(w, "xgb-master-0"), host_port(w, "xgb-worker-0")
    assert 9999 not in (mport, wport) and mport != wport
    assert env_list(w.pods["xgb-worker-1"]) == expected_env(2, mport=mport, wport=wport)


def test_env_with_ip_addressing_when_names_do_not_resolve():
    w = started(xgb_job(), options=ReconcileOptions(resolvable_names=False))
    ip = {n: s["metadata"]["annotations"]["phalanx.dev/address"] for n, s in w.services.items()}
    assert all(a.startswith("127.") for a in ip.values()) and len(set(ip.values())) == 3
    for rank, n in enumerate(PODS):
        assert env_list(w.pods[n]) == expected_env(
            rank, master=ip["xgb-master-0"], workers=(ip["xgb-worker-0"], ip["xgb-worker-1"])), n


def test_env_kubernetes_mode_uses_names_and_declared_ports():
    w = started(xgb_job(), options=K8S)
    for rank, n in enumerate(PODS):
        assert env_list(w.pods[n]) == expected_env(rank, wport=9999), n


def test_worker_addrs_lists_total_minus_one_workers_as_the_original():
    w = started(xgb_job(workers=4), options=K8S)
    env = env_of(w.pods["xgb-worker-3"])
    assert (env["WORLD_SIZE"], env["RANK"]) == ("5", "4")
    assert env["WORKER_ADDRS"] == "xgb-worker-0,xgb-worker-1,xgb-worker-2,xgb-worker-3"


def test_a_single_pod_job_gets_no_lightgbm_variables():
    w = started(xgb_job(workers=None))
    assert env_list(w.pods["xgb-master-0"]) == expected_env(0, wport=None, world=1)


def test_env_is_appended_to_every_container_after_the_users_own():
    job = xgb_job()
    containers = job["spec"]["xgbReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    containers[0]["env"] = [{"name": "RANK", "value": "mine"}]
    containers.append({"name": "sidecar", "image": "x", "command": ["true"]})
    w = started(job, options=K8S)
    pod = w.pods["xgb-worker-0"]
    assert env_list(pod) == [("RANK", "mine")] + expected_env(1, wport=9999)
    assert env_list(pod, 1) == expected_env(1, wport=9999)


def test_pod_names_labels_and_master_role():
    w = started(xgb_job())
    for n in PODS:
        rt, idx = n.split("-")[1], n.split("-")[2]
        want = {"training.kubeflow.org/operator-name": "xgboostjob-controller",
                "training.kubeflow.org/job-name": "xgb",
                "training.kubeflow.org/replica-type": rt,
                "training.kubeflow.org/replica-index": idx}
        if rt == "master":
            want["training.kubeflow.org/job-role"] = "master"
        assert w.pods[n]["metadata"]["labels"] == want, n
        assert w.pods[n]["spec"]["restartPolicy"] == "Never"
    assert sorted(w.services) == PODS
    assert XGB.is_master_role(xgb_job(), "Master", 0)
    assert not XGB.is_master_role(xgb_job(), "Worker", 0)
    # XGBoost sets no replica selector (only PyTorch, Paddle, JAX do).
    assert all("selector" not in rs for rs in w.status["replicaStatuses"].values())


# ----------------------------------------------------------------------- status rules


def rs(rtype: str, replicas: int, active: int = 0, succeeded: int = 0, failed: int = 0,
       policy: str = "Never") -> ReplicaState:
    return ReplicaState(rtype, replicas, policy, active, succeeded, failed)


def run_rules(states: list[ReplicaState], status: dict | None = None):
    st = StatusWriter("XGBoostJob", "xgb", "default", status or {}, NOW)
    XGB.update_status(xgb_job(), states, st)
    out, events = st.finish()
    return [(c["type"], c["status"], c["reason"], c["message"]) for c in out.get("conditions", [])], events, out


RUNNING_MSG = "XGBoostJob xgb is running."
DONE_MSG = "XGBoostJob xgb is successfully completed."


def test_s7_running_is_driven_by_the_master_only():
    conds, events, status = run_rules([rs("Master", 1), rs("Worker", 2, active=2)])
    assert conds == [] and events == [] and "completionTime" not in status
    conds, events, _ = run_rules([rs("Master", 1, active=1), rs("Worker", 2)])
    assert conds == [("Running", "True", "XGBoostJobRunning", RUNNING_MSG)]
    assert events == [("Normal", "XGBoostJobRunning", RUNNING_MSG)]


def test_s7_master_success_sets_running_then_succeeded_with_completion_time():
    conds, events, status = run_rules([rs("Master", 1, succeeded=1), rs("Worker", 2, active=2)])
    assert conds == [("Running", "False", "XGBoostJobRunning", RUNNING_MSG),
                     ("Succeeded", "True", "XGBoostJobSucceeded", DONE_MSG)]
    assert events == [("Normal", "XGBoostJobSucceeded", DONE_MSG)]
    assert status["completionTime"] == "2026-01-01T00:00:00Z"


@pytest.mark.parametrize("policy,ctype,reason,verb", [
    ("ExitCode", "Restarting", "XGBoostJobRestarting", "is restarting"),
    ("Never", "Failed", "XGBoostJobFailed", "is failed"),
    ("OnFailure", "Failed", "XGBoostJobFailed", "is failed"),  # unlike PyTorch (docs/REFERENCE.md §6.6)
    ("Always", "Failed", "XGBoostJobFailed", "is failed"),
])
@pytest.mark.parametrize("rtype", ["Master", "Worker"])
def test_s7_failure_table(policy, ctype, reason, verb, rtype):
    states = [rs("Master", 1, active=int(rtype != "Master"), failed=int(rtype == "Master"), policy=policy),
              rs("Worker", 2, active=1, failed=1 if rtype == "Worker" else 0, policy=policy)]
    conds, events, status = run_rules(states)
    msg = f"XGBoostJob xgb {verb} because 1 {rtype} replica(s) failed."
    if ctype == "Restarting":
        assert conds == [("Restarting", "True", reason, msg)]
        assert events == [("Warning", reason, msg)]
        assert "completionTime" not in status
    else:
        assert conds == [("Running", "False", "XGBoostJobRunning", RUNNING_MSG), ("Failed", "True", reason, msg)]
        assert events == [("Normal", reason, msg)]
        assert status["completionTime"] == "2026-01-01T00:00:00Z"


def test_s7_failure_counts_are_reported():
    conds, _, _ = run_rules([rs("Master", 1, active=1), rs("Worker", 3, active=1, failed=2)])
    assert conds[-1][3] == "XGBoostJob xgb is failed because 2 Worker replica(s) failed."


def test_s11_fixed_order_master_success_wins_over_a_worker_failure_whatever_the_order():
    # The original walks a Go map: Worker first -> Failed (frozen), Master first -> Succeeded.
    states = [rs("Master", 1, succeeded=1), rs("Worker", 2, active=1, failed=1)]
    for order in (states, list(reversed(states))):
        conds, _, _ = run_rules(order)
        assert [c[0] for c in conds] == ["Running", "Succeeded"], order


def test_s11_fixed_order_through_the_reconciler_whatever_the_spec_dict_order():
    results = []
    for worker_first in (False, True):
        w = started(xgb_job(worker_first=worker_first))
        w.running(*PODS)
        w.step()
        w.succeeded("xgb-master-0")
        w.failed("xgb-worker-1", exit_code=1)
        plan = w.step()
        results.append((w.conditions(), sorted(plan.delete_pods), plan.podgroup_delete))
    assert results[0] == results[1]
    assert results[0][0][-1] == ("Succeeded", "True", "XGBoostJobSucceeded")


# -------------------------------------------------------------------- through reconcile


def test_normal_run_master_running_then_succeeded():
    w = started(xgb_job())
    w.running("xgb-worker-0", "xgb-worker-1")
    w.step()
    assert w.state() == "Created"  # workers do not drive Running
    w.running("xgb-master-0")
    plan = w.step()
    assert w.conditions() == [("Created", "True", "XGBoostJobCreated"), ("Running", "True", "XGBoostJobRunning")]
    assert plan.events == [("Normal", "XGBoostJobRunning", RUNNING_MSG)]
    assert w.status["replicaStatuses"] == {"Master": {"active": 1}, "Worker": {"active": 2}}
    assert_fixpoint(w)
    w.advance(10)
    w.succeeded("xgb-master-0")
    plan = w.step()
    assert w.conditions() == [("Created", "True", "XGBoostJobCreated"), ("Running", "False", "XGBoostJobRunning"),
                              ("Succeeded", "True", "XGBoostJobSucceeded")]
    assert w.status["completionTime"] == "2026-01-01T12:00:10Z"
    assert plan.podgroup_delete and plan.delete_pods == []  # cleanPodPolicy None keeps the workers
    assert_fixpoint(w)


def test_s7_worker_failure_under_never_fails_the_job_and_cleans_up():
    w = started(xgb_job(policy="Never"))
    w.running(*PODS)
    w.step()
    w.advance(5)
    w.failed("xgb-worker-1", exit_code=1)
    plan = w.step()
    msg = "XGBoostJob xgb is failed because 1 Worker replica(s) failed."
    assert w.conditions() == [("Created", "True", "XGBoostJobCreated"), ("Running", "False", "XGBoostJobRunning"),
                              ("Failed", "True", "XGBoostJobFailed")]
    assert w.status["conditions"][-1]["message"] == msg
    assert w.status["completionTime"] == "2026-01-01T12:00:05Z"
    assert ("Normal", "XGBoostJobFailed", msg) in plan.events
    # docs/SEMANTICS.md S5: on failure every pod and service goes, whatever cleanPodPolicy says; PodGroup deleted.
    assert sorted(plan.delete_pods) == PODS and sorted(plan.delete_services) == PODS
    assert plan.podgroup_delete
    assert_fixpoint(w)


def test_exit_code_retryable_restarts_the_pod_and_shows_restarting():
    w = started(xgb_job(policy="ExitCode", backoff=5))
    w.running(*PODS)
    w.step()
    w.failed("xgb-worker-0", exit_code=137)
    plan = w.step()
    msg = "XGBoostJob xgb is restarting because 1 Worker replica(s) failed."
    assert plan.delete_pods == ["xgb-worker-0"]
    assert w.conditions()[-1] == ("Restarting", "True", "XGBoostJobRestarting")
    assert w.status["conditions"][-1]["message"] == msg
    assert ("Warning", "XGBoostJobRestarting", msg) in plan.events
    assert "completionTime" not in w.status
    plan = w.step()
    assert [p["metadata"]["name"] for p in plan.create_pods] == ["xgb-worker-0"]
    w.running("xgb-worker-0")
    w.step()
    assert w.state() == "Running"
    assert w.status["restartCount"] == 1


def test_exit_code_permanent_fails_the_job_with_a_completion_time():
    w = started(xgb_job(policy="ExitCode", backoff=5))
    w.running(*PODS)
    w.step()
    w.failed("xgb-master-0", exit_code=1)
    plan = w.step()
    assert w.state() == "Failed"
    assert w.status["conditions"][-1]["message"] == 'job "xgb" is failing because "Master" replica(s) failed.'
    assert w.status["completionTime"]
    assert sorted(plan.delete_pods) == PODS and plan.podgroup_delete

