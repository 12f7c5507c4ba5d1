"""`phalanx install`: CRDs generated from the models are structural and accept
every seed manifest (and refuse typos and wrong types, as an apiserver with
these CRDs would); names, scope, printer columns and subresources are the
original CRDs'; the ClusterRoles suffice for the operator and the scheduler to
run the seed job (every API call checked against them) and grant nothing
beyond the listed verbs; `--apply` creates, then updates in place."""
from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from phalanx.api.admission import admit
from phalanx.api.registry import by_kind
from phalanx.client.local import LocalClient
from phalanx.controller.gc import GarbageCollector
from phalanx.controller.job.controller import JobController
from phalanx.controller.job.plan import ReconcileOptions
from phalanx.controller.podgroup.controller import PodGroupController
from phalanx.deploy.apply import apply_objects
from phalanx.deploy.crds import CRD_KINDS, crd
from phalanx.deploy.manifests import InstallOptions, install_objects, to_yaml
from phalanx.deploy.rbac import LEADER_ELECTION_RULES, OPERATOR_RULES, SCHEDULER_RULES
from phalanx.node.agent import AgentConfig, NodeAgent, ensure_node
from phalanx.node.network import LocalNetwork
from phalanx.objects.clock import Clock, FakeClock
from phalanx.objects.errors import AlreadyExists, Forbidden
from phalanx.runtime.events import EventRecorder
from phalanx.runtime.leaderelection import ElectionConfig, LeaderElector
from phalanx.scheduler.scheduler import Scheduler
from phalanx.store.store import Store
from tests.scenarios.conftest import scaled

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

# ----------------------------------------------------------------- structural schemas


def structural_problems(node: Any, path: str = "") -> list[str]:
    """apiextensions' structural-schema rules: a type everywhere (unless int-or-string or
    preserve-unknown-fields), no $ref, no properties together with additionalProperties,
    anyOf only as the int-or-string pattern, metadata a bare object."""
    out: list[str] = []
    if not isinstance(node, dict):
        return [f"{path}: not a schema"]
    if "$ref" in node or "allOf" in node or "oneOf" in node or "not" in node:
        out.append(f"{path}: $ref/allOf/oneOf/not")
    if "type" not in node and not node.get("x-kubernetes-int-or-string") \
            and not node.get("x-kubernetes-preserve-unknown-fields"):
        out.append(f"{path}: no type")
    if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
        out.append(f"{path}: anyOf outside int-or-string")
    if "properties" in node and isinstance(node.get("additionalProperties"), dict):
        out.append(f"{path}: properties and additionalProperties")
    for name, sub in (node.get("properties") or {}).items():
        out += structural_problems(sub, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        out += structural_problems(node["additionalProperties"], f"{path}[*]")
    if isinstance(node.get("items"), dict):
        out += structural_problems(node["items"], f"{path}[]")
    return out


def validate(schema: dict, value: Any, path: str = "") -> list[str]:
    """What the apiserver's CRD validation (with strict field validation) says of ``value``."""
    if value is None:
        return [] if schema.get("nullable") else [f"{path}: null"]
    if schema.get("x-kubernetes-int-or-string"):
        return [] if isinstance(value, (int, str)) and not isinstance(value, bool) else [f"{path}: int-or-string"]
    t = schema.get("type")
    errs: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        errs.append(f"{path}: not one of {schema['enum']}")
    if t == "object":
        if not isinstance(value, dict):
            return [f"{path}: must be object"]
        props = schema.get("properties")
        addl = schema.get("additionalProperties")
        for req in schema.get("required") or []:
            if req not in value:
                errs.append(f"{path}.{req}: Required")
        for k, v in value.items():
            if props and k in props:
                errs += validate(props[k], v, f"{path}.{k}")
            elif isinstance(addl, dict):
                errs += validate(addl, v, f"{path}[{k}]")
            elif not schema.get("x-kubernetes-preserve-unknown-fields") and path != ".metadata":
                errs.append(f'{path}.{k}: unknown field "{k}"')
        return errs
    if t == "array":
        if not isinstance(value, list):
            return [f"{path}: must be array"]
        for i, v in enumerate(value):
            errs += validate(schema.get("items") or {}, v, f"{path}[{i}]")
        return errs
    if t == "string" and not isinstance(value, str):
        errs.append(f"{path}: must be string")
    if t == "integer" and (not isinstance(value, int) or isinstance(value, bool)):
        errs.append(f"{path}: must be integer")
    if t == "number" and (not isinstance(value, (int, float)) or isinstance(value, bool)):
        errs.append(f"{path}: must be number")
    if t == "boolean" and not isinstance(value, bool):
        errs.append(f"{path}: must be boolean")
    return errs


def schema_of(kind: str) -> dict:
    return crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def seed_documents() -> list[dict]:
    files = [*EXAMPLES.glob("*.yaml"), *EXAMPLES.glob("seeds/*.yaml"), *EXAMPLES.glob("*/*.yaml")]
    docs = [d for f in sorted(set(files)) for d in yaml.safe_load_all(f.read_text()) if d]
    return [d for d in docs if d.get("kind") in CRD_KINDS]


def test_crds_are_structural():
    for kind in CRD_KINDS:
        schema = schema_of(kind)
        assert structural_problems(schema) == [], kind
        assert schema["properties"]["metadata"] == {"type": "object"}
        assert "x-kubernetes-group-version-kind" not in str(schema)


def test_every_seed_manifest_is_accepted_by_the_generated_crds():
    docs = seed_documents()
    assert {"PyTorchJob", "TFJob", "Queue"} <= {d["kind"] for d in docs} and len(docs) >= 14
    for d in docs:
        assert validate(schema_of(d["kind"]), d) == [], (d["kind"], d["metadata"]["name"])
        # ... and so is what the API server stores of it (defaults added)
        assert validate(schema_of(d["kind"]), admit(d)) == [], d["metadata"]["name"]


def test_the_generated_crds_refuse_what_the_original_refuses():
    job = yaml.safe_load((EXAMPLES / "pytorchjob.yaml").read_text())
    typo = yaml.safe_load((EXAMPLES / "pytorchjob.yaml").read_text())
    typo["spec"]["pytorchReplicaSpecs"]["Worker"]["replicaz"] = 3
    assert validate(schema_of("PyTorchJob"), typo) == [
        '.spec.pytorchReplicaSpecs[Worker].replicaz: unknown field "replicaz"']
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "three"
    assert validate(schema_of("PyTorchJob"), job) == [".spec.pytorchReplicaSpecs[Worker].replicas: must be integer"]
    job = yaml.safe_load((EXAMPLES / "pytorchjob.yaml").read_text())
    job["spec"]["pytorchReplicaSpecs"]["Master"]["restartPolicy"] = "Sometimes"
    assert validate(schema_of("PyTorchJob"), job)[0].startswith(
        ".spec.pytorchReplicaSpecs[Master].restartPolicy: not one of")
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "x"},
          "spec": {"minMember": 4, "queue": "default", "minResources": {"cpu": "4", "memory": "400Mi"}},
          "status": {"phase": "Running", "running": 4}}
    assert validate(schema_of("PodGroup"), pg) == []


def test_names_scope_columns_and_subresources_are_the_originals():
    assert CRD_KINDS == ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob", "MPIJob", "PodGroup", "Queue")
    pj, tf, pg, q = (crd(k) for k in ("PyTorchJob", "TFJob", "PodGroup", "Queue"))
    assert pj["metadata"]["name"] == "pytorchjobs.kubeflow.org" and pj["spec"]["scope"] == "Namespaced"
    assert pj["spec"]["names"] | {} == {"kind": "PyTorchJob", "listKind": "PyTorchJobList", "plural": "pytorchjobs",
                                        "singular": "pytorchjob", "categories": ["all", "kubeflow"]}
    job_columns = [{"jsonPath": ".status.conditions[-1:].type", "name": "State", "type": "string"},
                   {"jsonPath": ".metadata.creationTimestamp", "name": "Age", "type": "date"}]
    for c in (pj, tf):
        v = c["spec"]["versions"][0]
        assert (v["name"], v["served"], v["storage"]) == ("v1", True, True)
        assert v["additionalPrinterColumns"] == job_columns
    assert pj["spec"]["versions"][0]["subresources"] == {
        "scale": {"labelSelectorPath": ".status.replicaStatuses.Worker.selector",
                  "specReplicasPath": ".spec.pytorchReplicaSpecs.Worker.replicas",
                  "statusReplicasPath": ".status.replicaStatuses.Worker.active"},
        "status": {}}
    assert tf["spec"]["versions"][0]["subresources"] == {"status": {}}
    assert pg["metadata"]["name"] == "podgroups.scheduling.volcano.sh"
    assert pg["spec"]["names"]["shortNames"] == ["pg", "podgroup-v1beta1"]
    assert pg["spec"]["versions"][0]["subresources"] == {}  # Volcano's: no status subresource
    assert pg["spec"]["versions"][0]["additionalPrinterColumns"] == [
        {"jsonPath": ".status.phase", "name": "STATUS", "type": "string"},
        {"jsonPath": ".spec.minMember", "name": "minMember", "type": "integer"},
        {"jsonPath": ".status.running", "name": "RUNNINGS", "type": "integer"},
        {"jsonPath": ".metadata.creationTimestamp", "name": "AGE", "type": "date"},
        {"jsonPath": ".spec.queue", "name": "QUEUE", "type": "string", "priority": 1}]
    assert q["spec"]["scope"] == "Cluster" and q["spec"]["names"]["shortNames"] == ["q", "queue-v1beta1"]
    assert q["spec"]["versions"][0]["subresources"] == {"status": {}}
    assert q["spec"]["versions"][0]["additionalPrinterColumns"] == [
        {"jsonPath": ".spec.parent", "name": "PARENT", "type": "string"}]


# ----------------------------------------------------------------- manifests


def kinds_and_names(objs):
    return [(o["kind"], o["metadata"]["name"]) for o in objs]


def deployment(objs, name):
    return next(o for o in objs if o["kind"] == "Deployment" and o["metadata"]["name"] == name)


def test_metrics_ports_probes_services_and_the_metrics_reader_role():
    objs = install_objects()
    for name, health_port in (("phalanx-operator", 8081), ("phalanx-scheduler", 11251)):
        c = deployment(objs, name)["spec"]["template"]["spec"]["containers"][0]
        assert c["ports"][:2] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"},
                                  {"name": "healthz", "containerPort": health_port, "protocol": "TCP"}]
        assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "healthz"}
        assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "healthz"}
        svc = next(o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == f"{name}-metrics")
        assert svc["metadata"]["namespace"] == "phalanx-system"
        assert svc["metadata"]["labels"]["app.kubernetes.io/component"] == "metrics"
        assert svc["spec"]["selector"] == deployment(objs, name)["spec"]["selector"]["matchLabels"]
        assert svc["spec"]["ports"] == [{"name": "metrics", "port": 8080, "targetPort": "metrics", "protocol": "TCP"}]
    reader = next(o for o in objs if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "phalanx-metrics-reader")
    assert reader["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]


def test_install_objects_in_apply_order_and_the_two_gang_options():
    objs = install_objects(InstallOptions(webhook=None))  # the webhooks' objects: tests/unit/test_install_webhooks.py
    assert kinds_and_names(objs) == [
        ("CustomResourceDefinition", "pytorchjobs.kubeflow.org"), ("CustomResourceDefinition", "tfjobs.kubeflow.org"),
        ("CustomResourceDefinition", "xgboostjobs.kubeflow.org"),
        ("CustomResourceDefinition", "paddlejobs.kubeflow.org"), ("CustomResourceDefinition", "jaxjobs.kubeflow.org"),
        ("CustomResourceDefinition", "mpijobs.kubeflow.org"),
        ("CustomResourceDefinition", "podgroups.scheduling.volcano.sh"),
        ("CustomResourceDefinition", "queues.scheduling.volcano.sh"),
        ("Namespace", "phalanx-system"),
        ("ServiceAccount", "phalanx-operator"), ("ServiceAccount", "phalanx-scheduler"),
        ("ClusterRole", "phalanx-operator"), ("ClusterRoleBinding", "phalanx-operator"),
        ("ClusterRole", "phalanx-scheduler"), ("ClusterRoleBinding", "phalanx-scheduler"),
        ("Role", "phalanx-leader-election"), ("RoleBinding", "phalanx-leader-election"),
        ("ConfigMap", "volcano-scheduler-configmap"),
        ("Deployment", "phalanx-operator"), ("Deployment", "phalanx-scheduler"),
        ("Service", "phalanx-operator-metrics"), ("Service", "phalanx-scheduler-metrics"),
        ("ClusterRole", "phalanx-metrics-reader")]
    op, sch = deployment(objs, "phalanx-operator"), deployment(objs, "phalanx-scheduler")
    assert op["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "phalanx", "operator", "--in-cluster", "--local-runtime=false", "--gang-scheduler-name=volcano",
        "--leader-elect", "--metrics-bind-address=:8080", "--health-probe-bind-address=:8081", "--disable-webhook"]
    assert sch["spec"]["template"]["spec"]["containers"][0]["command"] == [
        "phalanx", "scheduler", "--in-cluster", "--scheduler-name=volcano", "--leader-elect",
        "--scheduler-conf=/volcano.scheduler/volcano-scheduler.conf", "--listen-address=:8080",
        "--healthz-address=:11251"]
    assert op["spec"]["template"]["spec"]["serviceAccountName"] == "phalanx-operator"
    # Two replicas each, one acting (leader election); a rolling update never has none.
    for dep in (op, sch):
        assert dep["spec"]["replicas"] == 2
        assert dep["spec"]["strategy"] == {"type": "RollingUpdate",
                                           "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}}
    role = next(o for o in objs if o["kind"] == "Role" and o["metadata"]["name"] == "phalanx-leader-election")
    binding = next(o for o in objs if o["kind"] == "RoleBinding" and o["metadata"]["name"] == "phalanx-leader-election")
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "phalanx-system"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
         "verbs": ["get", "list", "watch", "create", "update", "patch"]},
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch"]}]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": "phalanx-leader-election"}
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "phalanx-operator", "namespace": "phalanx-system"},
        {"kind": "ServiceAccount", "name": "phalanx-scheduler", "namespace": "phalanx-system"}]
    # Volcano installed: no Volcano CRDs (they are Volcano's), no scheduler.
    volcano = install_objects(InstallOptions(scheduler=False, namespace="kubeflow", image="reg/phalanx:1",
                                             webhook=None))
    assert [n for k, n in kinds_and_names(volcano) if k == "CustomResourceDefinition"] == [
        "pytorchjobs.kubeflow.org", "tfjobs.kubeflow.org", "xgboostjobs.kubeflow.org", "paddlejobs.kubeflow.org",
        "jaxjobs.kubeflow.org", "mpijobs.kubeflow.org"]
    assert ("Deployment", "phalanx-scheduler") not in kinds_and_names(volcano)
    assert ("Service", "phalanx-scheduler-metrics") not in kinds_and_names(volcano)
    vbinding = next(o for o in volcano if o["kind"] == "RoleBinding")
    assert vbinding["subjects"] == [{"kind": "ServiceAccount", "name": "phalanx-operator", "namespace": "kubeflow"}]
    vop = deployment(volcano, "phalanx-operator")
    assert vop["metadata"]["namespace"] == "kubeflow"
    assert vop["spec"]["template"]["spec"]["containers"][0]["image"] == "reg/phalanx:1"
    named = install_objects(InstallOptions(scheduler_name="phalanx", webhook=None))
    assert "--gang-scheduler-name=phalanx" in \
        deployment(named, "phalanx-operator")["spec"]["template"]["spec"]["containers"][0]["command"]
    assert "--scheduler-name=phalanx" in \
        deployment(named, "phalanx-scheduler")["spec"]["template"]["spec"]["containers"][0]["command"]
    for bad, field in ((InstallOptions(namespace="Bad_NS"), "--namespace"), (InstallOptions(image="a b"), "--image"),
                       (InstallOptions(image_pull_policy="Sometimes"), "--image-pull-policy")):
        with pytest.raises(ValueError) as e:
            install_objects(bad)
        assert field in str(e.value)
    # Every object is accepted by the API server's admission, and the YAML stream round-trips.
    for o in objs:
        admit(o)
    assert [d for d in yaml.safe_load_all(to_yaml(objs)) if d] == objs


def test_rbac_rules_are_exactly_the_listed_verbs():
    def grants(rules):
        return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"]
                for v in rule["verbs"]}
    op = grants(OPERATOR_RULES)
    assert not any(v in ("*", "deletecollection", "escalate", "bind", "impersonate") or r == "*"
                   for _, r, v in op | grants(SCHEDULER_RULES))
    assert ("", "nodes", "list") not in op and ("", "secrets", "get") not in op
    assert ("kubeflow.org", "pytorchjobs", "update") not in op  # only through /status
    assert ("", "pods/binding", "create") in grants(SCHEDULER_RULES)
    assert ("", "pods", "create") not in grants(SCHEDULER_RULES)


# ----------------------------------------------------------------- the rules suffice


def _allowed(rules, group: str, resource: str, verb: str) -> bool:
    return any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules)


class Authorizing:
    """A Client that refuses (403) any call its ClusterRole rules do not grant."""

    def __init__(self, client, rules, who: str) -> None:
        self.client, self.rules, self.who = client, rules, who
        self.denied: list[str] = []
        self.used: set[tuple[str, str, str]] = set()

    def _check(self, kind: str, verb: str, sub: str | None = None) -> None:
        rt = by_kind(kind)
        resource = rt.plural + (f"/{sub}" if sub else "")
        self.used.add((rt.group, resource, verb))
        if not _allowed(self.rules, rt.group, resource, verb):
            self.denied.append(f"{verb} {resource}.{rt.group}")
            raise Forbidden(f'{self.who} cannot {verb} resource "{resource}" in API group "{rt.group}"')

    async def get(self, kind, name, namespace=None):
        self._check(kind, "get")
        return await self.client.get(kind, name, namespace)

    async def list(self, kind, namespace=None, label_selector=None, field_selector=None):
        self._check(kind, "list")
        return await self.client.list(kind, namespace, label_selector, field_selector)

    def watch(self, kind, namespace=None, resource_version=None):
        self._check(kind, "watch")
        return self.client.watch(kind, namespace, resource_version)

    async def create(self, obj):
        self._check(obj["kind"], "create")
        return await self.client.create(obj)

    async def update(self, obj):
        self._check(obj["kind"], "update")
        return await self.client.update(obj)

    async def update_status(self, obj):
        self._check(obj["kind"], "update", "status" if by_kind(obj["kind"]).has_status else None)
        return await self.client.update_status(obj)

    async def patch(self, kind, name, namespace, patch, patch_type="merge", subresource=None):
        self._check(kind, "patch", subresource)
        return await self.client.patch(kind, name, namespace, patch, patch_type, subresource)

    async def delete(self, kind, name, namespace=None, grace_period_seconds=None, preconditions_uid=None,
                     propagation_policy=None):
        self._check(kind, "delete")
        return await self.client.delete(kind, name, namespace, grace_period_seconds, preconditions_uid,
                                        propagation_policy)

    async def bind(self, namespace, name, node_name):
        self._check("Pod", "create", "binding")
        return await self.client.bind(namespace, name, node_name)


@pytest.mark.timeout(60)
async def test_the_cluster_roles_suffice_to_run_the_seed_job(tmp_path):
    clock = Clock()
    store = Store(None, clock, admission=admit)
    network = LocalNetwork(tmp_path)
    store.add_admission_plugin(network.admission_plugin)
    raw = LocalClient(store)
    operator = Authorizing(raw, OPERATOR_RULES, "system:serviceaccount:phalanx-system:phalanx-operator")
    scheduler = Authorizing(raw, SCHEDULER_RULES, "system:serviceaccount:phalanx-system:phalanx-scheduler")
    await ensure_node(raw, "las1", {"cpu": "16", "memory": "64Gi", "pods": "110"})
    options = ReconcileOptions(gang_scheduler="volcano", local_runtime=True,
                               resolvable_names=network.nss_wrapper_available(),
                               init_container_command=[sys.executable, "-m", "phalanx.node.initwait"])
    parts = [GarbageCollector(raw), JobController(operator, clock, options), Scheduler(scheduler, clock),
             NodeAgent(raw, clock, "las1", tmp_path, network, AgentConfig(backoff_base=0.2, backoff_cap=2.0))]
    tasks = [asyncio.create_task(p.run()) for p in parts]
    try:
        job = yaml.safe_load((EXAMPLES / "pytorchjob.yaml").read_text())
        await raw.create(scaled(job, 1))
        for _ in range(1500):
            j = await raw.get("PyTorchJob", "pytest", "default")
            conds = (j.get("status") or {}).get("conditions") or []
            if conds and conds[-1]["type"] == "Succeeded" and not (await raw.list("PodGroup", "default")).items:
                break
            await asyncio.sleep(0.02)
        assert conds[-1]["type"] == "Succeeded", conds
    finally:
        for p in parts:
            await (p.stop(kill_pods=True) if isinstance(p, NodeAgent) else p.stop())
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    assert operator.denied == [] and scheduler.denied == []
    # The job's own path went through the rules the installer grants.
    assert ("", "pods/binding", "create") in scheduler.used
    assert ("kubeflow.org", "pytorchjobs/status", "update") in operator.used


@pytest.mark.timeout(30)
async def test_the_scheduler_role_suffices_for_its_podgroup_controller():
    store = Store(None, FakeClock(), admission=admit)
    raw = LocalClient(store)
    scheduler = Authorizing(raw, SCHEDULER_RULES, "system:serviceaccount:phalanx-system:phalanx-scheduler")
    groups = PodGroupController(scheduler, {"volcano"})
    task = asyncio.create_task(groups.run())
    try:
        pod = await raw.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bare", "namespace": "default"},
                                "spec": {"schedulerName": "volcano",
                                         "containers": [{"name": "main", "image": "busybox"}]}})
        for _ in range(500):
            got = await raw.get("Pod", "bare", "default")
            if (got["metadata"].get("annotations") or {}).get("scheduling.k8s.io/group-name"):
                break
            await asyncio.sleep(0.01)
        assert got["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == f"podgroup-{pod['metadata']['uid']}"
    finally:
        await groups.stop()
        await asyncio.wait_for(task, 5)
    assert scheduler.denied == []
    assert {("", "pods", "patch"), ("scheduling.volcano.sh", "podgroups", "create")} <= scheduler.used


@pytest.mark.timeout(30)
async def test_the_leader_election_role_suffices_to_lead_renew_and_release():
    store = Store(None, Clock(), admission=admit)
    raw = LocalClient(store)
    op = Authorizing(raw, LEADER_ELECTION_RULES, "system:serviceaccount:phalanx-system:phalanx-operator")
    elector = LeaderElector(op, "phalanx-system", "lock", "me", ElectionConfig(1.0, 0.5, 0.05), Clock(),
                            recorder=EventRecorder(op, "training-operator"))
    halt = asyncio.Event()
    task = asyncio.create_task(elector.run_while_leading(halt.wait, lambda: _set(halt)))
    try:
        await asyncio.wait_for(elector.leading.wait(), 5)
        first = (await raw.get("Lease", "lock", "phalanx-system"))["spec"]["renewTime"]
        for _ in range(500):  # renewed at least once
            if (await raw.get("Lease", "lock", "phalanx-system"))["spec"]["renewTime"] != first:
                break
            await asyncio.sleep(0.01)
    finally:
        await elector.stop()
        await asyncio.wait_for(task, 5)
    assert (await raw.get("Lease", "lock", "phalanx-system"))["spec"]["holderIdentity"] == ""
    assert op.denied == []
    assert {("coordination.k8s.io", "leases", v) for v in ("get", "create", "update")} <= op.used
    assert ("", "events", "create") in op.used


async def _set(event: asyncio.Event) -> None:
    event.set()


async def test_apply_creates_then_configures():
    store = Store(None, FakeClock(), admission=admit)
    client = LocalClient(store)
    objs = install_objects()
    first = await apply_objects(client, objs)
    assert [v for _, v in first] == ["created"] * len(objs)
    assert first[0][0] == "customresourcedefinition.apiextensions.k8s.io/pytorchjobs.kubeflow.org"
    objs2 = install_objects(InstallOptions(image="reg/phalanx:2"))
    second = await apply_objects(client, objs2)
    # The webhook certificate's Secret is the operator's to fill: kept as it is.
    assert [v for _, v in second] == ["unchanged" if o["kind"] == "Secret" else "configured" for o in objs2]
    dep = await client.get("Deployment", "phalanx-operator", "phalanx-system")
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == "reg/phalanx:2"
    with pytest.raises(AlreadyExists):
        await client.create(objs[0])
