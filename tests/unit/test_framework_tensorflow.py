"""TFJob plugin: TF_CONFIG (docs/REFERENCE.md T2, docs/REFERENCE.md §5.2) and status rules (docs/REFERENCE.md T1, docs/REFERENCE.md §6.4; docs/SEMANTICS.md S7)."""
from __future__ import annotations

import json

from phalanx.controller.frameworks import get_framework
from phalanx.controller.job import ReconcileOptions
from tests.unit.test_job_core import assert_fixpoint, started
from tests.unit.test_job_world import World, env_of, tf_job

TF = get_framework("TFJob")
WORKERS = ["tftest-worker-0", "tftest-worker-1", "tftest-worker-2"]
K8S = ReconcileOptions(local_runtime=False)


def tf_config(pod: dict) -> str:
    return env_of(pod)["TF_CONFIG"]


# ----------------------------------------------------------------------------- T2


def test_t2_tf_config_exact_string_for_ps_and_workers():
    # docs/REFERENCE.md T2 (seed 002), as the original writes it in Kubernetes mode.
    w = started(tf_job(), options=K8S)
    cluster = ('{"cluster":{"ps":["tftest-ps-0.default.svc:2222"],"worker":["tftest-worker-0.default.svc:2222",'
               '"tftest-worker-1.default.svc:2222","tftest-worker-2.default.svc:2222"]},')
    assert tf_config(w.pods["tftest-ps-0"]) == cluster + '"task":{"type":"ps","index":0},"environment":"cloud"}'
    for i, n in enumerate(WORKERS):
        assert tf_config(w.pods[n]) == cluster + f'"task":{{"type":"worker","index":{i}}},"environment":"cloud"}}'


def test_t2_local_runtime_uses_each_replicas_effective_host_port():
    # DESIGN "Ports are shared on one host": PS and workers all declare 2222.
    w = started(tf_job())
    ports = {n: json.loads(s["metadata"]["annotations"]["phalanx.dev/host-ports"])["tfjob-port"]
             for n, s in w.services.items()}
    assert ports["tftest-ps-0"] == 2222 and len(set(ports.values())) == 4
    cfg = json.loads(tf_config(w.pods["tftest-worker-1"]))
    assert cfg == {
        "cluster": {"ps": [f"tftest-ps-0.default.svc:{ports['tftest-ps-0']}"],
                    "worker": [f"{n}.default.svc:{ports[n]}" for n in WORKERS]},
        "task": {"type": "worker", "index": 1},
        "environment": "cloud",
    }


def test_t2_addresses_when_names_do_not_resolve():
    w = started(tf_job(), options=ReconcileOptions(resolvable_names=False))
    addr = {n: s["metadata"]["annotations"]["phalanx.dev/address"] for n, s in w.services.items()}
    cfg = json.loads(tf_config(w.pods["tftest-ps-0"]))
    assert cfg["cluster"]["ps"] == [f"{addr['tftest-ps-0']}:2222"]
    assert [a.rsplit(":", 1)[0] for a in cfg["cluster"]["worker"]] == [addr[n] for n in WORKERS]


def test_custom_cluster_domain_is_appended():
    w = started(tf_job(), options=ReconcileOptions(local_runtime=False, cluster_domain="cluster.local"))
    cfg = json.loads(tf_config(w.pods["tftest-ps-0"]))
    assert cfg["cluster"]["ps"] == ["tftest-ps-0.default.svc.cluster.local:2222"]


def test_a_single_replica_job_gets_no_tf_config():
    w = started(tf_job(ps=None, workers=1), options=K8S)
    assert "TF_CONFIG" not in env_of(w.pods["tftest-worker-0"])


def test_only_the_first_tensorflow_container_gets_tf_config():
    job = tf_job()
    containers = job["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    containers.insert(0, {"name": "sidecar", "image": "x"})
    containers.append({"name": "tensorflow", "image": "y"})  # a second one (invalid, but never crash)
    w = started(job, options=K8S)
    pod = w.pods["tftest-worker-0"]
    assert [bool(c.get("env")) for c in pod["spec"]["containers"]] == [False, True, False]


def test_sparse_tf_config_with_enable_dynamic_worker():
    job = tf_job(extra={"Chief": 1})
    job["spec"]["enableDynamicWorker"] = True
    w = started(job, options=K8S)
    assert tf_config(w.pods["tftest-ps-0"]) == (
        '{"sparseCluster":{"worker":{},"ps":["tftest-ps-0.default.svc:2222"]},"task":{"type":"ps","index":0}}')
    assert tf_config(w.pods["tftest-worker-2"]) == (
        '{"sparseCluster":{"worker":{"2":"tftest-worker-2.default.svc:2222"},'
        '"ps":["tftest-ps-0.default.svc:2222"]},"task":{"type":"worker","index":2}}')
    assert tf_config(w.pods["tftest-chief-0"]) == (
        '{"sparseCluster":{"worker":{},"ps":[]},"task":{"type":"chief","index":0}}')


def test_master_role_is_worker_0_unless_a_chief_or_master_exists():
    w = started(tf_job(), options=K8S)
    roles = {n: p["metadata"]["labels"].get("training.kubeflow.org/job-role") for n, p in w.pods.items()}
    assert roles == {"tftest-ps-0": None, "tftest-worker-0": "master", "tftest-worker-1": None, "tftest-worker-2": None}
    assert TF.is_master_role(tf_job(extra={"Chief": 1}), "Chief", 0)
    assert not TF.is_master_role(tf_job(extra={"Chief": 1}), "Worker", 0)


# ----------------------------------------------------------------------------- T1


def running(job=None) -> World:
    w = started(job or tf_job())
    w.running(*w.pods)
    w.step()
    return w


def test_t1_normal_run_succeeds_when_worker_0_completes():
    # docs/REFERENCE.md T1 (seed 002) with the original's rule (docs/SEMANTICS.md S7): default successPolicy -> worker-0.
    w = started(tf_job())
    w.running("tftest-ps-0")
    w.step()
    assert w.state() == "Created"  # only workers drive Running without a chief
    w.running(*WORKERS)
    plan = w.step()
    assert w.conditions()[-1] == ("Running", "True", "TFJobRunning")
    assert w.status["conditions"][-1]["message"] == "TFJob default/tftest is running."
    assert plan.events == [("Normal", "TFJobRunning", "TFJob default/tftest is running.")]
    assert w.status["replicaStatuses"] == {"PS": {"active": 1}, "Worker": {"active": 3}}  # no selector for TF
    w.succeeded("tftest-worker-0")
    plan = w.step()
    assert w.conditions() == [("Created", "True", "TFJobCreated"), ("Running", "False", "TFJobRunning"),
                              ("Succeeded", "True", "TFJobSucceeded")]
    assert w.status["conditions"][-1]["message"] == "TFJob default/tftest successfully completed."
    assert plan.podgroup_delete and plan.delete_pods == []  # pods remain (cleanPodPolicy None)
    assert_fixpoint(w)


def test_t1_all_workers_success_policy_waits_for_every_worker():
    job = tf_job()
    job["spec"]["successPolicy"] = "AllWorkers"
    w = running(job)
    w.succeeded("tftest-worker-0", "tftest-worker-1")
    w.step()
    assert w.state() == "Running"
    w.succeeded("tftest-worker-2")
    w.step()
    assert w.state() == "Succeeded"


def test_worker_0_must_exit_0():
    w = running()
    w.succeeded("tftest-worker-0")
    w.pods["tftest-worker-0"]["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] = 3
    w.step()
    assert w.state() == "Running"


def test_chief_decides_when_present():
    w = running(tf_job(extra={"Chief": 1}))
    assert w.state() == "Running"
    w.succeeded("tftest-worker-0")
    w.step()
    assert w.state() == "Running"
    w.succeeded("tftest-chief-0")
    w.step()
    assert w.state() == "Succeeded"


def test_s7_a_ps_failing_under_never_fails_the_tfjob():
    w = running(tf_job(ps_policy="Never"))
    w.failed("tftest-ps-0", exit_code=1)
    plan = w.step()
    assert w.conditions()[-1] == ("Failed", "True", "TFJobFailed")
    msg = "TFJob default/tftest has failed because 1 PS replica(s) failed."
    assert w.status["conditions"][-1]["message"] == msg
    assert ("Normal", "TFJobFailed", msg) in plan.events
    assert len(plan.delete_pods) == 4


def test_dynamic_worker_failure_is_ignored():
    job = tf_job(worker_policy="Never")
    job["spec"]["enableDynamicWorker"] = True
    w = running(job)
    w.failed("tftest-worker-2", exit_code=1)
    w.step()
    assert w.state() == "Running"


def test_worker_restart_is_shown_as_restarting_until_it_runs_again():
    # Seed 001 observation kept: Running -> Restarting -> Running.
    w = running(tf_job(backoff=5))
    w.failed("tftest-worker-1", exit_code=None)
    w.step()
    assert w.state() == "Restarting"
    plan = w.step()  # recreated; the other workers run, so the job is Running again
    assert [p["metadata"]["name"] for p in plan.create_pods] == ["tftest-worker-1"]
    assert w.state() == "Running"
    assert [c[0] for c in w.conditions()] == ["Created", "Running"]
    assert_fixpoint(w)
