"""The pure job reconciler driven by hand-made pod and PodGroup states (fixed clock).

Seed references: docs/REFERENCE.md P1 (seed 000), C1 (seed 003); docs/SEMANTICS.md S5, S7, S8, S10, S11.
"""
from __future__ import annotations

import copy
import json

import pytest

from phalanx.api.constants import ANNOTATION_HOST_PORTS
from phalanx.controller.frameworks import get_framework
from phalanx.controller.job import Plan, ReconcileOptions, reconcile
from phalanx.objects.clock import format_time
from tests.unit.test_job_world import JOB_UID, NOW, T0, World, env_of, pytorch_job, tf_job

PYTORCH = get_framework("PyTorchJob")
PODS = ["pytest-master-0", "pytest-worker-0", "pytest-worker-1", "pytest-worker-2"]
OWNER = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "pytest", "uid": JOB_UID,
         "controller": True, "blockOwnerDeletion": True}
SEL_MASTER = ("training.kubeflow.org/job-name=pytest,training.kubeflow.org/operator-name=pytorchjob-controller,"
              "training.kubeflow.org/replica-type=master")
SEL_WORKER = SEL_MASTER.replace("=master", "=worker")


def assert_fixpoint(w: World) -> None:
    """Idempotence: on its own output, reconcile has nothing left to do."""
    w.settle()
    assert w.reconcile().is_empty()


def started(job: dict | None = None, **kw) -> World:
    """A world in which the PodGroup is admitted and every pod created (Pending)."""
    w = World(job or pytorch_job(), **kw)
    w.step()
    w.admit()
    w.settle()
    return w


# ---------------------------------------------------------------------------- P1


def test_p1_normal_run_step_by_step():
    # docs/REFERENCE.md P1 (seed 000): Created -> PodGroup -> (gated) -> services -> pods ->
    # Running when the master runs -> Succeeded when the master completes -> PodGroup deleted.
    w = World(pytorch_job())

    plan = w.step()
    created = {"type": "Created", "status": "True", "reason": "PyTorchJobCreated",
               "message": "PyTorchJob pytest is created.", "lastUpdateTime": T0, "lastTransitionTime": T0}
    assert plan.status == {"conditions": [created], "replicaStatuses": {}}
    assert plan.podgroup_create == {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "pytest", "namespace": "default", "ownerReferences": [OWNER]},
        "spec": {"minMember": 4, "queue": "default", "minResources": {"cpu": "4", "memory": "400Mi"}},
    }
    assert (plan.create_pods, plan.create_services) == ([], [])
    assert plan.events == [("Normal", "PyTorchJobCreated", "PyTorchJob pytest is created.")]

    # PodGroup phase empty, then Pending: nothing may be created (Volcano gating).
    assert w.step().is_empty()
    w.admit("Pending")
    assert w.step().is_empty()

    # Inqueue: one headless service per pod slot, first; pods wait for their ports.
    w.advance(1)
    w.admit("Inqueue")
    plan = w.step()
    assert [s["metadata"]["name"] for s in plan.create_services] == PODS
    assert plan.create_pods == []
    assert plan.create_services[0] == {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {
            "name": "pytest-master-0", "namespace": "default",
            "labels": {"training.kubeflow.org/operator-name": "pytorchjob-controller",
                       "training.kubeflow.org/job-name": "pytest",
                       "training.kubeflow.org/replica-type": "master",
                       "training.kubeflow.org/replica-index": "0"},
            "ownerReferences": [OWNER],
        },
        "spec": {"clusterIP": "None",
                 "selector": {"training.kubeflow.org/operator-name": "pytorchjob-controller",
                              "training.kubeflow.org/job-name": "pytest",
                              "training.kubeflow.org/replica-type": "master",
                              "training.kubeflow.org/replica-index": "0"},
                 "ports": [{"name": "pytorchjob-port", "port": 23456}]},
    }
    t1 = format_time(w.now)
    assert plan.status["startTime"] == t1
    assert plan.status["replicaStatuses"] == {"Master": {"selector": SEL_MASTER}, "Worker": {"selector": SEL_WORKER}}

    # Services carry their allocation: the pods, with exact names, labels, env, ownerRefs.
    plan = w.step()
    assert [p["metadata"]["name"] for p in plan.create_pods] == PODS
    assert plan.status is None and plan.events == []
    master = plan.create_pods[0]
    assert master == {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "pytest-master-0", "namespace": "default",
            "labels": {"training.kubeflow.org/operator-name": "pytorchjob-controller",
                       "training.kubeflow.org/job-name": "pytest",
                       "training.kubeflow.org/replica-type": "master",
                       "training.kubeflow.org/replica-index": "0",
                       "training.kubeflow.org/job-role": "master"},
            "annotations": {"scheduling.k8s.io/group-name": "pytest", "volcano.sh/task-spec": "master"},
            "ownerReferences": [OWNER],
        },
        "spec": {
            "containers": [{
                "name": "pytorch", "image": "busybox:1.37.0-glibc", "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", "trap exit INT TERM; sleep 30s & wait"],
                "resources": {"limits": {"cpu": "1", "memory": "100Mi"}},
                "ports": [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}],
                "env": [{"name": k, "value": v} for k, v in [
                    ("PYTHONUNBUFFERED", "1"), ("MASTER_PORT", "23456"), ("PET_MASTER_PORT", "23456"),
                    ("MASTER_ADDR", "pytest-master-0"), ("PET_MASTER_ADDR", "pytest-master-0"),
                    ("WORLD_SIZE", "4"), ("RANK", "0"), ("PET_NODE_RANK", "0"),
                    ("PET_NPROC_PER_NODE", "auto"), ("PET_NNODES", "4")]],
            }],
            "restartPolicy": "OnFailure",
            "schedulerName": "volcano",
        },
    }
    for i, pod in enumerate(plan.create_pods[1:]):
        assert pod["metadata"]["labels"] == {
            "training.kubeflow.org/operator-name": "pytorchjob-controller",
            "training.kubeflow.org/job-name": "pytest",
            "training.kubeflow.org/replica-type": "worker",
            "training.kubeflow.org/replica-index": str(i)}
        assert pod["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "pytest",
                                                  "volcano.sh/task-spec": "worker"}
        assert pod["metadata"]["ownerReferences"] == [OWNER]
        assert env_of(pod)["RANK"] == env_of(pod)["PET_NODE_RANK"] == str(i + 1)
        assert [c["name"] for c in pod["spec"]["initContainers"]] == ["init-pytorch"]
    # The next round records the pods it sees (docs/SEMANTICS.md S2: one that vanishes later was deleted from outside).
    plan = w.step()
    assert plan.status["podRestarts"] == {n: {"uid": w.pods[n]["metadata"]["uid"]} for n in PODS}
    assert plan.events == [] and "restartCount" not in plan.status
    assert w.step().is_empty()

    # Bound; master creating its container, workers in their init container: nothing to do.
    w.bind_all()
    w.init(*PODS[1:])
    assert w.step().is_empty()

    # The master runs while workers still initialise: Running.
    w.advance(2)
    w.running("pytest-master-0")
    plan = w.step()
    t_run = format_time(w.now)
    assert w.conditions() == [("Created", "True", "PyTorchJobCreated"), ("Running", "True", "PyTorchJobRunning")]
    assert w.status["conditions"][1]["message"] == "PyTorchJob pytest is running."
    assert w.status["conditions"][1]["lastTransitionTime"] == t_run
    assert plan.events == [("Normal", "PyTorchJobRunning", "PyTorchJob pytest is running.")]
    assert w.status["replicaStatuses"]["Master"] == {"active": 1, "selector": SEL_MASTER}
    assert_fixpoint(w)

    # Workers run: counts change, the condition does not (no new event).
    w.running(*PODS[1:])
    plan = w.step()
    assert plan.events == [] and plan.status["replicaStatuses"]["Worker"] == {"active": 3, "selector": SEL_WORKER}
    assert_fixpoint(w)

    # The master completes before the workers: Succeeded; PodGroup deleted; pods kept (cleanPodPolicy None).
    w.advance(30)
    w.succeeded("pytest-master-0")
    plan = w.step()
    t_done = format_time(w.now)
    assert w.conditions() == [("Created", "True", "PyTorchJobCreated"), ("Running", "False", "PyTorchJobRunning"),
                              ("Succeeded", "True", "PyTorchJobSucceeded")]
    running = w.status["conditions"][1]
    assert running["lastTransitionTime"] == t_run and running["message"] == "PyTorchJob pytest is running."
    assert w.status["conditions"][2]["message"] == "PyTorchJob pytest is successfully completed."
    assert w.status["completionTime"] == t_done and w.status["startTime"] == t1
    assert plan.podgroup_delete and w.podgroup is None
    assert plan.delete_pods == [] and plan.delete_services == []
    assert sorted(w.pods) == PODS
    assert plan.events == [("Normal", "JobTerminated", "Job has been terminated. Deleting PodGroup"),
                           ("Normal", "PyTorchJobSucceeded", "PyTorchJob pytest is successfully completed.")]
    # Finished: still-active replicas are reported as succeeded (docs/REFERENCE.md §3.3 step 4).
    assert w.status["replicaStatuses"] == {"Master": {"succeeded": 1, "selector": SEL_MASTER},
                                           "Worker": {"succeeded": 3, "selector": SEL_WORKER}}
    assert_fixpoint(w)
    assert w.state() == "Succeeded"


def test_c1_clean_pod_policy_all_deletes_every_pod_and_service_on_success():
    # docs/REFERENCE.md C1 (seed 003): cleanPodPolicy All, master completes -> running workers deleted, master too.
    w = started(pytorch_job(cleanPodPolicy="All"))
    w.running(*PODS)
    w.step()
    w.succeeded("pytest-master-0")
    plan = w.step()
    assert plan.delete_pods == PODS and plan.delete_services == PODS
    assert plan.podgroup_delete
    assert w.services == {}
    assert sorted(n for n, p in w.pods.items() if p["metadata"].get("deletionTimestamp")) == PODS[1:]
    assert_fixpoint(w)
    w.finish_deletions()
    assert w.pods == {}
    assert_fixpoint(w)


def test_clean_pod_policy_running_deletes_running_and_pending_pods_only():
    w = started(pytorch_job(cleanPodPolicy="Running"))
    w.running("pytest-master-0", "pytest-worker-0")
    w.succeeded("pytest-worker-1")  # worker-2 stays Pending
    w.step()
    w.succeeded("pytest-master-0")
    plan = w.step()
    assert plan.delete_pods == ["pytest-worker-0", "pytest-worker-2"]
    assert plan.delete_services == ["pytest-worker-0", "pytest-worker-2"]
    assert_fixpoint(w)


# ------------------------------------------------------------------------ gating (docs/SEMANTICS.md S8)


def test_no_service_or_pod_while_podgroup_is_not_admitted():
    w = World(pytorch_job())
    w.step()
    for phase in ("", "Pending"):
        w.admit(phase)
        plan = w.step()
        assert plan.is_empty(), phase
    assert w.pods == {} and w.services == {}
    for phase in ("Inqueue", "Running"):
        w2 = copy.deepcopy(w)
        w2.admit(phase)
        assert len(w2.step().create_services) == 4, phase


def test_pods_wait_until_every_service_carries_its_host_ports():
    w = World(pytorch_job())
    w.step()
    w.admit()
    w.step()
    del w.services["pytest-worker-2"]["metadata"]["annotations"][ANNOTATION_HOST_PORTS]
    assert w.step().is_empty()  # the PyTorch env needs the master's port; TF needs every port
    w.services["pytest-worker-2"]["metadata"]["annotations"][ANNOTATION_HOST_PORTS] = json.dumps(
        {"pytorchjob-port": 23460})
    assert len(w.step().create_pods) == 4


def test_kubernetes_mode_needs_services_but_not_their_annotations():
    opts = ReconcileOptions(local_runtime=False)
    w = World(pytorch_job(), options=opts)
    w.step()
    w.admit()
    plan = w.step()
    assert len(plan.create_services) == 4 and plan.create_pods == []
    assert all("annotations" not in s["metadata"] for s in w.services.values())
    plan = w.step()
    assert env_of(plan.create_pods[0])["MASTER_ADDR"] == "pytest-master-0"
    assert plan.create_pods[1]["spec"]["initContainers"][0]["command"][:2] == ["sh", "-c"]


def test_without_gang_scheduling_no_podgroup_and_no_pod_decoration():
    opts = ReconcileOptions(gang_scheduler=None)
    w = World(pytorch_job(), options=opts)
    plan = w.step()
    assert plan.podgroup_create is None and len(plan.create_services) == 4
    plan = w.step()
    pod = plan.create_pods[0]
    assert "schedulerName" not in pod["spec"] and "annotations" not in pod["metadata"]
    assert_fixpoint(w)


def test_template_scheduler_name_is_kept_with_a_warning():
    job = pytorch_job()
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["schedulerName"] = "default-scheduler"
    w = started(job)
    pods = {n: p for n, p in w.pods.items()}
    assert pods["pytest-master-0"]["spec"]["schedulerName"] == "default-scheduler"
    assert pods["pytest-worker-0"]["spec"]["schedulerName"] == "volcano"
    assert ("Warning", "SetPodTemplateSchedulerName",
            "Another scheduler is specified when gang-scheduling is enabled and it will not be overwritten") in w.events


def test_template_restart_policy_is_overwritten_with_a_warning():
    job = pytorch_job(policy="ExitCode")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["restartPolicy"] = "Always"
    w = started(job)
    assert {p["spec"]["restartPolicy"] for p in w.pods.values()} == {"Never"}  # ExitCode -> Never
    warnings = [e for e in w.events if e[1] == "SetPodTemplateRestartPolicy"]
    assert warnings == [("Warning", "SetPodTemplateRestartPolicy",
                         "Restart policy in pod template will be overwritten by restart policy in replica spec")]


# --------------------------------------------------------------------- PodGroup sync (docs/SEMANTICS.md S11)


def test_podgroup_is_not_rewritten_when_its_spec_is_unchanged():
    # docs/SEMANTICS.md S11: the original updates the PodGroup on every reconcile (status churn).
    w = started()
    w.podgroup["spec"]["minResources"] = {"cpu": "4000m", "memory": "419430400"}  # same quantities
    w.podgroup["metadata"]["resourceVersion"] = "7"
    assert w.reconcile().podgroup_update is None


def test_podgroup_is_updated_when_the_job_changes_and_keeps_an_existing_queue():
    w = started()
    w.podgroup["spec"]["queue"] = "research"
    w.job["spec"]["runPolicy"]["schedulingPolicy"] = {"minAvailable": 2, "queue": "ignored"}
    upd = w.reconcile().podgroup_update
    assert upd["spec"] == {"minMember": 2, "queue": "research", "minResources": {"cpu": "2", "memory": "200Mi"}}
    assert upd["metadata"]["uid"] == w.podgroup["metadata"]["uid"]
    assert upd["status"] == w.podgroup["status"]


# ------------------------------------------------------------------ slots, order, docs/SEMANTICS.md S11


def test_replicas_zero_creates_nothing_and_does_not_loop():
    # docs/SEMANTICS.md S11 / kubeflow#1709: the original creates and deletes worker-0 forever.
    w = started(pytorch_job(workers=0))
    assert sorted(w.pods) == ["pytest-master-0"] and sorted(w.services) == ["pytest-master-0"]
    assert_fixpoint(w)


def test_scale_down_deletes_out_of_range_pods_and_services():
    w = started()
    w.running(*PODS)
    w.step()
    w.job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
    plan = w.step()
    assert plan.delete_pods == ["pytest-worker-1", "pytest-worker-2"]
    assert plan.delete_services == ["pytest-worker-1", "pytest-worker-2"]
    assert w.status["replicaStatuses"]["Worker"]["active"] == 1
    assert_fixpoint(w)


def test_replica_types_are_walked_in_a_fixed_order_whatever_the_spec_key_order():
    job = pytorch_job()
    specs = job["spec"]["pytorchReplicaSpecs"]
    job["spec"]["pytorchReplicaSpecs"] = {"Worker": specs["Worker"], "Master": specs["Master"]}
    w = started(job)
    order = [p["metadata"]["name"] for plan in w.plans for p in plan.create_pods]
    assert order == PODS
    tf = started(tf_job(extra={"Evaluator": 1, "Chief": 1}))
    order = [p["metadata"]["name"] for plan in tf.plans for p in plan.create_pods]
    assert order == ["tftest-chief-0", "tftest-evaluator-0", "tftest-ps-0",
                     "tftest-worker-0", "tftest-worker-1", "tftest-worker-2"]


def test_lowercase_replica_keys_are_understood():
    job = pytorch_job()
    specs = job["spec"]["pytorchReplicaSpecs"]
    job["spec"]["pytorchReplicaSpecs"] = {"master": specs["Master"], "worker": specs["Worker"]}
    w = started(job)
    assert sorted(w.pods) == PODS
    assert w.pods["pytest-master-0"]["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"


# ---------------------------------------------------------------------- other run policies


def test_ttl_deletes_the_job_after_completion_and_asks_to_be_called_then():
    w = started(pytorch_job(ttlSecondsAfterFinished=60))
    w.succeeded("pytest-master-0")
    plan = w.step()
    assert plan.requeue_after == 60 and not plan.delete_job
    w.advance(59)
    assert w.step().requeue_after == pytest.approx(1)
    w.advance(1)
    assert w.step().delete_job


def test_suspend_deletes_everything_and_resume_restarts_the_clock():
    w = started()
    w.running(*PODS)
    w.step()
    w.job["spec"]["runPolicy"]["suspend"] = True
    w.advance(5)
    plan = w.step()
    assert plan.delete_pods == PODS and plan.delete_services == PODS and plan.podgroup_delete
    assert w.conditions()[-2:] == [("Running", "False", "PyTorchJobSuspended"),
                                   ("Suspended", "True", "PyTorchJobSuspended")]
    assert ("Normal", "PyTorchJobSuspended", "PyTorchJob pytest is suspended.") in plan.events
    assert "active" not in w.status["replicaStatuses"]["Master"]
    w.finish_deletions()
    assert_fixpoint(w)
    w.job["spec"]["runPolicy"]["suspend"] = False
    w.advance(5)
    plan = w.step()
    assert w.conditions()[-1] == ("Suspended", "False", "PyTorchJobResumed")
    assert w.status["startTime"] == format_time(w.now)
    assert plan.podgroup_create is not None
    assert ("Normal", "PyTorchJobResumed", "PyTorchJob pytest is resumed.") in plan.events


def test_job_managed_by_another_controller_is_left_alone():
    job = pytorch_job(managedBy="kueue.x-k8s.io/multikueue")
    assert reconcile(job, [], [], None, NOW, PYTORCH).is_empty()


def test_created_condition_is_added_once():
    w = World(pytorch_job())
    w.step()
    w.step()
    assert [c[0] for c in w.conditions()] == ["Created"]


# ------------------------------------------------------------------------- robustness


GARBAGE_PODS = [
    {"metadata": {"name": "pytest-worker-x", "labels": {"training.kubeflow.org/replica-type": "worker",
                                                        "training.kubeflow.org/replica-index": "x"}}},
    {"metadata": {"name": "pytest-worker-neg", "labels": {"training.kubeflow.org/replica-type": "worker",
                                                          "training.kubeflow.org/replica-index": "-1"}}},
    {"metadata": {"name": "pytest-nolabels"}, "status": "weird"},
    {"metadata": {"name": "pytest-master-0", "labels": {"training.kubeflow.org/replica-type": "master",
                                                        "training.kubeflow.org/replica-index": "0"}},
     "status": {"phase": "Running", "containerStatuses": ["nope", {"name": 3, "restartCount": "many"}]}},
    "not a dict",
    {"metadata": None},
]


@pytest.mark.parametrize("mutate", [
    lambda j: j["spec"].__setitem__("pytorchReplicaSpecs", None),
    lambda j: j["spec"]["pytorchReplicaSpecs"]["Worker"].__setitem__("replicas", "three"),
    lambda j: j["spec"]["pytorchReplicaSpecs"]["Worker"].__setitem__("template", []),
    lambda j: j["spec"]["pytorchReplicaSpecs"].__setitem__(7, {"replicas": 1}),
    lambda j: j["spec"].__setitem__("runPolicy", "x"),
    lambda j: j["spec"]["runPolicy"].__setitem__("activeDeadlineSeconds", "soon"),
    lambda j: j.__setitem__("status", {"conditions": "x", "replicaStatuses": [1], "startTime": "yesterday"}),
    lambda j: j["spec"].__setitem__("elasticPolicy", {"rdzvConf": [], "minReplicas": "a"}),
    lambda j: j["metadata"].pop("uid"),
])
def test_odd_input_never_raises(mutate):
    job = pytorch_job()
    mutate(job)
    pg = {"metadata": {"name": "pytest"}, "spec": None, "status": {"phase": "Running"}}
    services = [{"metadata": {"name": "pytest-master-0", "annotations": {ANNOTATION_HOST_PORTS: "{bad json"},
                              "labels": {"training.kubeflow.org/replica-type": "master",
                                         "training.kubeflow.org/replica-index": "0"}}}]
    plan = reconcile(job, GARBAGE_PODS, services, pg, NOW, PYTORCH, ReconcileOptions())
    assert isinstance(plan, Plan)


def test_two_pods_claiming_one_slot_are_left_alone_and_not_counted():
    w = started()
    w.running(*PODS)
    w.step()
    dup = copy.deepcopy(w.pods["pytest-worker-0"])
    dup["metadata"]["name"] = "pytest-worker-0-copy"
    w.pods["pytest-worker-0-copy"] = dup
    w.failed("pytest-worker-0-copy", exit_code=None)
    plan = w.step()
    assert plan.delete_pods == [] and plan.create_pods == []
    assert w.status["replicaStatuses"]["Worker"]["active"] == 2
    assert "restartCount" not in w.status


def test_pods_with_a_garbage_index_are_ignored_not_counted():
    w = started()
    w.pods["pytest-worker-x"] = copy.deepcopy(GARBAGE_PODS[0])
    plan = w.reconcile()
    assert "pytest-worker-x" not in plan.delete_pods and plan.create_pods == []


# ------------------------------------------------------------------------- idempotence


def test_idempotence_over_a_whole_run_of_each_kind():
    # After every state change of P1 and T1 the reconciler reaches a fixpoint in a
    # few steps, and a reconcile at the fixpoint plans nothing at all.
    for job, first, rest in ((pytorch_job(), "pytest-master-0", PODS[1:]),
                             (tf_job(), "tftest-worker-0", ["tftest-ps-0", "tftest-worker-1", "tftest-worker-2"])):
        w = World(job)
        assert_fixpoint(w)
        w.admit()
        assert_fixpoint(w)
        w.bind_all()
        w.init(*rest)
        assert_fixpoint(w)
        w.running(first)
        assert_fixpoint(w)
        w.running(*rest)
        assert_fixpoint(w)
        w.advance(30)
        w.succeeded(first)
        assert_fixpoint(w)
        assert w.state() == "Succeeded"
        w.succeeded(*rest)
        assert_fixpoint(w)
