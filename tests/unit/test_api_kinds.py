"""XGBoostJob, PaddleJob, JAXJob and MPIJob through the API layer: defaults
applied at admission and stored (docs/SEMANTICS.md S1), the original's validation messages as
kubectl prints them (MPIJob's in-controller rules as an admission refusal),
server-side Tables and `phalanx get` columns, OpenAPI and discovery, the job
log route, foreground deletion, describe, and cluster-mode install (CRDs,
RBAC, operator flags)."""
from __future__ import annotations

import asyncio
import copy
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from phalanx.api.admission import WebhookDenied, admit
from phalanx.api.registry import JOB_KINDS, by_kind
from phalanx.cli import clustermode, printers
from phalanx.cli.describe import describe
from phalanx.cli.main import app as cli
from phalanx.client.local import LocalClient
from phalanx.controller.job.controller import JobController
from phalanx.controller.job.plan import ReconcileOptions
from phalanx.deploy.crds import crd
from phalanx.deploy.rbac import OPERATOR_RULES
from phalanx.objects.clock import FakeClock, format_time
from phalanx.objects.errors import Forbidden, Invalid
from phalanx.server import discovery
from phalanx.server.deleteoptions import effective_policy
from phalanx.server.openapi import openapi_document
from phalanx.server.tables import column_definitions, table_for
from phalanx.store.store import Store
from tests.unit.test_install import Authorizing, _allowed, schema_of, structural_problems, validate

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NEW_KINDS = ("XGBoostJob", "PaddleJob", "JAXJob", "MPIJob")
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


def webhook(kind: str) -> str:
    name = "validator.mpijob.phalanx.dev" if kind == "MPIJob" else \
        f"validator.{kind.lower()}.training-operator.kubeflow.org"
    return f'admission webhook "{name}" denied the request: '


def replica(container: str, replicas: int | None = None, **extra: Any) -> dict:
    r: dict[str, Any] = {"template": {"spec": {"containers": [
        {"name": container, "image": "busybox", "command": ["true"]}]}}, **extra}
    if replicas is not None:
        r["replicas"] = replicas
    return r


def xgboostjob(specs: dict | None = None) -> dict:
    specs = specs if specs is not None else {"Master": replica("xgboost", 1), "Worker": replica("xgboost", 2)}
    return {"apiVersion": "kubeflow.org/v1", "kind": "XGBoostJob", "metadata": {"name": "xgb"},
            "spec": {"xgbReplicaSpecs": specs}}


def paddlejob(specs: dict | None = None, **spec: Any) -> dict:
    specs = specs if specs is not None else {"Worker": replica("paddle", 2)}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PaddleJob", "metadata": {"name": "paddle"},
            "spec": {"paddleReplicaSpecs": specs, **spec}}


def jaxjob(specs: dict | None = None) -> dict:
    specs = specs if specs is not None else {"Worker": replica("jax", 2)}
    return {"apiVersion": "kubeflow.org/v1", "kind": "JAXJob", "metadata": {"name": "jax"},
            "spec": {"jaxReplicaSpecs": specs}}


def mpijob(specs: dict | None = None, **spec: Any) -> dict:
    specs = specs if specs is not None else {"Launcher": replica("mpi"), "Worker": replica("mpi", 2)}
    return {"apiVersion": "kubeflow.org/v1", "kind": "MPIJob", "metadata": {"name": "pi"},
            "spec": {"mpiReplicaSpecs": specs, **spec}}


MAKERS = {"XGBoostJob": xgboostjob, "PaddleJob": paddlejob, "JAXJob": jaxjob, "MPIJob": mpijob}
FIELD = {"XGBoostJob": "xgbReplicaSpecs", "PaddleJob": "paddleReplicaSpecs", "JAXJob": "jaxReplicaSpecs",
         "MPIJob": "mpiReplicaSpecs"}


def denied(obj: dict, old: dict | None = None) -> WebhookDenied:
    with pytest.raises(WebhookDenied) as e:
        admit(obj, old)
    assert e.value.code == 403 and e.value.reason == "Forbidden" and isinstance(e.value, Forbidden)
    return e.value


def refusal(obj: dict, old: dict | None = None) -> str:
    """The webhook's message minus its prefix (what follows `denied the request: `)."""
    e = denied(obj, old)
    prefix = webhook(obj["kind"])
    assert e.message.startswith(prefix), e.message
    return e.message[len(prefix):]


def specs_of(out: dict) -> dict:
    return out["spec"][FIELD[out["kind"]]]


# --------------------------------------------------------------------------- defaults (docs/SEMANTICS.md S1)


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_s1_defaults_are_stored_and_admission_is_idempotent(kind):
    job = MAKERS[kind]()
    before = copy.deepcopy(job)
    out = admit(job)
    assert job == before, "admission must not modify its input"
    assert out["spec"]["runPolicy"] == {"cleanPodPolicy": "None", "suspend": False}
    assert admit(out, out) == out and admit(copy.deepcopy(out)) == out


@pytest.mark.parametrize("kind, policy, port", [
    ("XGBoostJob", "Never", {"name": "xgboostjob-port", "containerPort": 9999, "protocol": "TCP"}),
    ("PaddleJob", "OnFailure", {"name": "master", "containerPort": 36543, "protocol": "TCP"}),
    ("JAXJob", "Never", {"name": "jaxjob-port", "containerPort": 6666, "protocol": "TCP"}),
])
def test_replicas_restart_policy_and_port_per_kind(kind, policy, port):
    job = MAKERS[kind]()
    for rs in specs_of(job).values():
        rs.pop("replicas", None)
        rs["template"]["spec"]["containers"].insert(0, {"name": "sidecar", "image": "busybox"})
    out = admit(job)
    for rs in specs_of(out).values():
        assert rs["replicas"] == 1 and rs["restartPolicy"] == policy
        sidecar, main = rs["template"]["spec"]["containers"]
        assert "ports" not in sidecar and main["ports"] == [port]  # the default container, not index 0


def test_replica_keys_are_normalised_and_an_explicit_policy_is_kept():
    job = xgboostjob({"master": replica("xgboost", 1, restartPolicy="OnFailure"), "WORKER": replica("xgboost")})
    out = admit(job)
    assert list(specs_of(out)) == ["Master", "Worker"]
    assert specs_of(out)["Master"]["restartPolicy"] == "OnFailure"
    out = admit(paddlejob({"worker": replica("paddle", 3)}))
    assert list(specs_of(out)) == ["Worker"] and specs_of(out)["Worker"]["replicas"] == 3
    assert list(specs_of(admit(jaxjob({"wOrKeR": replica("jax")})))) == ["Worker"]


def test_port_added_by_name_only_and_user_ports_get_tcp():
    job = jaxjob({"Worker": replica("jax")})
    job["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["ports"] = [
        {"name": "mine", "containerPort": 6666}]
    [c] = admit(job)["spec"]["jaxReplicaSpecs"]["Worker"]["template"]["spec"]["containers"]
    assert c["ports"] == [{"name": "mine", "containerPort": 6666, "protocol": "TCP"},
                          {"name": "jaxjob-port", "containerPort": 6666, "protocol": "TCP"}]


@pytest.mark.parametrize("elastic, expected", [
    ({"minReplicas": 1, "maxReplicas": 4}, (1, 4)),
    ({"minReplicas": 2}, (2, 2)),
    ({"maxReplicas": 5}, (5, 5)),
    ({}, (3, 3)),  # the Worker's replicas
    ({"maxRestarts": 2}, (3, 3)),
])
def test_paddle_elastic_policy_min_max_defaults(elastic, expected):
    out = admit(paddlejob({"Master": replica("paddle", 1), "Worker": replica("paddle", 3)}, elasticPolicy=elastic))
    ep = out["spec"]["elasticPolicy"]
    assert (ep["minReplicas"], ep["maxReplicas"]) == expected
    assert "elasticPolicy" not in admit(paddlejob())["spec"]  # never invented


def test_paddle_elastic_policy_without_a_worker_is_left_unset():
    out = admit(paddlejob({"Master": replica("paddle", 1)}, elasticPolicy={}))
    assert out["spec"]["elasticPolicy"] == {}


def test_mpijob_defaults_launcher_1_worker_0_never_no_port_one_slot():
    job = mpijob({"Launcher": replica("mpi"), "Worker": replica("mpi")})
    out = admit(job)
    launcher, worker = specs_of(out)["Launcher"], specs_of(out)["Worker"]
    assert (launcher["replicas"], worker["replicas"]) == (1, 0)
    assert launcher["restartPolicy"] == worker["restartPolicy"] == "Never"
    for rs in (launcher, worker):
        assert "ports" not in rs["template"]["spec"]["containers"][0]  # MPI creates no services
    assert out["spec"]["slotsPerWorker"] == 1
    assert admit(mpijob(slotsPerWorker=4))["spec"]["slotsPerWorker"] == 4
    assert out["spec"]["cleanPodPolicy"] == out["spec"]["runPolicy"]["cleanPodPolicy"] == "None"
    assert out["spec"]["runPolicy"]["suspend"] is False


@pytest.mark.parametrize("deprecated, run_policy, chosen", [
    (None, None, "None"),
    ("All", None, "All"),
    (None, "Running", "Running"),
    ("All", "Running", "Running"),  # runPolicy wins
])
def test_mpijob_clean_pod_policy_runpolicy_wins_and_is_copied_to_both(deprecated, run_policy, chosen):
    job = mpijob()
    if deprecated:
        job["spec"]["cleanPodPolicy"] = deprecated
    if run_policy:
        job["spec"]["runPolicy"] = {"cleanPodPolicy": run_policy}
    out = admit(job)
    assert out["spec"]["cleanPodPolicy"] == out["spec"]["runPolicy"]["cleanPodPolicy"] == chosen


def test_mpijob_replica_keys_are_not_normalised_as_in_the_original():
    # SetDefaults_MPIJob has no setTypeNameToCamelCase: `launcher` is an unknown type.
    job = mpijob({"launcher": replica("mpi"), "Worker": replica("mpi", 1)})
    assert refusal(job) == ('[spec.mpiReplicaSpecs[launcher]: Unsupported value: "launcher": supported values: '
                            '"Launcher", "Worker", spec.mpiReplicaSpecs[Launcher]: Required value: must be present]')


# --------------------------------------------------------------------------- validation


DNS1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
           "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
           "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_name_must_be_a_dns1035_label(kind):
    job = MAKERS[kind]()
    job["metadata"]["name"] = "1abc"
    assert refusal(job) == f'metadata.name: Invalid value: "1abc": should match: {DNS1035}'


@pytest.mark.parametrize("kind", ("PaddleJob", "JAXJob", "MPIJob"))
def test_empty_replica_specs_are_required(kind):
    assert refusal(MAKERS[kind]({})) == f"spec.{FIELD[kind]}: Required value: must be required"


def test_xgboost_empty_replica_specs_also_miss_the_master():
    assert refusal(xgboostjob({})) == ("[spec.xgbReplicaSpecs: Required value: must be required, "
                                       "spec.xgbReplicaSpecs[Master]: Required value: must be present]")


def test_missing_replica_specs_field_is_the_schemas_required_value():
    job = jaxjob()
    del job["spec"]["jaxReplicaSpecs"]
    with pytest.raises(Invalid) as e:
        admit(job)
    assert not isinstance(e.value, WebhookDenied) and e.value.code == 422
    assert e.value.message == 'JAXJob.kubeflow.org "jax" is invalid: spec.jaxReplicaSpecs: Required value'


def test_xgboost_master_is_required_and_must_be_one():
    assert refusal(xgboostjob({"Worker": replica("xgboost", 2)})) == \
        "spec.xgbReplicaSpecs[Master]: Required value: must be present"
    assert refusal(xgboostjob({"Master": replica("xgboost", 2)})) == \
        "spec.xgbReplicaSpecs[Master].replicas: Forbidden: must be 1"
    # docs/SEMANTICS.md S1: an omitted Master replicas is defaulted to 1 before the rule (the original refuses it).
    assert specs_of(admit(xgboostjob({"Master": replica("xgboost")})))["Master"]["replicas"] == 1


@pytest.mark.parametrize("kind, rtype, supported", [
    ("XGBoostJob", "Launcher", '"Master", "Worker"'),
    ("PaddleJob", "Chief", '"Master", "Worker"'),
    ("JAXJob", "Master", '"Worker"'),
])
def test_unknown_replica_type_is_not_supported(kind, rtype, supported):
    container = {"XGBoostJob": "xgboost", "PaddleJob": "paddle", "JAXJob": "jax"}[kind]
    specs = {rtype: replica(container, 1), "Worker": replica(container, 1)}
    if kind == "XGBoostJob":
        specs["Master"] = replica(container, 1)
    assert refusal(MAKERS[kind](specs)) == (
        f'spec.{FIELD[kind]}[{rtype}]: Unsupported value: "{rtype}": supported values: {supported}')


@pytest.mark.parametrize("kind, container, shown", [
    ("XGBoostJob", "xgboost", "xgboost"),
    ("PaddleJob", "paddle", '"paddle"'),  # the original's Paddle webhook quotes the name (%q)
    ("JAXJob", "jax", "jax"),
])
def test_default_container_name_is_required(kind, container, shown):
    specs = {"Worker": replica("main", 1)}
    if kind == "XGBoostJob":
        specs["Master"] = replica(container, 1)
    assert refusal(MAKERS[kind](specs)) == (f"spec.{FIELD[kind]}[Worker].template.spec.containers: Required value: "
                                            f"must have at least one container with name {shown}")


@pytest.mark.parametrize("kind, container", [("XGBoostJob", "xgboost"), ("PaddleJob", "paddle"), ("JAXJob", "jax")])
def test_containers_and_images_are_required(kind, container):
    def job(containers: list) -> dict:
        specs = {"Worker": {"replicas": 1, "template": {"spec": {"containers": containers}}}}
        if kind == "XGBoostJob":
            specs["Master"] = replica(container, 1)
        return MAKERS[kind](specs)

    path = f"spec.{FIELD[kind]}[Worker].template.spec.containers"
    assert refusal(job([{"name": container}])) == f"{path}[0].image: Required value: must be required"
    assert refusal(job([{"name": container, "image": ""}])) == f"{path}[0].image: Required value: must be required"
    named = f'"{container}"' if kind == "PaddleJob" else container
    assert refusal(job([])) == (f"[{path}: Required value: must be specified, {path}: Required value: must have "
                                f"at least one container with name {named}]")


def test_several_errors_are_listed_in_a_fixed_order():
    # The original's order per replica type: type, containers, images, default container, Master count;
    # replica types in the table's order (Master before Worker), never map order.
    specs = {"Worker": {"replicas": 1, "template": {"spec": {"containers": [{"name": "main"}]}}},
             "Master": replica("xgboost", 3), "Evaluator": replica("xgboost", 1)}
    for order in (["Worker", "Master", "Evaluator"], ["Evaluator", "Worker", "Master"]):
        assert refusal(xgboostjob({k: specs[k] for k in order})) == (
            "[spec.xgbReplicaSpecs[Master].replicas: Forbidden: must be 1, "
            "spec.xgbReplicaSpecs[Worker].template.spec.containers[0].image: Required value: must be required, "
            "spec.xgbReplicaSpecs[Worker].template.spec.containers: Required value: must have at least one "
            "container with name xgboost, "
            'spec.xgbReplicaSpecs[Evaluator]: Unsupported value: "Evaluator": supported values: "Master", "Worker"]')


def test_paddle_master_only_and_replica_counts_are_free():
    assert list(specs_of(admit(paddlejob({"Master": replica("paddle", 2)})))) == ["Master"]
    assert specs_of(admit(paddlejob({"Worker": replica("paddle", 0)})))["Worker"]["replicas"] == 0


def test_mpijob_launcher_is_required_and_must_be_one():
    assert refusal(mpijob({"Worker": replica("mpi", 2)})) == \
        "spec.mpiReplicaSpecs[Launcher]: Required value: must be present"
    assert refusal(mpijob({"Launcher": replica("mpi", 2)})) == \
        "spec.mpiReplicaSpecs[Launcher].replicas: Forbidden: must be 1"
    assert refusal(mpijob({"Launcher": replica("mpi", 0)})) == \
        "spec.mpiReplicaSpecs[Launcher].replicas: Forbidden: must be 1"
    assert specs_of(admit(mpijob({"Launcher": replica("mpi")})))["Launcher"]["replicas"] == 1


def test_mpijob_replica_type_and_container_rules():
    assert refusal(mpijob({"Launcher": replica("mpi"), "Server": replica("mpi")})) == (
        'spec.mpiReplicaSpecs[Server]: Unsupported value: "Server": supported values: "Launcher", "Worker"')
    empty = {"replicas": 1, "template": {"spec": {"containers": []}}}
    assert refusal(mpijob({"Launcher": empty})) == \
        "spec.mpiReplicaSpecs[Launcher].template.spec.containers: Required value: must be specified"
    no_image = replica("mpi")
    no_image["template"]["spec"]["containers"][0]["image"] = ""
    assert refusal(mpijob({"Launcher": replica("mpi"), "Worker": no_image})) == \
        "spec.mpiReplicaSpecs[Worker].template.spec.containers[0].image: Required value: must be required"
    no_name = replica("mpi")
    no_name["template"]["spec"]["containers"].append({"name": "", "image": "busybox"})
    assert refusal(mpijob({"Launcher": no_name})) == \
        "spec.mpiReplicaSpecs[Launcher].template.spec.containers[1].name: Required value: must be required"
    # No default-container-name rule for MPI: any container name will do.
    assert admit(mpijob({"Launcher": replica("launcher"), "Worker": replica("worker", 1)}))


def test_mpijob_errors_are_all_listed_in_the_originals_order():
    bad = {"replicas": 3, "template": {"spec": {"containers": [{"name": "", "image": ""}]}}}
    assert refusal(mpijob({"Worker": copy.deepcopy(bad), "Launcher": bad})) == (
        "[spec.mpiReplicaSpecs[Launcher].template.spec.containers[0].image: Required value: must be required, "
        "spec.mpiReplicaSpecs[Launcher].template.spec.containers[0].name: Required value: must be required, "
        "spec.mpiReplicaSpecs[Launcher].replicas: Forbidden: must be 1, "
        "spec.mpiReplicaSpecs[Worker].template.spec.containers[0].image: Required value: must be required, "
        "spec.mpiReplicaSpecs[Worker].template.spec.containers[0].name: Required value: must be required]")


def test_mpijob_phalanx_rules_main_container_and_slots():
    with pytest.raises(Invalid) as e:
        admit(mpijob(mainContainer="mpi; rm -rf /", slotsPerWorker=0))
    assert not isinstance(e.value, WebhookDenied)
    assert e.value.message.startswith('MPIJob.kubeflow.org "pi" is invalid: [spec.mainContainer: Invalid value: '
                                      '"mpi; rm -rf /": a lowercase RFC 1123 label must consist of')
    assert e.value.message.endswith("spec.slotsPerWorker: Invalid value: 0: must be greater than or equal to 1]")
    assert admit(mpijob(mainContainer="mpi"))["spec"]["mainContainer"] == "mpi"


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_managed_by_rules_apply_to_every_kind(kind):
    """JAX included: the original's JAX webhook (and MPI controller) never checked it."""
    job = MAKERS[kind]()
    job["spec"]["runPolicy"] = {"managedBy": "me"}
    assert refusal(job) == ('spec.runPolicy.managedBy: Unsupported value: "me": supported values: '
                            '"kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"')
    old = admit(MAKERS[kind]())
    new = copy.deepcopy(old)
    new["spec"]["runPolicy"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    assert refusal(new, old) == ('spec.runPolicy.managedBy: Invalid value: "kueue.x-k8s.io/multikueue": '
                                 'field is immutable')
    stored = admit(new)
    assert stored["spec"]["runPolicy"]["managedBy"] == "kueue.x-k8s.io/multikueue"
    assert admit(stored, stored) == stored


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_queue_is_immutable_and_duplicate_types_are_refused(kind):
    old = MAKERS[kind]()
    old["spec"]["runPolicy"] = {"schedulingPolicy": {"queue": "a"}}
    old = admit(old)
    new = copy.deepcopy(old)
    new["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = "b"
    with pytest.raises(Invalid) as e:
        admit(new, old)
    assert "spec.runPolicy.schedulingPolicy.queue is immutable" in e.value.message
    job = MAKERS[kind]()
    specs = job["spec"][FIELD[kind]]
    specs["worker"] = copy.deepcopy(specs["Worker"])
    with pytest.raises(Invalid) as e:
        admit(job)
    assert f'spec.{FIELD[kind]}[worker]: Duplicate value: "worker"' in e.value.message


@pytest.mark.parametrize("example", ["xgboostjob.yaml", "paddlejob.yaml", "paddlejob-ps.yaml", "jaxjob.yaml",
                                     "mpijob.yaml"])
def test_the_examples_are_admitted(example):
    path = EXAMPLES / example
    if not path.exists():
        pytest.skip(f"{example} is not written yet")
    out = admit(yaml.safe_load(path.read_text()))
    assert out["kind"] in NEW_KINDS and out["spec"]["runPolicy"]["cleanPodPolicy"]


# --------------------------------------------------------------------------- kubectl API


def job_with_state(kind: str, name: str, conditions: list[str], created: datetime) -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": kind,
            "metadata": {"name": name, "namespace": "default", "creationTimestamp": format_time(created),
                         "resourceVersion": "5"},
            "spec": {FIELD.get(kind, "pytorchReplicaSpecs"): {}},
            "status": {"conditions": [{"type": t, "status": "True"} for t in conditions]}}


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_server_side_table_has_the_crd_columns(kind):
    cols = [(c["name"], c["type"], c["description"]) for c in column_definitions(kind)]
    state = ("State", "string", "Custom resource definition column (in JSONPath format): .status.conditions[-1:].type")
    age = ("Age", "date", "Custom resource definition column (in JSONPath format): .metadata.creationTimestamp")
    assert cols[0][0] == "Name"
    assert cols[1:] == ([age, state] if kind == "MPIJob" else [state, age])  # the MPIJob CRD lists Age first
    jobs = [job_with_state(kind, "a", ["Created", "Running", "Succeeded"], NOW - timedelta(minutes=5)),
            job_with_state(kind, "b", [], NOW - timedelta(seconds=30))]
    cells = [r["cells"] for r in table_for(kind, jobs, NOW)["rows"]]
    if kind == "MPIJob":
        assert cells == [["a", "5m", "Succeeded"], ["b", "30s", None]]
    else:
        assert cells == [["a", "Succeeded", "5m"], ["b", None, "30s"]]


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_phalanx_get_columns_are_kubectls(kind):
    jobs = [job_with_state(kind, "a", ["Created", "Running"], NOW - timedelta(minutes=5))]
    header = ["NAME", "AGE", "STATE"] if kind == "MPIJob" else ["NAME", "STATE", "AGE"]
    assert printers.columns(kind) == header and printers.columns(kind, wide=True) == header
    row = printers.row(jobs[0], kind, False, NOW)
    assert row == (["a", "5m", "Running"] if kind == "MPIJob" else ["a", "Running", "5m"])
    assert printers.row(job_with_state(kind, "b", [], NOW), kind, False, NOW)[header.index("STATE")] == ""


def test_discovery_lists_the_new_resources_with_status():
    names = [r["name"] for r in discovery.resource_list("kubeflow.org", "v1")["resources"]]
    for kind in NEW_KINDS:
        plural = by_kind(kind).plural
        assert plural in names and f"{plural}/status" in names
        main = next(r for r in discovery.resource_list("kubeflow.org", "v1")["resources"] if r["name"] == plural)
        assert main["kind"] == kind and main["namespaced"] is True and "kubeflow" in main["categories"]


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_openapi_publishes_each_kind_with_docs_and_paths(kind):
    d = openapi_document("kubeflow.org/v1")
    top = d["components"]["schemas"][f"org.kubeflow.v1.{kind}"]
    assert top["x-kubernetes-group-version-kind"] == [{"group": "kubeflow.org", "kind": kind, "version": "v1"}]
    assert top["description"].startswith(f"{kind} represents")
    spec = top["properties"]["spec"]
    assert spec["required"] == [FIELD[kind]] and spec["properties"][FIELD[kind]]["description"]
    assert all(p.get("description") for p in spec["properties"].values())
    rs = spec["properties"][FIELD[kind]]["additionalProperties"]
    assert set(rs["properties"]) == {"replicas", "template", "restartPolicy"}
    assert set(top["properties"]["status"]["properties"]) >= {"conditions", "replicaStatuses", "completionTime"}
    plural = by_kind(kind).plural
    base = f"/apis/kubeflow.org/v1/namespaces/{{namespace}}/{plural}"
    assert {base, f"{base}/{{name}}", f"{base}/{{name}}/status", f"/apis/kubeflow.org/v1/{plural}"} <= set(d["paths"])
    assert f"org.kubeflow.v1.{kind}List" in d["components"]["schemas"]


def test_openapi_mpijob_and_paddle_fields():
    s = openapi_document("kubeflow.org/v1")["components"]["schemas"]
    mpi = s["org.kubeflow.v1.MPIJob"]["properties"]["spec"]["properties"]
    assert set(mpi) == {"slotsPerWorker", "cleanPodPolicy", "mpiReplicaSpecs", "mainContainer", "runPolicy"}
    assert mpi["slotsPerWorker"]["format"] == "int32" and mpi["cleanPodPolicy"]["enum"] == ["All", "Running", "None"]
    paddle = s["org.kubeflow.v1.PaddleJob"]["properties"]["spec"]["properties"]["elasticPolicy"]
    assert set(paddle["properties"]) == {"minReplicas", "maxReplicas", "maxRestarts", "metrics"}


@pytest.mark.parametrize("kind", JOB_KINDS)
def test_every_job_kind_is_deleted_in_the_foreground(kind):
    assert effective_policy(kind, None) == effective_policy(kind, "Background") == "Foreground"
    assert effective_policy(kind, "Orphan") == "Orphan"
    assert effective_policy("ConfigMap", None) is None


async def test_job_log_route_serves_an_mpijobs_pods(tmp_path):
    from phalanx.client.http import HttpClient
    from phalanx.node.logs import LogProvider
    from phalanx.server.app import make_app, serve
    from tests.unit.test_node_log_records import pod_doc, run_pod

    store = Store(None, FakeClock(NOW), admission=admit)
    local = LocalClient(store)
    runner, url = await serve(make_app(local, "tok", log_provider=LogProvider(tmp_path, local, poll_interval=0.01)))
    client = HttpClient(url, "tok")
    try:
        job = await local.create({**mpijob(), "metadata": {"name": "pi", "namespace": "default"}})
        await run_pod(local, tmp_path, pod_doc("pi-launcher", job, containers=("mpi",)), NOW, {"mpi": ["sum 3\n"]})
        await run_pod(local, tmp_path, pod_doc("pi-worker-0", job, containers=("mpi",)), NOW, {"mpi": ["rank 0\n"]})
        text = b"".join([c async for c in client.job_logs("default", "MPIJob", "pi")]).decode()
        assert "==> pi-launcher/mpi" in text and "sum 3\n" in text
        assert "==> pi-worker-0/mpi" in text and "rank 0\n" in text
    finally:
        await client.close()
        await runner.cleanup()
        store.close()


# --------------------------------------------------------------------------- describe


def test_describe_an_mpijob_with_restart_accounting_and_a_waiting_gang():
    job = admit(mpijob())
    job["metadata"].update({"namespace": "default", "creationTimestamp": format_time(NOW)})
    job["status"] = {"conditions": [{"type": "Created", "status": "True", "reason": "MPIJobCreated"}],
                     "restartCount": 1,
                     "replicaStatuses": {"Worker": {"active": 1, "restarts": 1}, "Launcher": {"active": 1}}}
    pg = {"metadata": {"name": "pi"}, "status": {"phase": "Pending", "conditions": [
        {"type": "Unschedulable", "status": "True", "message": "2/3 tasks in gang unschedulable"}]}}
    text = describe(job, {"events": [], "podgroup": pg}, NOW)
    assert "  Mpi Replica Specs:\n    Launcher:\n" in text and re.search(r"\n  Slots Per Worker:\s+1\n", text)
    assert re.search(r"  Replica Statuses:\n    Launcher:\n      Active:\s+1\n(.*\n){3}    Worker:\n"
                     r"      Active:\s+1\n(.*\n){2}      Restarts:\s+1\n", text), text
    assert re.search(r"\n  Restart Count:\s+1 \(backoffLimit not set: operator default\)\n", text)
    assert re.search(r"\nWaiting:\s+PodGroup pi is Pending: 2/3 tasks in gang unschedulable\n", text)


# --------------------------------------------------------------------------- install: CRDs


def mpijob_manifest() -> dict:
    job = mpijob(slotsPerWorker=2, mainContainer="mpi", cleanPodPolicy="Running")
    job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0]["command"] = [
        "mpirun", "-np", "2", "hostname"]
    return job


def manifests_of(kind: str) -> list[dict]:
    docs = [MAKERS[kind]()]
    if kind == "MPIJob":
        docs.append(mpijob_manifest())
    if kind == "PaddleJob":
        docs.append(paddlejob({"Master": replica("paddle", 1), "Worker": replica("paddle", 2)},
                              elasticPolicy={"minReplicas": 1, "maxRestarts": 3}))
    example = EXAMPLES / f"{kind.lower()}.yaml"
    if example.exists():
        docs.append(yaml.safe_load(example.read_text()))
    return docs


@pytest.mark.parametrize("kind", NEW_KINDS)
def test_generated_crd_is_structural_and_accepts_each_kind(kind):
    schema = schema_of(kind)
    assert structural_problems(schema) == []
    assert schema["properties"]["spec"]["required"] == [FIELD[kind]]
    for doc in manifests_of(kind):
        assert validate(schema, doc) == [], doc["metadata"]["name"]
        assert validate(schema, admit(doc)) == [], doc["metadata"]["name"]
    typo = MAKERS[kind]()
    typo["spec"][FIELD[kind]]["Worker"]["replicaz"] = 2
    assert validate(schema, typo) == [f'.spec.{FIELD[kind]}[Worker].replicaz: unknown field "replicaz"']
    wrong = MAKERS[kind]()
    wrong["spec"]["runPolicy"] = {"cleanPodPolicy": "Sometimes"}
    assert validate(schema, wrong)[0].startswith(".spec.runPolicy.cleanPodPolicy: not one of")


@pytest.mark.parametrize("kind, subresources, columns", [
    ("XGBoostJob", {"status": {}}, ["State", "Age"]),
    ("PaddleJob", {"scale": {"labelSelectorPath": ".status.replicaStatuses.Worker.selector",
                             "specReplicasPath": ".spec.paddleReplicaSpecs.Worker.replicas",
                             "statusReplicasPath": ".status.replicaStatuses.Worker.active"}, "status": {}},
     ["State", "Age"]),
    ("JAXJob", {"scale": {"labelSelectorPath": ".status.replicaStatuses.Worker.selector",
                          "specReplicasPath": ".spec.jaxReplicaSpecs.Worker.replicas",
                          "statusReplicasPath": ".status.replicaStatuses.Worker.active"}, "status": {}},
     ["State", "Age"]),
    ("MPIJob", {"status": {}}, ["Age", "State"]),
])
def test_crd_names_subresources_and_columns_are_the_originals(kind, subresources, columns):
    c = crd(kind)
    rt = by_kind(kind)
    assert c["metadata"]["name"] == f"{rt.plural}.kubeflow.org" and c["spec"]["scope"] == "Namespaced"
    assert c["spec"]["names"] == {"kind": kind, "listKind": f"{kind}List", "plural": rt.plural,
                                  "singular": rt.singular, "categories": ["all", "kubeflow"]}
    v = c["spec"]["versions"][0]
    assert (v["name"], v["served"], v["storage"]) == ("v1", True, True)
    assert v["subresources"] == subresources
    assert [col["name"] for col in v["additionalPrinterColumns"]] == columns
    assert admit(c)["kind"] == "CustomResourceDefinition"


# --------------------------------------------------------------------------- install: RBAC


def test_operator_role_grants_the_new_jobs_and_what_mpi_needs_least_privilege():
    for kind in JOB_KINDS:
        plural = by_kind(kind).plural
        for verb in ("get", "list", "watch", "delete"):
            assert _allowed(OPERATOR_RULES, "kubeflow.org", plural, verb), (plural, verb)
        assert not _allowed(OPERATOR_RULES, "kubeflow.org", plural, "update")  # only through /status
        assert not _allowed(OPERATOR_RULES, "kubeflow.org", plural, "create")
        for verb in ("get", "update", "patch"):
            assert _allowed(OPERATOR_RULES, "kubeflow.org", f"{plural}/status", verb)
    for group, resource in (("", "configmaps"), ("", "serviceaccounts"), ("rbac.authorization.k8s.io", "roles"),
                            ("rbac.authorization.k8s.io", "rolebindings")):
        for verb in ("get", "list", "watch", "create", "update", "delete", "patch"):  # patch: adoption
            assert _allowed(OPERATOR_RULES, group, resource, verb), (resource, verb)
        for verb in ("deletecollection", "escalate", "bind", "*"):
            assert not _allowed(OPERATOR_RULES, group, resource, verb), (resource, verb)
    assert _allowed(OPERATOR_RULES, "", "pods/exec", "create")
    assert not _allowed(OPERATOR_RULES, "", "pods/exec", "get")
    assert not any(_allowed(OPERATOR_RULES, "rbac.authorization.k8s.io", r, "create")
                   for r in ("clusterroles", "clusterrolebindings"))
    assert not _allowed(OPERATOR_RULES, "", "secrets", "get")


def _role_within(role_rules: list[dict], holder: list[dict]) -> list[str]:
    """What a Role grants that ``holder`` does not (Kubernetes refuses to create such a Role)."""
    missing = []
    for rule in role_rules:
        for g in rule.get("apiGroups") or []:
            for r in rule.get("resources") or []:
                for v in rule.get("verbs") or []:
                    if not _allowed(holder, g, r, v):
                        missing.append(f"{v} {r}.{g}")
    return missing


async def test_the_operator_role_suffices_to_run_an_mpijob_in_cluster_mode():
    """Against a Kubernetes API (no local runtime): the operator creates the
    launcher's ConfigMap, ServiceAccount, Role and RoleBinding and the pods, with
    every call checked against OPERATOR_RULES, and the Role it creates grants
    nothing the operator does not hold (the apiserver's escalation check)."""
    clock = FakeClock(NOW)
    store = Store(None, clock, admission=admit)
    raw = LocalClient(store)
    operator = Authorizing(raw, OPERATOR_RULES, "system:serviceaccount:phalanx-system:phalanx-operator")
    options = ReconcileOptions(gang_scheduler=None, local_runtime=False, resolvable_names=True,
                               init_container_command=None, mpi_kubectl_delivery_image="reg/kubectl-delivery:1")
    controller = JobController(operator, clock, options, kinds=["MPIJob"])
    task = asyncio.create_task(controller.run())
    try:
        await raw.create({**mpijob(), "metadata": {"name": "pi", "namespace": "default"}})
        want = {("ConfigMap", "pi-config"), ("ServiceAccount", "pi-launcher"), ("Role", "pi-launcher"),
                ("RoleBinding", "pi-launcher"), ("Pod", "pi-launcher"), ("Pod", "pi-worker-0"), ("Pod", "pi-worker-1")}
        have: set = set()
        for _ in range(500):
            have = {(k, o["metadata"]["name"]) for k, _n in want
                    for o in (await raw.list(k, "default")).items}
            if want <= have or operator.denied:
                break
            await asyncio.sleep(0.01)
        assert operator.denied == []
        assert want <= have, sorted(want - have)
        role = await raw.get("Role", "pi-launcher", "default")
        assert _role_within(role["rules"], OPERATOR_RULES) == []
        launcher = await raw.get("Pod", "pi-launcher", "default")
        images = [c.get("image") for c in launcher["spec"].get("initContainers") or []]
        assert "reg/kubectl-delivery:1" in images  # --mpi-kubectl-delivery-image reaches the pod
    finally:
        await controller.stop()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        store.close()
    assert ("rbac.authorization.k8s.io", "roles", "create") in operator.used
    assert ("", "configmaps", "create") in operator.used


# --------------------------------------------------------------------------- operator flags


def test_reconcile_options_carry_the_kubectl_delivery_image():
    assert clustermode.reconcile_options("volcano", False).mpi_kubectl_delivery_image == \
        "kubeflow/kubectl-delivery:latest"
    opts = clustermode.reconcile_options("volcano", False, mpi_kubectl_delivery_image="reg/kd:2")
    assert opts.mpi_kubectl_delivery_image == "reg/kd:2"
    local = clustermode.reconcile_options("volcano", True)
    assert local.exec_command and local.exec_command[-2:] == ("-m", "phalanx.cli.execcmd")
    assert local.pod_wait_command and local.pod_wait_command[-1] == "phalanx.node.podwait"
    assert clustermode.OperatorSettings().kinds == JOB_KINDS
    assert clustermode.OperatorSettings().mpi_kubectl_delivery_image == "kubeflow/kubectl-delivery:latest"


def test_operator_flags_enable_scheme_and_kubectl_delivery_image(monkeypatch):
    seen: list = []

    async def fake_run_operator(conn, settings, say, stop_event=None):
        seen.append(settings)
        return 0

    monkeypatch.setattr(clustermode, "run_operator", fake_run_operator)
    r = CliRunner().invoke(cli, ["operator", "--server", "https://127.0.0.1:1", "--token", "t",
                                 "--enable-scheme", "mpijob,xgboostjob", "--enable-scheme", "JAXJobs",
                                 "--mpi-kubectl-delivery-image", "reg/kd:3"])
    assert r.exit_code == 0, r.output
    [settings] = seen
    assert settings.kinds == ("MPIJob", "XGBoostJob", "JAXJob")
    assert settings.mpi_kubectl_delivery_image == "reg/kd:3"
    r = CliRunner().invoke(cli, ["operator", "--server", "https://127.0.0.1:1", "--token", "t",
                                 "--mpi-kubectl-delivery-image", "a b"])
    assert r.exit_code != 0 and "--mpi-kubectl-delivery-image: must be a non-empty image reference" in r.output
    r = CliRunner().invoke(cli, ["operator", "--server", "https://127.0.0.1:1", "--token", "t",
                                 "--enable-scheme", "mxjob"])
    assert r.exit_code != 0 and '"mxjob"' in r.output and '"mpijob"' in r.output
    assert len(seen) == 1
