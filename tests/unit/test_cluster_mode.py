"""Cluster mode (`phalanx operator` against real kubelets): the pods, Services and
PodGroup the operator builds from the seed manifests, field for field as the
original does (docs/REFERENCE.md §4.2, §4.4, §4.5, §5.1, §5.2, §7); the operator's flags;
how it tells Phalanx node agents from kubelets; the namespace-scoped client."""
from __future__ import annotations

import json

import pytest

from phalanx.api.admission import admit
from phalanx.cli.clustermode import (
    INITWAIT_COMMAND,
    is_phalanx_node,
    local_runtime_from_nodes,
    parse_gang_scheduler,
    parse_kinds,
    reconcile_options,
)
from phalanx.client.local import LocalClient
from phalanx.client.scoped import NamespaceScoped
from phalanx.controller.job.core import with_defaults
from phalanx.objects.clock import FakeClock
from phalanx.store.store import Store
from tests.scenarios.conftest import load_example
from tests.unit.test_job_world import World

UID = "dd780d46-45c9-468d-bb1a-f17b6c90e612"
OWNER = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "pytest", "uid": UID,
         "controller": True, "blockOwnerDeletion": True}
CLUSTER = reconcile_options("volcano", local_runtime=False)
NSLOOKUP = ("err=1;for i in $(seq 100); do if nslookup pytest-master-0; then err=0 && break; fi;"
            "echo waiting for master; sleep 2; done; exit $err")


def seed(name: str, uid: str = UID) -> dict:
    """A seed manifest as the API server stores it (admitted: defaults persisted)."""
    job = admit(load_example(name)[0])
    job["metadata"]["uid"] = uid
    job["metadata"]["resourceVersion"] = "1"
    return job


def started(job: dict, options) -> World:
    w = World(job, options=options)
    w.step()
    w.admit()
    w.settle()
    return w


def env(rank: int) -> list[dict]:
    pairs = [("PYTHONUNBUFFERED", "1"), ("MASTER_PORT", "23456"), ("PET_MASTER_PORT", "23456"),
             ("MASTER_ADDR", "pytest-master-0"), ("PET_MASTER_ADDR", "pytest-master-0"), ("WORLD_SIZE", "4"),
             ("RANK", str(rank)), ("PET_NODE_RANK", str(rank)), ("PET_NPROC_PER_NODE", "auto"),
             ("PET_NNODES", "4")]
    return [{"name": k, "value": v} for k, v in pairs]


def pytorch_container(rank: int) -> dict:
    return {
        "image": "busybox:1.37.0-glibc", "imagePullPolicy": "IfNotPresent", "name": "pytorch",
        "command": ["sh", "-c", "trap exit INT TERM; sleep 30s & wait"],
        "resources": {"limits": {"cpu": "1", "memory": "100Mi"}},
        "ports": [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}],
        "env": env(rank),
    }


def labels(rtype: str, index: int, master: bool = False) -> dict:
    out = {"training.kubeflow.org/operator-name": "pytorchjob-controller",
           "training.kubeflow.org/job-name": "pytest",
           "training.kubeflow.org/replica-type": rtype, "training.kubeflow.org/replica-index": str(index)}
    if master:
        out["training.kubeflow.org/job-role"] = "master"
    return out


def posted(w: World) -> dict[str, dict]:
    """The pods exactly as the operator sends them (POST bodies), by name."""
    return {p["metadata"]["name"]: p for plan in w.plans for p in plan.create_pods}


def test_seed_pytorchjob_pods_are_the_originals_field_for_field():
    pods = posted(started(seed("pytorchjob.yaml"), CLUSTER))
    assert sorted(pods) == ["pytest-master-0", "pytest-worker-0", "pytest-worker-1", "pytest-worker-2"]
    master = pods["pytest-master-0"]
    assert master == {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": "pytest-master-0", "namespace": "default", "labels": labels("master", 0, master=True),
            "annotations": {"scheduling.k8s.io/group-name": "pytest", "volcano.sh/task-spec": "master"},
            "ownerReferences": [OWNER],
        },
        "spec": {"containers": [pytorch_container(0)], "restartPolicy": "OnFailure", "schedulerName": "volcano"},
    }
    for i in range(3):
        worker = pods[f"pytest-worker-{i}"]
        assert worker == {
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {
                "name": f"pytest-worker-{i}", "namespace": "default", "labels": labels("worker", i),
                "annotations": {"scheduling.k8s.io/group-name": "pytest", "volcano.sh/task-spec": "worker"},
                "ownerReferences": [OWNER],
            },
            "spec": {
                "containers": [pytorch_container(i + 1)],
                "initContainers": [{
                    "name": "init-pytorch", "image": "alpine:3.10", "imagePullPolicy": "IfNotPresent",
                    "command": ["sh", "-c", NSLOOKUP],
                    "resources": {"limits": {"cpu": "100m", "memory": "20Mi"},
                                  "requests": {"cpu": "50m", "memory": "10Mi"}},
                }],
                "restartPolicy": "OnFailure", "schedulerName": "volcano",
            },
        }, i


def test_a_job_a_plain_apiserver_stored_undefaulted_gets_the_same_pods():
    # A real apiserver stores the manifest as written (no Phalanx admission): the operator
    # applies the kind's defaults in memory, so the pods still carry pytorchjob-port 23456
    # and PET_NPROC_PER_NODE=auto, and the user's stored spec is left as written.
    raw = load_example("pytorchjob.yaml")[0]
    raw["metadata"].update({"uid": UID, "resourceVersion": "1"})
    assert "nprocPerNode" not in raw["spec"]
    stored = json.loads(json.dumps(raw))
    w = started(raw, CLUSTER)
    assert posted(w) == posted(started(seed("pytorchjob.yaml"), CLUSTER))
    assert w.job["spec"] == stored["spec"]


def test_seed_pytorchjob_services_and_podgroup():
    w = started(seed("pytorchjob.yaml"), CLUSTER)
    svc = w.services["pytest-worker-1"]
    sel = {k: v for k, v in labels("worker", 1).items()}
    assert svc["metadata"]["labels"] == sel and svc["metadata"]["ownerReferences"] == [OWNER]
    assert svc["spec"] == {"clusterIP": "None", "selector": sel, "ports": [{"name": "pytorchjob-port", "port": 23456}]}
    assert "annotations" not in svc["metadata"]  # no local-network allocation on a cluster
    assert w.podgroup["spec"] == {"minMember": 4, "queue": "default", "minResources": {"cpu": "4", "memory": "400Mi"}}
    assert w.podgroup["metadata"]["ownerReferences"] == [OWNER]


def test_seed_tfjob_tf_config_uses_cluster_dns_names_and_declared_ports():
    w = started(seed("tfjob.yaml"), CLUSTER)
    cluster = {"ps": ["tftest-ps-0.default.svc:2222"],
               "worker": [f"tftest-worker-{i}.default.svc:2222" for i in range(3)]}
    for name, (rtype, index) in {"tftest-ps-0": ("ps", 0), "tftest-worker-0": ("worker", 0),
                                 "tftest-worker-2": ("worker", 2)}.items():
        pod = w.pods[name]
        c = pod["spec"]["containers"][0]
        tf = [e["value"] for e in c["env"] if e["name"] == "TF_CONFIG"]
        assert json.loads(tf[0]) == {"cluster": cluster, "task": {"type": rtype, "index": index},
                                     "environment": "cloud"}
        assert pod["spec"]["schedulerName"] == "volcano"
        assert "initContainers" not in pod["spec"]
    assert w.pods["tftest-ps-0"]["spec"]["restartPolicy"] == "Always"
    assert w.pods["tftest-worker-0"]["metadata"]["labels"]["training.kubeflow.org/job-role"] == "master"
    domain = started(seed("tfjob.yaml"), reconcile_options("volcano", False, cluster_domain="cluster.local"))
    tf = next(e["value"] for e in domain.pods["tftest-worker-1"]["spec"]["containers"][0]["env"]
              if e["name"] == "TF_CONFIG")
    assert "tftest-ps-0.default.svc.cluster.local:2222" in tf


def test_gang_scheduler_name_rules():
    # docs/REFERENCE.md §4.5/§7: another gang name is used only where the template leaves schedulerName empty.
    job = seed("pytorchjob.yaml")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["schedulerName"] = "default-scheduler"
    w = started(job, reconcile_options("phalanx", local_runtime=False))
    assert w.pods["pytest-master-0"]["spec"]["schedulerName"] == "phalanx"
    assert w.pods["pytest-worker-0"]["spec"]["schedulerName"] == "default-scheduler"
    assert any(e[1] == "SetPodTemplateSchedulerName" for e in w.events)
    # No gang scheduling: no PodGroup, no gang annotations, the template's scheduler untouched.
    w = World(seed("pytorchjob.yaml"), options=reconcile_options(None, local_runtime=False))
    w.settle()
    assert w.podgroup is None and len(w.pods) == 4
    assert all("schedulerName" not in p["spec"] and "annotations" not in p["metadata"] for p in w.pods.values())


def test_local_runtime_options_match_the_embedded_control_plane():
    opts = reconcile_options("volcano", local_runtime=True, default_backoff_limit=2)
    assert opts.local_runtime and opts.init_container_command == INITWAIT_COMMAND
    assert opts.default_backoff_limit == 2 and opts.gang_scheduler == "volcano"
    assert not CLUSTER.local_runtime and CLUSTER.init_container_command is None


def node(runtime: str | None) -> dict:
    info = {"containerRuntimeVersion": runtime} if runtime is not None else {}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}, "status": {"nodeInfo": info}}


def test_phalanx_nodes_are_told_from_kubelets():
    assert is_phalanx_node(node("phalanx://0.1.0"))
    assert not is_phalanx_node(node("containerd://1.7.2")) and not is_phalanx_node(node(None))
    assert not is_phalanx_node({"status": "garbage"})
    assert local_runtime_from_nodes([node("phalanx://0.1.0"), node("phalanx://0.1.0")])
    assert not local_runtime_from_nodes([node("phalanx://0.1.0"), node("containerd://1.7.2")])
    assert not local_runtime_from_nodes([])


def test_flag_parsing():
    assert parse_gang_scheduler("volcano") == "volcano"
    assert parse_gang_scheduler("") is None and parse_gang_scheduler("None") is None
    assert parse_kinds(None) == ["PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob"]
    assert parse_kinds(["tfjob", "PyTorchJobs"]) == ["TFJob", "PyTorchJob"]
    assert parse_kinds(["pytorchjob,tfjob"]) == ["PyTorchJob", "TFJob"]
    assert parse_kinds(["mpijob,XGBoostJobs", "paddlejob", "jaxjobs", "mpijobs"]) == [
        "MPIJob", "XGBoostJob", "PaddleJob", "JAXJob"]
    with pytest.raises(ValueError) as e:
        parse_kinds(["mxjob"])
    assert str(e.value) == ('--enable-scheme: unsupported value "mxjob": supported values: "pytorchjob", "tfjob", '
                            '"xgboostjob", "paddlejob", "jaxjob", "mpijob"')


async def test_namespace_scoped_client_lists_and_watches_one_namespace():
    store = Store(None, FakeClock(), admission=admit)
    base = LocalClient(store)
    await base.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    for ns in ("default", "team"):
        await base.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": ns},
                           "spec": {"containers": [{"name": "c", "image": "i"}]}})
    scoped = NamespaceScoped(base, "team")
    assert [(p["metadata"]["namespace"]) for p in (await scoped.list("Pod")).items] == ["team"]
    assert len((await scoped.list("Namespace")).items) == 1  # cluster-scoped kinds pass through
    stream = scoped.watch("Pod")
    first = await stream.__anext__()
    assert first.object["metadata"]["namespace"] == "team"
    await stream.aclose()
    assert (await scoped.get("Pod", "p", "default"))["metadata"]["namespace"] == "default"  # reads pass through


class _Nodes:
    """A client whose Node list fails ``failures`` times with ``code``, then answers."""

    def __init__(self, failures: int, code: int, nodes: list[dict]) -> None:
        self.failures, self.code, self.nodes, self.calls = failures, code, nodes, 0

    async def list(self, kind, namespace=None, label_selector=None, field_selector=None):
        from phalanx.client.interface import ObjectList
        from phalanx.objects.errors import ApiError
        self.calls += 1
        if self.calls <= self.failures:
            err = ApiError("boom")
            err.code = self.code
            raise err
        return ObjectList(self.nodes, "1")


async def test_local_runtime_detection_waits_for_the_server_and_falls_back_on_refusal():
    from phalanx.cli.clustermode import detect_local_runtime
    flaky = _Nodes(2, 503, [node("phalanx://0.1.0")])
    assert await detect_local_runtime(flaky, retry_cap=0.01) is True and flaky.calls == 3
    refused = _Nodes(1, 403, [node("phalanx://0.1.0")])
    assert await detect_local_runtime(refused) is False and refused.calls == 1
    assert await detect_local_runtime(_Nodes(0, 0, [node("containerd://2.0")])) is False


async def test_operator_refuses_to_start_without_the_podgroup_crd():
    from phalanx.cli.clustermode import podgroup_crd_missing
    from phalanx.objects.errors import NotFound

    class NoCrd:
        async def list(self, kind, namespace=None, label_selector=None, field_selector=None):
            raise NotFound("podgroups.scheduling.volcano.sh", "")

    why = await podgroup_crd_missing(NoCrd())
    assert why is not None and "podgroups.scheduling.volcano.sh" in why and "phalanx install" in why
    store = Store(None, FakeClock(), admission=admit)
    assert await podgroup_crd_missing(LocalClient(store)) is None


def test_defaulting_in_memory_never_crashes_on_a_spec_it_cannot_walk():
    bad = {"kind": "PyTorchJob", "metadata": {"name": "x"}, "spec": {"pytorchReplicaSpecs": {"Worker": 3}}}
    assert with_defaults(bad, "PyTorchJob") is bad
    assert with_defaults({"kind": "PyTorchJob", "spec": "nonsense"}, "PyTorchJob")["spec"] == "nonsense"
    good = {"kind": "TFJob", "spec": {"tfReplicaSpecs": {"Worker": {"template": {}}}}}
    out = with_defaults(good, "TFJob")
    assert out["spec"]["tfReplicaSpecs"]["Worker"]["replicas"] == 1 and "replicas" not in good["spec"]["tfReplicaSpecs"]["Worker"]
