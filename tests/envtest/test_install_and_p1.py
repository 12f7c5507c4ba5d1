"""Against a real kube-apiserver (envtest): `phalanx install` applies with kubectl (client-side
validation on), the CRDs become Established and the ServiceAccounts get tokens; then `phalanx
operator` and `phalanx scheduler`, running with those tokens, drive the seed P1 PyTorchJob to
Succeeded on fake Nodes whose pod statuses are written by hand, and the pods and Services are the
original's (k8s-golden 45)."""
from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.objects.errors import ApiError, Forbidden, Invalid
from tests.e2e.test_split_deployment import recording, remove_job
from tests.envtest.phalanx_procs import INSTALL, NAMESPACE, phalanx, sa_token
from tests.scenarios.conftest import load_example, wait_until
from tests.scenarios.test_failures import get, wait_job

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

PT_PODS = ["pytest-master-0", "pytest-worker-0", "pytest-worker-1", "pytest-worker-2"]
CRDS = ["pytorchjobs.kubeflow.org", "tfjobs.kubeflow.org", "xgboostjobs.kubeflow.org", "paddlejobs.kubeflow.org",
        "jaxjobs.kubeflow.org", "mpijobs.kubeflow.org", "podgroups.scheduling.volcano.sh",
        "queues.scheduling.volcano.sh"]

# k8s-golden 45: pytest-worker-0 as training-operator v1.9 creates it and kube-apiserver stores it
# (server defaults included: ports' protocol, requests copied from limits, terminationMessage*, the
# pod-level fields below); uid and the ServiceAccount volume's random name left out. The golden's
# annotations lack `volcano.sh/task-spec`, which the original's VolcanoControl.DecoratePodTemplateSpec
# sets (to the lower-case replica type): the original is followed here.
GOLDEN_WORKER_0 = {
    "labels": {"training.kubeflow.org/job-name": "pytest", "training.kubeflow.org/operator-name": "pytorchjob-controller",
               "training.kubeflow.org/replica-index": "0", "training.kubeflow.org/replica-type": "worker"},
    "annotations": {"scheduling.k8s.io/group-name": "pytest", "volcano.sh/task-spec": "worker"},
    "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "pytest", "controller": True,
                         "blockOwnerDeletion": True}],
    "spec": {
        "restartPolicy": "OnFailure", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default", "serviceAccount": "default", "securityContext": {},
        "schedulerName": "volcano",
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300},
                        {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
                         "tolerationSeconds": 300}],
        "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority"},
    "containers": [{
        "name": "pytorch", "image": "busybox:1.37.0-glibc", "command": ["sh", "-c", "trap exit INT TERM; sleep 30s & wait"],
        "env": [{"name": "PYTHONUNBUFFERED", "value": "1"}, {"name": "MASTER_PORT", "value": "23456"},
                {"name": "PET_MASTER_PORT", "value": "23456"}, {"name": "MASTER_ADDR", "value": "pytest-master-0"},
                {"name": "PET_MASTER_ADDR", "value": "pytest-master-0"}, {"name": "WORLD_SIZE", "value": "4"},
                {"name": "RANK", "value": "1"}, {"name": "PET_NODE_RANK", "value": "1"},
                {"name": "PET_NPROC_PER_NODE", "value": "auto"}, {"name": "PET_NNODES", "value": "4"}],
        "ports": [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}],
        "resources": {"limits": {"cpu": "1", "memory": "100Mi"}, "requests": {"cpu": "1", "memory": "100Mi"}},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent"}],
    "initContainers": [{
        "name": "init-pytorch", "image": "alpine:3.10",
        "command": ["sh", "-c", "err=1;for i in $(seq 100); do if nslookup pytest-master-0; then err=0 && break; fi;"
                    "echo waiting for master; sleep 2; done; exit $err"],
        "resources": {"limits": {"cpu": "100m", "memory": "20Mi"}, "requests": {"cpu": "50m", "memory": "10Mi"}},
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
        "imagePullPolicy": "IfNotPresent"}],
}


def pod_shape(pod: dict) -> dict:
    """The golden's fields of a stored pod (the ServiceAccount volume mounts left out)."""
    meta, spec = pod["metadata"], pod["spec"]
    return {"labels": meta.get("labels"), "annotations": meta.get("annotations"),
            "ownerReferences": [{k: v for k, v in r.items() if k != "uid"} for r in meta["ownerReferences"]],
            "spec": {k: spec.get(k) for k in GOLDEN_WORKER_0["spec"]},
            "containers": [{k: v for k, v in c.items() if k != "volumeMounts"} for c in spec["containers"]],
            "initContainers": [{k: v for k, v in c.items() if k != "volumeMounts"}
                               for c in spec.get("initContainers") or []]}


P4_BY_RULE = ('PyTorchJob.kubeflow.org "p4" is invalid: spec.pytorchReplicaSpecs: Invalid value: '
              'spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1')
P4_DENIED = ('admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied the request: '
             'spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1')


def test_install_applies_crds_established_service_accounts_get_tokens(envtest, installed):
    assert installed.returncode == 0, f"{installed.stdout}\n{installed.stderr}"
    lines = installed.stdout.splitlines()
    assert all(line.endswith(" created") for line in lines), lines
    for crd in CRDS:
        assert f"customresourcedefinition.apiextensions.k8s.io/{crd} created" in lines
    assert "serviceaccount/phalanx-operator created" in lines and "serviceaccount/phalanx-scheduler created" in lines
    envtest.kubectl("wait", "--for=condition=Established", "--timeout=30s", *(f"crd/{c}" for c in CRDS))
    # Applying the same output again changes nothing.
    again = envtest.kubectl("apply", "-f", "-", input=phalanx(*INSTALL).stdout)
    assert all(line.endswith(" unchanged") for line in again.stdout.splitlines()), again.stdout

    for sa in ("phalanx-operator", "phalanx-scheduler"):
        token = sa_token(envtest, sa)
        kubeconfig = envtest.write_kubeconfig(envtest.root / f"{sa}.kubeconfig", sa, token)
        who = envtest.kubectl_json("auth", "whoami", kubeconfig=kubeconfig)
        assert who["status"]["userInfo"]["username"] == f"system:serviceaccount:{NAMESPACE}:{sa}"

        def can(verb: str, resource: str, kubeconfig: Path = kubeconfig) -> bool:
            resource, _, sub = resource.partition("/")
            r = envtest.kubectl("auth", "can-i", verb, resource, *([f"--subresource={sub}"] if sub else []),
                                "-n", "default", kubeconfig=kubeconfig, check=False)
            return r.stdout.strip() == "yes"

        needed = {"phalanx-operator": [("create", "pods"), ("create", "services"),
                                       ("create", "podgroups.scheduling.volcano.sh"),
                                       ("update", "pytorchjobs.kubeflow.org/status")],
                  "phalanx-scheduler": [("create", "pods/binding"), ("update", "podgroups.scheduling.volcano.sh"),
                                        ("list", "nodes")]}[sa]
        assert [(v, r) for v, r in needed if not can(v, r)] == []
        # Least privilege: neither may grant itself more, nor change Nodes or Namespaces.
        assert [(v, r) for v, r in (("create", "clusterrolebindings"), ("escalate", "clusterroles"),
                                    ("delete", "nodes"), ("delete", "namespaces")) if can(v, r)] == []


async def test_p1_on_fake_nodes_succeeds_pods_and_services_are_the_originals(envtest, controllers, admin, kubelet):
    try:
        async with recording(admin) as rec:
            created = await admin.create(load_example("pytorchjob.yaml")[0])
            uid = created["metadata"]["uid"]
            pg = await wait_until(lambda: get(admin, "PodGroup", "pytest"), 20, "PodGroup created")
            assert (pg["spec"]["minMember"], pg["spec"].get("queue")) == (4, "default")

            async def all_running():
                pods = [p for p in (await admin.list("Pod", "default")).items if p["metadata"]["name"] in PT_PODS]
                return len(pods) == 4 and all((p.get("status") or {}).get("phase") == "Running" for p in pods)

            await wait_until(all_running, 30, "every pod bound and Running")
            await wait_job(admin, rec, "PyTorchJob", "pytest", "Running", 20)
            for name in PT_PODS:
                await kubelet.finish(name, 0)
            job = await wait_job(admin, rec, "PyTorchJob", "pytest", "Succeeded", 20)
            await wait_until(lambda: rec.states("PodGroup", "pytest")[-1:] == ["<deleted>"], 20, "PodGroup deleted")
            # the job succeeds with the master: the recorder's watch may show a worker's completion later
            await wait_until(lambda: all(rec.states("Pod", n)[-1:] == ["Completed"] for n in PT_PODS), 20,
                             "every pod seen Completed")
        assert kubelet.errors == []
        assert rec.states("PyTorchJob", "pytest") == ["", "Created", "Running", "Succeeded"]
        assert job["status"]["conditions"][-1]["message"] == "PyTorchJob pytest is successfully completed."
        assert {k: v.get("succeeded") for k, v in job["status"]["replicaStatuses"].items()} == {"Master": 1,
                                                                                               "Worker": 3}
        assert all(rec.states("Pod", n)[-1] == "Completed" for n in PT_PODS), {n: rec.states("Pod", n)
                                                                              for n in PT_PODS}

        pods = {p["metadata"]["name"]: p for p in (await admin.list("Pod", "default")).items}
        nodes = {pods[n]["spec"].get("nodeName") for n in PT_PODS}
        assert nodes <= {"node-1", "node-2"} and None not in nodes
        # The pods as the operator created them (first seen), and as they are at the end.
        created_worker = pod_shape(kubelet.first_seen["pytest-worker-0"])
        for key, want in GOLDEN_WORKER_0.items():
            assert created_worker[key] == want, key
        assert pods["pytest-worker-0"]["metadata"]["ownerReferences"][0]["uid"] == uid
        assert GOLDEN_WORKER_0["annotations"].items() <= pods["pytest-worker-0"]["metadata"]["annotations"].items()
        master = pods["pytest-master-0"]["spec"]["containers"][0]
        assert master["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}]
        assert {"name": "PET_NPROC_PER_NODE", "value": "auto"} in master["env"]

        for name in PT_PODS:
            svc = await admin.get("Service", name, "default")
            rtype, index = name.split("-")[1:]
            labels = {**GOLDEN_WORKER_0["labels"], "training.kubeflow.org/replica-index": index,
                      "training.kubeflow.org/replica-type": rtype}
            assert svc["metadata"]["labels"] == labels, name
            assert svc["metadata"]["ownerReferences"][0]["uid"] == uid
            assert svc["spec"]["clusterIP"] == "None" and svc["spec"]["selector"] == labels, name
            assert svc["spec"]["ports"] == [{"name": "pytorchjob-port", "protocol": "TCP", "port": 23456,
                                             "targetPort": 23456}], name
    finally:
        await remove_job(admin, "PyTorchJob", "pytest")


def p4() -> dict:
    job = load_example("pytorchjob.yaml")[0]
    job["metadata"]["name"] = "p4"
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    return job


async def test_p4_is_refused_with_the_originals_message_and_the_defaulter_stores_defaults(envtest, controllers, admin):
    """kube-apiserver checks the CRD's rules (CEL) before it calls validating webhooks, so P4 is
    refused by the rule, in the original's words; the mutating webhook's defaults are stored."""
    last: list[str] = []

    async def webhook_ready() -> bool:  # the rotator has injected the CA and the server listens
        try:
            await admin.create(p4())
        except (Forbidden, Invalid) as e:
            last[:] = [e.message]
            return e.message in (P4_DENIED, P4_BY_RULE)
        except ApiError as e:
            last[:] = [e.message]
            return False  # failed calling webhook: not serving yet
        raise AssertionError("P4 was accepted")

    try:
            await wait_until(webhook_ready, 30, "the webhooks answering and P4 refused")
    except AssertionError as e:
        raise AssertionError(f"{e}; last answer: {last}") from None
    assert await get(admin, "PyTorchJob", "p4") is None
    # The defaulter ran before the validator: a job written without defaults is stored with them.
    job = load_example("pytorchjob.yaml")[0]
    job["metadata"]["name"] = "defaulted"
    del job["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"]
    created = await admin.create(job)
    try:
        assert created["spec"]["pytorchReplicaSpecs"]["Worker"]["restartPolicy"] == "OnFailure"
        assert created["spec"]["runPolicy"]["cleanPodPolicy"] == "None"
    finally:
        await admin.delete("PyTorchJob", "defaulted", "default")


async def test_with_no_operator_and_no_webhooks_the_crds_cel_rules_still_refuse_p4(envtest, installed, admin):
    """The operator is down and its webhooks are not registered (a cluster where only the CRDs
    are applied): the schema's x-kubernetes-validations refuse P4 with the original's words."""
    for kind in ("mutatingwebhookconfiguration", "validatingwebhookconfiguration"):
        envtest.kubectl("delete", kind, "--all")
    try:
        with pytest.raises(Invalid) as e:
            await admin.create(p4())
        assert "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1" in e.value.message, e.value.message
        assert await get(admin, "PyTorchJob", "p4") is None
        # A good job is still accepted by the rules.
        ok = load_example("pytorchjob.yaml")[0]
        ok["metadata"]["name"] = "cel-ok"
        await admin.create(ok)
        await admin.delete("PyTorchJob", "cel-ok", "default")
    finally:  # the webhooks registered again for the tests after this one
        envtest.kubectl("apply", "-f", "-", input=phalanx(*INSTALL).stdout)
