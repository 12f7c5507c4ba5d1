"""Against a real kube-apiserver (envtest): the seed T1 TFJob and P7 PyTorchJob driven by `phalanx
operator` and `phalanx scheduler` on fake Nodes, the KubeletStub writing the pods' statuses (in-place
restarts included); the outcomes are the split e2e tests' (tests/e2e/test_split_deployment.py)."""
from __future__ import annotations

import json

import pytest

from tests.e2e.test_split_deployment import recording, remove_job
from tests.envtest.test_install_and_p1 import GOLDEN_WORKER_0, PT_PODS, pod_shape
from tests.scenarios.conftest import job_state, load_example, scaled, wait_until
from tests.scenarios.test_failures import (
    backoff_message,
    condition,
    get,
    pytorch,
    restarts,
    script,
    wait_job,
    wait_nothing_left,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

TF_PODS = ["tftest-ps-0", "tftest-worker-0", "tftest-worker-1", "tftest-worker-2"]
TF_PORT = {"name": "tfjob-port", "containerPort": 2222, "protocol": "TCP"}
TF_HOSTS = {"ps": ["tftest-ps-0.default.svc:2222"],
            "worker": [f"tftest-worker-{i}.default.svc:2222" for i in range(3)]}


def tf_config(rtype: str, index: int) -> str:
    """TF_CONFIG as the original writes it (Go's json.Marshal: compact, cluster keys sorted)."""
    return json.dumps({"cluster": TF_HOSTS, "task": {"type": rtype, "index": index}, "environment": "cloud"},
                      separators=(",", ":"))


def tf_labels(name: str) -> dict:
    """The labels of a TF replica's Service (its selector too)."""
    rtype, index = name.split("-")[1:]
    return {"training.kubeflow.org/job-name": "tftest", "training.kubeflow.org/operator-name": "tfjob-controller",
            "training.kubeflow.org/replica-index": index, "training.kubeflow.org/replica-type": rtype}


def tf_pod(name: str) -> dict:
    """A TF pod as training-operator v1.9 creates it and kube-apiserver stores it: the P1 pod's
    server defaults (golden 45) with the TFJob's labels (job-role master on worker-0, the master
    role of a TFJob without chief or master), port `tfjob-port` 2222 (set by the defaulter),
    TF_CONFIG the only env, the replica's restartPolicy, no init container."""
    rtype, index = name.split("-")[1:]
    labels = tf_labels(name)
    if name == "tftest-worker-0":
        labels["training.kubeflow.org/job-role"] = "master"
    seed = load_example("tfjob.yaml")[0]["spec"]["tfReplicaSpecs"]["PS" if rtype == "ps" else "Worker"]
    limits = {"cpu": "1", "memory": "100Mi"}
    return {
        "labels": labels,
        "annotations": {"scheduling.k8s.io/group-name": "tftest", "volcano.sh/task-spec": rtype},
        "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "name": "tftest", "controller": True,
                             "blockOwnerDeletion": True}],
        "spec": {**GOLDEN_WORKER_0["spec"], "restartPolicy": seed["restartPolicy"]},
        "containers": [{
            "name": "tensorflow", "image": "busybox:1.37.0-glibc",
            "command": ["sh", "-c", "trap exit INT TERM; sleep 2 & wait"],
            "env": [{"name": "TF_CONFIG", "value": tf_config(rtype, int(index))}],
            "ports": [TF_PORT], "resources": {"limits": limits, "requests": limits},
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent"}],
        "initContainers": [],
    }


async def all_running(admin, names: list[str]) -> bool:
    pods = [p for p in (await admin.list("Pod", "default")).items if p["metadata"]["name"] in names]
    return len(pods) == len(names) and all((p.get("status") or {}).get("phase") == "Running" for p in pods)


async def test_t1_tfjob_on_fake_nodes_succeeds_when_worker_0_completes(envtest, controllers, admin, kubelet):
    try:
        async with recording(admin) as rec:
            created = await admin.create(scaled(load_example("tfjob.yaml")[0], 2))
            uid = created["metadata"]["uid"]
            pg = await wait_until(lambda: get(admin, "PodGroup", "tftest"), 20, "PodGroup created")
            assert (pg["spec"]["minMember"], pg["spec"].get("queue")) == (4, "default")
            await wait_until(lambda: all_running(admin, TF_PODS), 30, "every pod bound and Running")
            await wait_job(admin, rec, "TFJob", "tftest", "Running", 20)

            # Workers 1 and 2 complete: no chief or master, so the job waits for worker-0.
            for name in ("tftest-worker-2", "tftest-worker-1"):
                await kubelet.finish(name, 0)

            async def two_succeeded():
                j = await get(admin, "TFJob", "tftest")
                rs = ((j or {}).get("status") or {}).get("replicaStatuses") or {}
                return j if (rs.get("Worker") or {}).get("succeeded") == 2 else None

            j = await wait_until(two_succeeded, 20, "the operator counting workers 1 and 2 succeeded")
            assert job_state(j) == "Running"
            await kubelet.finish("tftest-worker-0", 0)
            j = await wait_job(admin, rec, "TFJob", "tftest", "Succeeded", 20)
            await wait_until(lambda: rec.states("PodGroup", "tftest")[-1:] == ["<deleted>"], 20, "PodGroup deleted")
        assert kubelet.errors == []
        assert rec.states("TFJob", "tftest") == ["", "Created", "Running", "Succeeded"]
        assert rec.first_time("TFJob", "tftest", "Succeeded") >= rec.first_time("Pod", "tftest-worker-0", "Completed")
        assert j["status"]["conditions"][-1]["message"] == "TFJob default/tftest successfully completed."
        # The original's finished job counts its still active pods (the PS) as succeeded.
        assert {k: (v.get("active", 0), v.get("succeeded")) for k, v in j["status"]["replicaStatuses"].items()} \
            == {"PS": (0, 1), "Worker": (0, 3)}
        assert all(rec.restarts.get(n, 0) == 0 for n in TF_PODS)

        # cleanPodPolicy None: every pod and Service is left, the PS still running.
        pods = {p["metadata"]["name"]: p for p in (await admin.list("Pod", "default")).items}
        assert set(TF_PODS) <= pods.keys()
        assert pods["tftest-ps-0"]["status"]["phase"] == "Running"
        assert {pods[n]["spec"].get("nodeName") for n in TF_PODS} <= {"node-1", "node-2"}
        for name in TF_PODS:
            assert pod_shape(kubelet.first_seen[name]) == tf_pod(name), name
            assert pods[name]["metadata"]["ownerReferences"][0]["uid"] == uid
            svc = await admin.get("Service", name, "default")
            labels = tf_labels(name)
            assert svc["metadata"]["labels"] == labels, name
            assert svc["metadata"]["ownerReferences"][0]["uid"] == uid
            assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["selector"] == labels, name
            assert svc["spec"]["ports"] == [{"name": "tfjob-port", "protocol": "TCP", "port": 2222,
                                             "targetPort": 2222}], name
    finally:
        await remove_job(admin, "TFJob", "tftest")


async def test_p7_master_fails_backoff_limit_3_allows_exactly_3_restarts_in_place(envtest, controllers, admin,
                                                                                  kubelet):
    master = "pytest-master-0"

    async def counted(n: int):
        j = await get(admin, "PyTorchJob", "pytest")
        return j if j is not None and restarts(j) == n and job_state(j) == "Running" else None

    try:
        async with recording(admin) as rec:
            created = await admin.create(pytorch(0.9, master=script("sleep 0.6 & wait && exit 1")))
            await wait_until(lambda: all_running(admin, PT_PODS), 30, "every pod bound and Running")
            await wait_job(admin, rec, "PyTorchJob", "pytest", "Running", 20)
            for name in PT_PODS[1:]:
                await kubelet.finish(name, 0)
            # The kubelet restarts the first failure at once; after that it backs off (10 s, 20 s,
            # ...), and the operator sees each failure while the container waits.
            await kubelet.crash(master, 1)
            await kubelet.restart(master)
            await wait_until(lambda: counted(1), 20, "the first failure counted")
            for n in (2, 3):
                await kubelet.crash(master, 1)
                await wait_until(lambda n=n: counted(n), 20, f"failure {n} counted, a restart granted")
                await kubelet.restart(master)
            await kubelet.crash(master, 1)
            j = await wait_job(admin, rec, "PyTorchJob", "pytest", "Failed", 20)
            await wait_nothing_left(admin, created, 20, recorder=rec)
        assert kubelet.errors == []
        assert rec.states("PyTorchJob", "pytest") == ["", "Created", "Running", "Failed"]
        failed = condition(j, "Failed")
        assert failed["reason"] == "BackoffLimitExceeded" and backoff_message(failed["message"], "pytest"), failed
        assert restarts(j, "Master") == restarts(j) == 4  # 3 granted restarts + the failure that was refused
        assert restarts(j, "Worker") == 0
        # Exactly three in-place restarts of the one master pod; the workers completed meanwhile.
        assert rec.restarts[master] == 3
        assert len(rec.uids[master]) == 1
        runs = [s for s in rec.states("Pod", master) if s in ("Running", "Error", "CrashLoopBackOff")]
        assert runs == ["Running", "Error", "Running", *(["Error", "CrashLoopBackOff", "Running"] * 2),
                        "Error", "CrashLoopBackOff"], rec.states("Pod", master)
        for w in PT_PODS[1:]:
            assert "Completed" in rec.states("Pod", w)
            assert rec.restarts.get(w, 0) == 0
    finally:
        await remove_job(admin, "PyTorchJob", "pytest")
