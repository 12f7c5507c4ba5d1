"""The job CRDs' CEL rules (deploy.crd_rules), evaluated with cel-python the way a
kube-apiserver applies them (each rule at its schema node, ``oldSelf`` on updates): every
example and seed is accepted, as written and defaulted; P4 and each covered webhook rule
are refused with Phalanx admission's message; CEL never refuses what admission accepts."""
from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any, Callable

import celpy
import pytest
import yaml
from celpy import celtypes

from phalanx.api import admission
from phalanx.api.registry import JOB_KINDS
from phalanx.deploy.crd_rules import MAX_CONTAINERS, MAX_REPLICA_TYPES
from phalanx.deploy.crds import crd
from phalanx.objects.errors import ApiError

ROOT = Path(__file__).resolve().parents[2]
_ENV = celpy.Environment()
# Kubernetes' CEL strings library, which cel-python lacks.
_K8S_FUNCTIONS = {"lowerAscii": lambda s: celtypes.StringType(str(s).lower())}


@functools.cache
def _program(rule: str) -> Any:
    return _ENV.program(_ENV.compile(rule), functions=_K8S_FUNCTIONS)


@functools.cache
def schema(kind: str) -> dict[str, Any]:
    return crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]


def violations(kind: str, obj: Any, old: Any = None) -> list[tuple[str, str]]:
    """(path, message) of every rule and bound ``obj`` breaks (``old``: the stored object)."""
    out: list[tuple[str, str]] = []
    _walk(schema(kind), obj, old, "", out)
    return out


def _walk(node: dict[str, Any], data: Any, old: Any, path: str, out: list[tuple[str, str]]) -> None:
    if data is None:
        return
    for r in node.get("x-kubernetes-validations", []):
        transition = "oldSelf" in r["rule"]
        if transition and old is None:
            continue  # transition rules run on updates, where both values exist
        act = {"self": celpy.json_to_cel(data)}
        if transition:
            act["oldSelf"] = celpy.json_to_cel(old)
        try:
            ok = _program(r["rule"]).evaluate(act)
        except celpy.CELEvalError:  # the apiserver refuses on an evaluation error too
            ok = None
        if not (isinstance(ok, celtypes.BoolType) and bool(ok)):  # false, or an error value
            out.append((path or "<root>", r["message"]))
    if isinstance(data, dict):
        if "maxProperties" in node and len(data) > node["maxProperties"]:
            out.append((path, f"must have at most {node['maxProperties']} properties"))
        for key, sub in (node.get("properties") or {}).items():
            if key in data:
                _walk(sub, data[key], old.get(key) if isinstance(old, dict) else None, f"{path}.{key}", out)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            for key, value in data.items():
                _walk(extra, value, old.get(key) if isinstance(old, dict) else None, f"{path}[{key}]", out)
    elif isinstance(data, list):
        if "maxItems" in node and len(data) > node["maxItems"]:
            out.append((path, f"must have at most {node['maxItems']} items"))
        for i, item in enumerate(data):
            _walk(node.get("items") or {}, item, None, f"{path}[{i}]", out)


def _jobs_in(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict) and d.get("kind") in JOB_KINDS]


SEED_FILES = sorted({*ROOT.glob("examples/*.yaml"), *ROOT.glob("examples/*/*.yaml")})
SEEDS = [(f"{p.relative_to(ROOT)}:{d['metadata']['name']}", d) for p in SEED_FILES for d in _jobs_in(p)]


def test_seed_set_covers_every_kind():
    assert {d["kind"] for _, d in SEEDS} == set(JOB_KINDS)
    assert len(SEEDS) >= 15


@pytest.mark.parametrize("name, job", SEEDS, ids=[n for n, _ in SEEDS])
def test_every_example_and_seed_is_accepted_as_written_and_defaulted(name, job):
    admitted = admission.admit(job)
    assert violations(job["kind"], job) == []
    assert violations(job["kind"], admitted) == []
    assert violations(job["kind"], admitted, admitted) == []  # an update that changes nothing


def example(kind: str) -> dict[str, Any]:
    files = {"PyTorchJob": "pytorchjob.yaml", "TFJob": "tfjob.yaml", "XGBoostJob": "xgboostjob.yaml",
             "PaddleJob": "paddlejob.yaml", "JAXJob": "jaxjob.yaml", "MPIJob": "mpijob.yaml"}
    return copy.deepcopy(_jobs_in(ROOT / "examples" / files[kind])[0])


def _specs(job: dict[str, Any]) -> dict[str, Any]:
    return next(v for k, v in job["spec"].items() if k.endswith("ReplicaSpecs"))


def test_p4_master_replicas_2_is_refused_by_cel():
    job = example("PyTorchJob")
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    assert violations("PyTorchJob", job) == [
        (".spec.pytorchReplicaSpecs", "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1")]
    with pytest.raises(ApiError) as e:
        admission.admit(job)
    assert e.value.message.endswith("spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1")


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(job: dict[str, Any]) -> None:
        node: Any = job
        keys = path.split(".")
        for k in keys[:-1]:
            node = node.setdefault(k, {}) if isinstance(node, dict) else node[int(k)]
        node[keys[-1]] = value
    return apply


def _replica(rtype: str, field: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def apply(job: dict[str, Any]) -> None:
        _specs(job)[rtype][field] = value
    return apply


def _rename(old: str, new: str) -> Callable[[dict[str, Any]], None]:
    def apply(job: dict[str, Any]) -> None:
        specs = _specs(job)
        specs[new] = specs.pop(old)
    return apply


def _copy_type(src: str, new: str) -> Callable[[dict[str, Any]], None]:
    def apply(job: dict[str, Any]) -> None:
        specs = _specs(job)
        specs[new] = copy.deepcopy(specs[src])
    return apply


def _containers(rtype: str, fn: Callable[[list[dict[str, Any]]], None]) -> Callable[[dict[str, Any]], None]:
    def apply(job: dict[str, Any]) -> None:
        fn(_specs(job)[rtype]["template"]["spec"]["containers"])
    return apply


def _clear_specs(job: dict[str, Any]) -> None:
    _specs(job).clear()


def _drop(rtype: str) -> Callable[[dict[str, Any]], None]:
    return lambda job: _specs(job).pop(rtype)


def _image_empty(cs: list[dict[str, Any]]) -> None:
    cs[0]["image"] = ""


def _no_containers(cs: list[dict[str, Any]]) -> None:
    cs.clear()


def _rename_container(cs: list[dict[str, Any]]) -> None:
    cs[0]["name"] = "other"


# (kind, mutation, the CEL message) — each is a rule of Phalanx's admission.
REFUSED = [
    ("PyTorchJob", _replica("Master", "replicas", 2), "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1"),
    ("PyTorchJob", _replica("Master", "replicas", 0), "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1"),
    ("PyTorchJob", _replica("Worker", "replicas", 0),
     "spec.pytorchReplicaSpecs[Worker].replicas: Forbidden: must be at least 1"),
    ("PyTorchJob", _replica("Worker", "replicas", -1), "must be greater than or equal to 0"),
    ("PyTorchJob", _rename("Worker", "Chief"),
     'spec.pytorchReplicaSpecs: Unsupported value: supported values: "Master", "Worker" (any case)'),
    ("PyTorchJob", _copy_type("Worker", "worker"),
     "spec.pytorchReplicaSpecs: Duplicate value: a replica type may be given once, in any case"),
    ("PyTorchJob", _clear_specs, "spec.pytorchReplicaSpecs: Required value: must be required"),
    ("PyTorchJob", lambda j: (_set("spec.elasticPolicy", {"minReplicas": 1})(j), _drop("Worker")(j)),
     "spec.pytorchReplicaSpecs[Worker]: Required value: must be configured if elastic policy is used"),
    ("PyTorchJob", lambda j: j["spec"].update(elasticPolicy={"nProcPerNode": 2}, nprocPerNode="2"),
     "spec.elasticPolicy.nProcPerNode: Forbidden: must not be used with spec.nprocPerNode"),
    ("PyTorchJob", _containers("Worker", _image_empty),
     "spec.pytorchReplicaSpecs[*].template.spec.containers[*].image: Required value: must be required"),
    ("PyTorchJob", _containers("Worker", _no_containers),
     "spec.pytorchReplicaSpecs[*].template.spec.containers: Required value: must be specified"),
    ("PyTorchJob", _containers("Worker", _rename_container),
     "spec.pytorchReplicaSpecs[*].template.spec.containers: Required value: must have at least one container "
     "with name pytorch"),
    ("PyTorchJob", _set("metadata.name", "1abc"), None),
    ("PyTorchJob", _set("metadata.name", "a.b"), None),
    ("PyTorchJob", _set("spec.runPolicy.managedBy", "me"),
     'spec.runPolicy.managedBy: Unsupported value: supported values: "kubeflow.org/training-operator", '
     '"kueue.x-k8s.io/multikueue"'),
    ("TFJob", lambda j: (_copy_type("Worker", "Chief")(j), _copy_type("Worker", "master")(j)),
     "spec.tfReplicaSpecs: Forbidden: must not have more than 1 Chief or Master role"),
    ("XGBoostJob", _copy_type("Worker", "WORKER"),
     "spec.xgbReplicaSpecs: Duplicate value: a replica type may be given once, in any case"),
    ("TFJob", _containers("Worker", _rename_container),
     "spec.tfReplicaSpecs[*].template.spec.containers: Required value: must have at least one container with name "
     "tensorflow"),
    ("XGBoostJob", _replica("Master", "replicas", 3), "spec.xgbReplicaSpecs[Master].replicas: Forbidden: must be 1"),
    ("XGBoostJob", _drop("Master"), "spec.xgbReplicaSpecs[Master]: Required value: must be present"),
    ("PaddleJob", _rename("Worker", "PS"),
     'spec.paddleReplicaSpecs: Unsupported value: supported values: "Master", "Worker" (any case)'),
    ("PaddleJob", _containers("Worker", _rename_container),
     'spec.paddleReplicaSpecs[*].template.spec.containers: Required value: must have at least one container with '
     'name "paddle"'),
    ("JAXJob", _rename("Worker", "Master"), 'spec.jaxReplicaSpecs: Unsupported value: supported values: "Worker" '
                                            '(any case)'),
    ("MPIJob", _replica("Launcher", "replicas", 2), "spec.mpiReplicaSpecs[Launcher].replicas: Forbidden: must be 1"),
    ("MPIJob", _drop("Launcher"), "spec.mpiReplicaSpecs[Launcher]: Required value: must be present"),
    ("MPIJob", _rename("Worker", "worker"), 'spec.mpiReplicaSpecs: Unsupported value: supported values: "Launcher", '
                                            '"Worker"'),
    ("MPIJob", _set("spec.slotsPerWorker", 0), "must be greater than or equal to 1"),
    ("MPIJob", _set("spec.mainContainer", "Bad_Name"), None),
    ("MPIJob", _containers("Worker", lambda cs: cs[0].__setitem__("name", "")),
     "spec.mpiReplicaSpecs[*].template.spec.containers[*].name: Required value: must be required"),
]


@pytest.mark.parametrize("kind, mutate, message", REFUSED, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(REFUSED)])
def test_covered_rules_refuse_what_admission_refuses(kind, mutate, message):
    job = example(kind)
    mutate(job)
    with pytest.raises(ApiError):
        admission.admit(job)
    found = [m for _, m in violations(kind, job)]
    assert found, f"CEL accepted what Phalanx's admission refuses: {job}"
    if message is not None:
        assert message in found, found


ACCEPTED = [  # what Phalanx's defaults fix: CEL must not refuse them
    ("PyTorchJob", _rename("Worker", "worker")),
    ("PyTorchJob", _rename("Master", "MASTER")),
    ("PyTorchJob", lambda j: _specs(j)["Master"].pop("replicas", None)),
    ("XGBoostJob", _rename("Master", "master")),
    ("TFJob", _copy_type("Worker", "Evaluator")),
    ("TFJob", _copy_type("Worker", "custom-type")),
    ("PyTorchJob", _set("spec.runPolicy.managedBy", "kueue.x-k8s.io/multikueue")),
    ("PyTorchJob", _set("spec.runPolicy.backoffLimit", -1)),  # accepted by the original and Phalanx alike
    ("MPIJob", _set("spec.mainContainer", "")),
]


@pytest.mark.parametrize("kind, mutate", ACCEPTED, ids=[f"{k}-{i}" for i, (k, _) in enumerate(ACCEPTED)])
def test_what_admission_accepts_cel_accepts(kind, mutate):
    job = example(kind)
    mutate(job)
    admission.admit(job)
    assert violations(kind, job) == []


def test_transition_rules_managed_by_and_queue():
    old = example("TFJob")
    old["spec"].setdefault("runPolicy", {}).update(managedBy="kubeflow.org/training-operator",
                                                   schedulingPolicy={"queue": "a"})
    assert violations("TFJob", old, old) == []
    for change, message in (
            (lambda j: j["spec"]["runPolicy"].update(managedBy="kueue.x-k8s.io/multikueue"),
             "spec.runPolicy.managedBy: Invalid value: field is immutable"),
            (lambda j: j["spec"]["runPolicy"].pop("managedBy"),
             "spec.runPolicy.managedBy: Invalid value: field is immutable"),
            (lambda j: j["spec"]["runPolicy"]["schedulingPolicy"].update(queue="b"),
             "spec.runPolicy.schedulingPolicy.queue is immutable")):
        new = copy.deepcopy(old)
        change(new)
        with pytest.raises(ApiError):
            admission.admit(new, admission.admit(old))
        assert message in [m for _, m in violations("TFJob", new, old)]
    # Setting a queue that was unset is allowed (both sides must have it for the rule).
    unset = example("TFJob")
    new = copy.deepcopy(unset)
    new["spec"].setdefault("runPolicy", {})["schedulingPolicy"] = {"queue": "b"}
    assert violations("TFJob", new, unset) == []


def test_bounds_the_cost_estimator_needs():
    for kind in JOB_KINDS:
        spec = schema(kind)["properties"]["spec"]["properties"]
        specs = next(v for k, v in spec.items() if k.endswith("ReplicaSpecs"))
        assert specs["maxProperties"] == MAX_REPLICA_TYPES
        containers = specs["additionalProperties"]["properties"]["template"]["properties"]["spec"]["properties"][
            "containers"]
        assert containers["maxItems"] == MAX_CONTAINERS
    job = example("PyTorchJob")
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"] *= MAX_CONTAINERS + 1
    assert (".spec.pytorchReplicaSpecs[Worker].template.spec.containers", "must have at most 64 items") in \
        violations("PyTorchJob", job)


def test_every_rule_compiles_and_has_a_message():
    for kind in JOB_KINDS:
        rules: list[dict[str, str]] = []

        def collect(node: Any) -> None:
            if isinstance(node, dict):
                rules.extend(node.get("x-kubernetes-validations", []))
                for v in node.values():
                    collect(v)
            elif isinstance(node, list):
                for v in node:
                    collect(v)

        collect(schema(kind))
        assert len(rules) >= 10, kind
        for r in rules:
            assert set(r) == {"rule", "message"} and r["message"] and "\n" not in r["message"]
            _program(r["rule"])
