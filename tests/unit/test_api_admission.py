"""Admission: strict decoding, schema, defaults (docs/SEMANTICS.md S1), apiserver and webhook rules.

Messages are compared with the original's exactly where the seeds or the
golden apiserver exchanges recorded them.
"""
from __future__ import annotations

import copy
import random
from typing import Any

import pytest
import yaml

from phalanx.api.admission import StrictDecodingError, WebhookDenied, admit
from phalanx.objects.errors import ApiError, BadRequest, Forbidden, Invalid

# Seed 000's PyTorchJob (its indentation restored), verbatim otherwise.
SEED_PYTORCHJOB = """\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  name: pytest
  namespace: default
spec:
  runPolicy:
    backoffLimit: 3
  pytorchReplicaSpecs:
    Master:
      replicas: 1 # must be 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - image: busybox:1.37.0-glibc
            imagePullPolicy: IfNotPresent
            name: pytorch # must be `pytorch`
            command: ["sh", "-c", "trap exit INT TERM; sleep 30s & wait"]
            resources:
              limits:
                cpu: "1"
                memory: "100Mi"
    Worker:
      replicas: 3
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - image: busybox:1.37.0-glibc
            imagePullPolicy: IfNotPresent
            name: pytorch # must be `pytorch`
            command: ["sh", "-c", "trap exit INT TERM; sleep 30s & wait"]
            resources:
              limits:
                cpu: "1"
                memory: "100Mi"
"""

PT_WEBHOOK = 'admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied the request: '
TF_WEBHOOK = 'admission webhook "validator.tfjob.training-operator.kubeflow.org" denied the request: '
DNS1035 = ("a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic "
           "character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for "
           "validation is '[a-z]([-a-z0-9]*[a-z0-9])?')")
SUBDOMAIN = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and "
             "must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
             "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')")


def seed() -> dict[str, Any]:
    return yaml.safe_load(SEED_PYTORCHJOB)


def tfjob(replicas: dict[str, dict] | None = None) -> dict[str, Any]:
    def replica(n: int, policy: str | None = None) -> dict:
        r: dict[str, Any] = {"replicas": n, "template": {"spec": {"containers": [
            {"name": "tensorflow", "image": "busybox", "command": ["true"]}]}}}
        if policy:
            r["restartPolicy"] = policy
        return r

    specs = replicas if replicas is not None else {"PS": replica(1, "Always"), "Worker": replica(3)}
    return {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "tftest"},
            "spec": {"tfReplicaSpecs": specs}}


def master(job: dict) -> dict:
    return job["spec"]["pytorchReplicaSpecs"]["Master"]


def worker(job: dict) -> dict:
    return job["spec"]["pytorchReplicaSpecs"]["Worker"]


def denied(obj: dict, old: dict | None = None) -> WebhookDenied:
    with pytest.raises(WebhookDenied) as e:
        admit(obj, old)
    assert e.value.code == 403 and e.value.reason == "Forbidden" and isinstance(e.value, Forbidden)
    return e.value


def invalid(obj: dict, old: dict | None = None) -> Invalid:
    with pytest.raises(Invalid) as e:
        admit(obj, old)
    assert not isinstance(e.value, StrictDecodingError)
    assert e.value.code == 422 and e.value.reason == "Invalid"
    return e.value


# --- the seed and docs/SEMANTICS.md S1 ----------------------------------------------------------------------

def test_seed_pytorchjob_is_accepted_and_defaulted() -> None:
    job = seed()
    before = copy.deepcopy(job)
    out = admit(job)
    assert job == before, "admission must not modify its input"
    for rs in (master(out), worker(out)):
        assert rs["restartPolicy"] == "OnFailure"  # kept, not overwritten by the kind default
        [c] = rs["template"]["spec"]["containers"]
        assert c["ports"] == [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}]
        assert c["resources"] == {"limits": {"cpu": "1", "memory": "100Mi"}}  # quantities as written
    assert master(out)["replicas"] == 1 and worker(out)["replicas"] == 3
    assert out["spec"]["runPolicy"] == {"backoffLimit": 3, "cleanPodPolicy": "None", "suspend": False}
    assert out["spec"]["nprocPerNode"] == "auto"
    assert "schedulingPolicy" not in out["spec"]["runPolicy"]  # the queue default belongs to the PodGroup
    assert "elasticPolicy" not in out["spec"]
    assert out["metadata"] == {"name": "pytest", "namespace": "default"}


def test_s1_defaults_are_persisted_so_an_omitted_master_replicas_is_accepted() -> None:
    # docs/SEMANTICS.md S1: the original rejects this (webhook sees replicas nil); Phalanx defaults first.
    job = seed()
    del master(job)["replicas"]
    del worker(job)["restartPolicy"]
    out = admit(job)
    assert master(out)["replicas"] == 1
    assert worker(out)["restartPolicy"] == "OnFailure"  # PyTorchJob's default


def test_s1_admission_is_idempotent_on_its_own_output() -> None:
    once = admit(seed())
    assert admit(once, once) == once
    tf_once = admit(tfjob())
    assert admit(tf_once, tf_once) == tf_once


def test_namespace_defaults_to_the_given_namespace() -> None:
    job = seed()
    del job["metadata"]["namespace"]
    assert admit(job, namespace_default="team-a")["metadata"]["namespace"] == "team-a"
    assert admit(job)["metadata"]["namespace"] == "default"


# --- the Kubeflow webhook rules (docs/REFERENCE.md §2) ------------------------------

def test_p4_master_replicas_2_is_refused_with_the_originals_message() -> None:
    # seed 000: Error from server (Forbidden): error when creating "pytorchjob.yaml": <this message>
    job = seed()
    master(job)["replicas"] = 2
    e = denied(job)
    assert e.message == PT_WEBHOOK + "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1"
    assert [(f.path, f.kind) for f in e.errors] == [("spec.pytorchReplicaSpecs[Master].replicas", "Forbidden")]


def test_worker_replicas_0_is_refused() -> None:
    job = seed()
    worker(job)["replicas"] = 0
    assert denied(job).message == PT_WEBHOOK + "spec.pytorchReplicaSpecs[Worker].replicas: Forbidden: must be at least 1"


def test_unknown_pytorch_replica_type_is_not_supported() -> None:
    job = seed()
    job["spec"]["pytorchReplicaSpecs"]["Launcher"] = copy.deepcopy(worker(job))
    assert denied(job).message == (PT_WEBHOOK + 'spec.pytorchReplicaSpecs[Launcher]: Unsupported value: "Launcher": '
                                   'supported values: "Master", "Worker"')


def test_missing_image_is_required() -> None:
    job = seed()
    del worker(job)["template"]["spec"]["containers"][0]["image"]
    assert denied(job).message == (PT_WEBHOOK + "spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].image: "
                                   "Required value: must be required")


def test_no_container_named_pytorch_is_refused() -> None:
    job = seed()
    master(job)["template"]["spec"]["containers"][0]["name"] = "main"
    assert denied(job).message == (PT_WEBHOOK + "spec.pytorchReplicaSpecs[Master].template.spec.containers: "
                                   "Required value: must have at least one container with name pytorch")


def test_several_errors_are_listed_in_brackets_master_before_worker() -> None:
    job = seed()
    worker(job)["replicas"] = 0
    master(job)["replicas"] = 3
    master(job)["template"]["spec"]["containers"] = []
    e = denied(job)
    assert e.message == PT_WEBHOOK + (
        "[spec.pytorchReplicaSpecs[Master].template.spec.containers: Required value: must be specified, "
        "spec.pytorchReplicaSpecs[Master].template.spec.containers: Required value: must have at least one "
        "container with name pytorch, "
        "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1, "
        "spec.pytorchReplicaSpecs[Worker].replicas: Forbidden: must be at least 1]")


def test_missing_or_empty_replica_specs_are_required() -> None:
    job = seed()
    del job["spec"]
    assert denied(job).message == PT_WEBHOOK + "spec.pytorchReplicaSpecs: Required value: must be required"
    job = seed()
    job["spec"]["pytorchReplicaSpecs"] = {}
    assert denied(job).message == PT_WEBHOOK + "spec.pytorchReplicaSpecs: Required value: must be required"


def test_job_name_must_be_a_dns1035_label() -> None:
    job = seed()
    job["metadata"]["name"] = "1abc"  # a valid subdomain for the apiserver, refused by the webhook
    assert denied(job).message == PT_WEBHOOK + f'metadata.name: Invalid value: "1abc": should match: {DNS1035}'
    job["metadata"]["name"] = "my.job"
    assert "metadata.name" in denied(job).message
    job["metadata"]["name"] = "x" * 64
    assert denied(job).message == (PT_WEBHOOK + f'metadata.name: Invalid value: "{"x" * 64}": should match: '
                                   "must be no more than 63 characters")


def test_a_name_that_is_not_even_a_subdomain_is_refused_by_the_apiserver_first() -> None:
    job = seed()
    job["metadata"]["name"] = "Bad_Name"
    e = invalid(job)
    assert e.message == f'PyTorchJob.kubeflow.org "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name": {SUBDOMAIN}'


def test_tfjob_is_defaulted_per_its_kind() -> None:
    out = admit(tfjob())
    specs = out["spec"]["tfReplicaSpecs"]
    assert specs["PS"]["restartPolicy"] == "Always" and specs["Worker"]["restartPolicy"] == "Never"
    for rs in specs.values():
        assert rs["template"]["spec"]["containers"][0]["ports"] == [
            {"name": "tfjob-port", "containerPort": 2222, "protocol": "TCP"}]
    assert out["spec"]["successPolicy"] == ""
    assert out["spec"]["runPolicy"] == {"cleanPodPolicy": "None", "suspend": False}
    assert "nprocPerNode" not in out["spec"]


def test_tfjob_two_chiefs_are_refused() -> None:
    job = tfjob()
    specs = job["spec"]["tfReplicaSpecs"]
    specs["chief"] = copy.deepcopy(specs["PS"])  # normalised to Chief
    specs["Master"] = copy.deepcopy(specs["PS"])
    assert denied(job).message == TF_WEBHOOK + "spec.tfReplicaSpecs: Forbidden: must not have more than 1 Chief or Master role"


def test_tfjob_accepts_any_replica_type_that_can_name_pods() -> None:
    job = tfjob()
    job["spec"]["tfReplicaSpecs"]["Custom"] = copy.deepcopy(job["spec"]["tfReplicaSpecs"]["PS"])
    assert "Custom" in admit(job)["spec"]["tfReplicaSpecs"]
    job["spec"]["tfReplicaSpecs"]["bad_type"] = copy.deepcopy(job["spec"]["tfReplicaSpecs"]["PS"])
    e = invalid(job)
    assert e.errors[0].path == "spec.tfReplicaSpecs[bad_type]"


def test_tf_replica_types_are_validated_in_a_fixed_order() -> None:
    # Chief, Evaluator, Master, PS, Worker, then the others sorted: never map order.
    names = ["zeta", "Worker", "alpha", "PS", "Master", "Evaluator", "Chief"]
    for seed_ in range(5):
        random.Random(seed_).shuffle(names)
        specs = {n: {"template": {"spec": {"containers": [{"name": "tensorflow"}]}}} for n in names}
        e = denied(tfjob(specs))
        image_errors = [f.path.split("[")[1].split("]")[0] for f in e.errors if f.path.endswith(".image")]
        assert image_errors == ["Chief", "Evaluator", "Master", "PS", "Worker", "alpha", "zeta"]


def test_replica_type_case_is_normalised() -> None:
    job = seed()
    specs = job["spec"]["pytorchReplicaSpecs"]
    job["spec"]["pytorchReplicaSpecs"] = {"master": specs["Master"], "worker": specs["Worker"]}
    out = admit(job)
    assert list(out["spec"]["pytorchReplicaSpecs"]) == ["Master", "Worker"]


def test_two_keys_for_one_replica_type_are_refused() -> None:
    job = seed()
    job["spec"]["pytorchReplicaSpecs"]["worker"] = copy.deepcopy(worker(job))
    e = invalid(job)
    assert str(e.errors[0]) == 'spec.pytorchReplicaSpecs[worker]: Duplicate value: "worker"'


def test_default_port_is_added_by_name_only() -> None:
    job = seed()
    c = master(job)["template"]["spec"]["containers"][0]
    c["ports"] = [{"name": "custom", "containerPort": 23456}]
    w = worker(job)["template"]["spec"]["containers"][0]
    w["ports"] = [{"name": "pytorchjob-port", "containerPort": 29500}]
    out = admit(job)
    assert master(out)["template"]["spec"]["containers"][0]["ports"] == [
        {"name": "custom", "containerPort": 23456, "protocol": "TCP"},
        {"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"},
    ]  # the original compares names only, so the number may repeat
    assert worker(out)["template"]["spec"]["containers"][0]["ports"] == [
        {"name": "pytorchjob-port", "containerPort": 29500, "protocol": "TCP"}]


def test_default_port_goes_to_the_pytorch_container_not_the_sidecar() -> None:
    job = seed()
    cs = master(job)["template"]["spec"]["containers"]
    cs.insert(0, {"name": "sidecar", "image": "busybox"})
    out = admit(job)
    side, main = master(out)["template"]["spec"]["containers"]
    assert "ports" not in side and main["ports"][0]["name"] == "pytorchjob-port"


@pytest.mark.parametrize(
    "elastic, expected",
    [
        ({"minReplicas": 1, "maxReplicas": 5}, (1, 5)),
        ({"maxReplicas": 4}, (4, 4)),
        ({"minReplicas": 2}, (2, 2)),
        ({}, (3, 3)),  # both from Worker.replicas (the master is not counted, issue #2277)
    ],
)
def test_elastic_policy_min_max_defaults(elastic: dict, expected: tuple[int, int]) -> None:
    job = seed()
    job["spec"]["elasticPolicy"] = elastic
    out = admit(job)
    ep = out["spec"]["elasticPolicy"]
    assert (ep["minReplicas"], ep["maxReplicas"]) == expected
    assert out["spec"]["nprocPerNode"] == "auto"


def test_elastic_policy_needs_a_worker() -> None:
    job = seed()
    del job["spec"]["pytorchReplicaSpecs"]["Worker"]
    assert admit(job)  # a Master-only job is fine
    job["spec"]["elasticPolicy"] = {"maxReplicas": 2}
    assert denied(job).message == (PT_WEBHOOK + "spec.pytorchReplicaSpecs[Worker]: Required value: "
                                   "must be configured if elastic policy is used")


def test_deprecated_nproc_per_node_warns_and_conflicts_with_the_new_field() -> None:
    job = seed()
    job["spec"]["elasticPolicy"] = {"nProcPerNode": 2}
    warnings: list[str] = []
    out = admit(job, warnings=warnings)
    assert warnings == ["spec.elasticPolicy.nProcPerNode is deprecated, use spec.nprocPerNode instead"]
    assert "nprocPerNode" not in out["spec"]  # not defaulted when the deprecated field is set
    job["spec"]["nprocPerNode"] = "4"
    assert denied(job).message == (PT_WEBHOOK + "spec.elasticPolicy.nProcPerNode: Forbidden: "
                                   "must not be used with spec.nprocPerNode")


def test_managed_by_supported_values_are_listed_sorted() -> None:
    job = seed()
    job["spec"]["runPolicy"]["managedBy"] = "me"
    assert denied(job).message == (PT_WEBHOOK + 'spec.runPolicy.managedBy: Unsupported value: "me": supported values: '
                                   '"kubeflow.org/training-operator", "kueue.x-k8s.io/multikueue"')
    job["spec"]["runPolicy"]["managedBy"] = "kueue.x-k8s.io/multikueue"
    assert admit(job)["spec"]["runPolicy"]["managedBy"] == "kueue.x-k8s.io/multikueue"


@pytest.mark.parametrize("make", [seed, tfjob])
def test_managed_by_is_immutable_for_every_kind(make) -> None:
    # The original's PyTorch webhook compared the new object with itself (never enforced): fixed.
    old = admit(make())
    new = copy.deepcopy(old)
    new["spec"]["runPolicy"]["managedBy"] = "kubeflow.org/training-operator"
    e = denied(new, old)
    assert str(e.errors[0]) == 'spec.runPolicy.managedBy: Invalid value: "kubeflow.org/training-operator": field is immutable'
    old2 = admit(new)
    back = copy.deepcopy(old2)
    del back["spec"]["runPolicy"]["managedBy"]
    assert str(denied(back, old2).errors[0]) == "spec.runPolicy.managedBy: Invalid value: null: field is immutable"
    assert admit(old2, old2) == old2  # unchanged is fine


def test_scheduling_policy_queue_is_immutable_once_set() -> None:
    old = seed()
    old["spec"]["runPolicy"]["schedulingPolicy"] = {"queue": "team-a", "minAvailable": 4}
    old = admit(old)
    new = copy.deepcopy(old)
    new["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = "team-b"
    e = invalid(new, old)
    assert e.message == ('PyTorchJob.kubeflow.org "pytest" is invalid: spec.runPolicy.schedulingPolicy.queue: '
                         'Invalid value: "string": spec.runPolicy.schedulingPolicy.queue is immutable')
    new["spec"]["runPolicy"]["schedulingPolicy"]["queue"] = "team-a"
    new["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = 2
    assert admit(new, old)["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == 2
    # CEL transition rules only run when old and new both have the field.
    unset = admit(seed())
    assert admit(old, unset)["spec"]["runPolicy"]["schedulingPolicy"]["queue"] == "team-a"


# --- strict decoding and schema ------------------------------------------------------------

def test_unknown_fields_are_a_strict_decoding_error_like_the_apiserver() -> None:
    job = seed()
    worker(job)["template"]["spec"]["containers"][0]["foo"] = "bar"
    job["spec"]["runPolicy"]["backoffLimits"] = 3
    job["spec"]["unknownField"] = "x"
    with pytest.raises(StrictDecodingError) as e:
        admit(job)
    # docs/REFERENCE.md golden 29, word for word
    assert e.value.message == (
        'PyTorchJob in version "v1" cannot be handled as a PyTorchJob: strict decoding error: '
        'unknown field "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].foo", '
        'unknown field "spec.runPolicy.backoffLimits", unknown field "spec.unknownField"')
    assert e.value.code == 400 and e.value.reason == "BadRequest"
    assert isinstance(e.value, Invalid)
    assert [f.path for f in e.value.errors] == [
        "spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].foo",
        "spec.runPolicy.backoffLimits", "spec.unknownField"]


def test_a_typo_names_its_path() -> None:
    job = seed()
    c = master(job)["template"]["spec"]["containers"][0]
    c["imagee"] = c.pop("image")
    with pytest.raises(StrictDecodingError) as e:
        admit(job)
    [err] = e.value.errors
    assert err.path == "spec.pytorchReplicaSpecs[Master].template.spec.containers[0].imagee"
    assert err.detail == 'unknown field "spec.pytorchReplicaSpecs.Master.template.spec.containers[0].imagee"'


def test_python_field_names_are_not_wire_names() -> None:
    job = seed()
    job["spec"]["runPolicy"]["clean_pod_policy"] = "All"
    with pytest.raises(StrictDecodingError, match='unknown field "spec.runPolicy.clean_pod_policy"'):
        admit(job)


def test_wrong_type_names_the_path_and_the_expected_type() -> None:
    job = seed()
    master(job)["replicas"] = "1"
    e = invalid(job)
    assert e.message == ('PyTorchJob.kubeflow.org "pytest" is invalid: spec.pytorchReplicaSpecs[Master].replicas: '
                         'Invalid value: "string": spec.pytorchReplicaSpecs[Master].replicas in body must be of type '
                         'integer: "string"')
    job = seed()
    job["spec"]["runPolicy"] = ["backoffLimit", 3]
    assert str(invalid(job).errors[0]) == ('spec.runPolicy: Invalid value: "array": spec.runPolicy in body must be '
                                           'of type object: "array"')


def test_enums_list_their_supported_values() -> None:
    job = seed()
    worker(job)["restartPolicy"] = "Sometimes"
    job["spec"]["runPolicy"]["cleanPodPolicy"] = "none"
    e = invalid(job)
    assert [str(f) for f in e.errors] == [
        'spec.runPolicy.cleanPodPolicy: Unsupported value: "none": supported values: "All", "Running", "None"',
        'spec.pytorchReplicaSpecs[Worker].restartPolicy: Unsupported value: "Sometimes": supported values: '
        '"Always", "OnFailure", "Never", "ExitCode"',
    ]


def test_quantities_are_checked_and_kept_as_written() -> None:
    job = seed()
    lim = master(job)["template"]["spec"]["containers"][0]["resources"]["limits"]
    lim.update({"cpu": 1, "memory": "1.5Gi", "nvidia.com/gpu": 0.5})
    out = admit(job)
    assert master(out)["template"]["spec"]["containers"][0]["resources"]["limits"] == {
        "cpu": 1, "memory": "1.5Gi", "nvidia.com/gpu": 0.5}
    lim["cpu"] = "one"
    e = invalid(job)
    assert str(e.errors[0]).startswith(
        'spec.pytorchReplicaSpecs[Master].template.spec.containers[0].resources.limits[cpu]: Invalid value: "one": '
        "quantities must match the regular expression")


def test_int32_fields_are_bounded() -> None:
    job = seed()
    worker(job)["replicas"] = 10**30
    assert str(invalid(job).errors[0]) == (
        "spec.pytorchReplicaSpecs[Worker].replicas: Invalid value: 1000000000000000000000000000000: "
        "spec.pytorchReplicaSpecs[Worker].replicas in body should be less than or equal to 2147483647")


# --- other kinds ----------------------------------------------------------------------------

def pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "main", "image": "busybox"}], **spec}}


def test_pod_defaults_are_minimal() -> None:
    p = pod()
    p["spec"]["containers"][0]["ports"] = [{"containerPort": 8080}]
    out = admit(p)
    assert out["spec"] == {"containers": [{"name": "main", "image": "busybox",
                                           "ports": [{"containerPort": 8080, "protocol": "TCP"}]}],
                           "restartPolicy": "Always", "schedulerName": "default-scheduler",
                           "terminationGracePeriodSeconds": 30}
    assert out["status"] == {"phase": "Pending"}
    assert admit(pod(schedulerName="volcano"))["spec"]["schedulerName"] == "volcano"  # a given name is kept
    running = {**out, "status": {"phase": "Running"}}
    assert admit(running, out)["status"] == {"phase": "Running"}  # status kept as given


def test_pod_with_bad_names_is_refused_like_the_apiserver() -> None:
    # docs/REFERENCE.md golden 53: the same two causes, in the same words
    p = pod()
    p["metadata"]["name"] = "Bad_Name"
    p["spec"]["containers"][0]["name"] = "Pytorch"
    e = invalid(p)
    assert e.message == (
        f'Pod "Bad_Name" is invalid: [metadata.name: Invalid value: "Bad_Name": {SUBDOMAIN}, '
        'spec.containers[0].name: Invalid value: "Pytorch": a lowercase RFC 1123 label must consist of lower case '
        "alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  "
        "or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')]")


def test_pod_spec_rules() -> None:
    p = pod(initContainers=[{"name": "main", "image": "alpine"}], restartPolicy="Sometimes")
    c = p["spec"]["containers"][0]
    c["resources"] = {"limits": {"cpu": "1"}, "requests": {"cpu": "2", "memory": "-1"}}
    c["env"] = [{"name": "BAD=NAME", "value": "x"}]
    c["command"] = ["sh", "-c", "echo \x00"]
    c["ports"] = [{"containerPort": 0}]
    got = {(f.path, f.kind) for f in invalid(p).errors}
    assert got >= {
        ("spec.containers[0].name", "Duplicate"),
        ("spec.containers[0].resources.requests[cpu]", "Invalid"),
        ("spec.containers[0].resources.requests[memory]", "Invalid"),
        ("spec.containers[0].env[0].name", "Invalid"),
        ("spec.containers[0].command[2]", "Invalid"),
        ("spec.containers[0].ports[0].containerPort", "Invalid"),
        ("spec.restartPolicy", "NotSupported"),
    }
    assert str(invalid(pod(containers=[])).errors[0]) == "spec.containers: Required value"


def test_service_defaults_and_rules() -> None:
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "pytest-master-0"},
           "spec": {"clusterIP": "None", "selector": {"a": "b"}, "ports": [{"name": "pytorchjob-port", "port": 23456}]}}
    out = admit(svc)
    assert out["spec"]["type"] == "ClusterIP"
    assert out["spec"]["ports"] == [{"name": "pytorchjob-port", "port": 23456, "protocol": "TCP", "targetPort": 23456}]
    svc["metadata"]["name"] = "1-svc"
    assert f'metadata.name: Invalid value: "1-svc": {DNS1035}' in invalid(svc).message
    svc["metadata"]["name"] = "s"
    svc["spec"]["ports"].append({"port": 70000})
    paths = [str(f) for f in invalid(svc).errors]
    assert paths == ["spec.ports[1].name: Required value",
                     "spec.ports[1].port: Invalid value: 70000: must be between 1 and 65535, inclusive"]


def queue(name: str = "default", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
            "metadata": {"name": name, "namespace": "default"}, "spec": spec}


def test_queue_defaults_and_cluster_scope() -> None:
    out = admit(queue())
    assert out["spec"] == {"weight": 1, "reclaimable": True, "dequeueStrategy": "traverse", "parent": "root"}
    assert "namespace" not in out["metadata"]  # cluster-scoped: cleared as the apiserver does
    assert "parent" not in admit(queue("root"))["spec"]
    assert admit(queue(reclaimable=False, weight=3))["spec"]["reclaimable"] is False


@pytest.mark.parametrize("weight, message", [
    (0, "spec.weight: Invalid value: 0: spec.weight in body should be greater than or equal to 1"),
    (65536, "spec.weight: Invalid value: 65536: spec.weight in body should be less than or equal to 65535"),
])
def test_queue_weight_range(weight: int, message: str) -> None:
    e = invalid(queue(weight=weight))
    assert e.message == f'Queue.scheduling.volcano.sh "default" is invalid: {message}'


def test_queue_capability_quantities() -> None:
    out = admit(queue(capability={"cpu": 2, "memory": "4Gi"}))
    assert out["spec"]["capability"] == {"cpu": 2, "memory": "4Gi"}
    assert invalid(queue(capability={"cpu": "two"})).errors[0].path == "spec.capability[cpu]"


def test_podgroup_defaults_and_min_member() -> None:
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "pytest"},
          "spec": {"minMember": 4, "minResources": {"cpu": "4", "memory": "400Mi"}}}
    out = admit(pg)
    assert out["spec"]["queue"] == "default" and out["metadata"]["namespace"] == "default"
    pg["spec"]["minMember"] = -1
    assert str(invalid(pg).errors[0]) == ("spec.minMember: Invalid value: -1: spec.minMember in body should be "
                                          "greater than or equal to 0")


def test_node_event_namespace_are_admitted() -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "las1", "namespace": "x"},
            "status": {"capacity": {"cpu": "16", "memory": "64Gi", "pods": "110"}}}
    out = admit(node)
    assert "namespace" not in out["metadata"] and out["status"]["capacity"]["cpu"] == "16"
    ev = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "pytest-worker-0.17a3"},
          "involvedObject": {"kind": "Pod", "name": "pytest-worker-0", "namespace": "default"},
          "reason": "Scheduled", "message": "ok", "type": "Normal", "count": 1,
          "source": {"component": "volcano"}}
    assert admit(ev)["reason"] == "Scheduled"
    ns = admit({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    assert ns["status"] == {"phase": "Active"}


def test_metadata_rules_apply_to_every_kind() -> None:
    job = seed()
    job["metadata"]["labels"] = {"ok": "fine", "bad key!": "x", "k": "-nope"}
    job["metadata"]["namespace"] = "Team_A"
    paths = [(f.path, f.value) for f in invalid(job).errors]
    assert paths == [("metadata.namespace", "Team_A"), ("metadata.labels", "bad key!"), ("metadata.labels", "-nope")]
    job = seed()
    del job["metadata"]["name"]
    assert str(invalid(job).errors[0]) == "metadata.name: Required value: name or generateName is required"
    job["metadata"]["generateName"] = "pytest-"  # the store names it; the prefix must fit
    assert admit(job)["metadata"]["generateName"] == "pytest-"


# --- refusals that are not about fields, and hostile input -------------------------------

@pytest.mark.parametrize("obj, fragment", [
    (None, "must be a mapping"),
    ([seed()], "must be a mapping"),
    ({"apiVersion": "v1", "metadata": {}}, "Object 'Kind' is missing"),
    ({"kind": "Pod"}, "Object 'apiVersion' is missing"),
    ({"apiVersion": "v1", "kind": "Deployment"}, 'no matches for kind "Deployment" in version "v1"'),
    ({"apiVersion": "kubeflow.org/v2", "kind": "PyTorchJob"}, 'no matches for kind "PyTorchJob" in version "kubeflow.org/v2"'),
    ({"apiVersion": "v1", "kind": 7}, "must be a string"),
])
def test_objects_that_are_not_resources_are_bad_requests(obj: Any, fragment: str) -> None:
    with pytest.raises(BadRequest) as e:
        admit(obj)
    assert fragment in e.value.message and e.value.code == 400


def _deep(n: int) -> dict:
    d: dict = {}
    cur = d
    for _ in range(n):
        cur["a"] = {}
        cur = cur["a"]
    return d


def _loop() -> dict:
    d: dict = {"name": "x"}
    d["self"] = d
    return d


@pytest.mark.parametrize("mutate", [
    lambda j: j.update(spec=None),
    lambda j: j.update(spec=[1, 2]),
    lambda j: j.update(spec="x"),
    lambda j: j.update(metadata=None),
    lambda j: j.update(metadata=[]),
    lambda j: master(j).update(replicas=10**30),
    lambda j: master(j).update(replicas=10**5000),
    lambda j: master(j).update(replicas=float("nan")),
    lambda j: master(j).update(replicas=True),
    lambda j: master(j).update(template=None),
    lambda j: master(j).update(template={"spec": {"containers": None}}),
    lambda j: master(j).update(template={"spec": {"containers": [None]}}),
    lambda j: master(j).update(template={"spec": {"containers": {"name": "pytorch"}}}),
    lambda j: j["spec"].update(pytorchReplicaSpecs=[1]),
    lambda j: j["spec"].update(pytorchReplicaSpecs={"Master": None}),
    lambda j: j["spec"].update(pytorchReplicaSpecs={"Master": []}),
    lambda j: j["spec"]["pytorchReplicaSpecs"].update({1: {}}),
    lambda j: j["spec"]["pytorchReplicaSpecs"].update({(1, 2): {}}),
    lambda j: j["metadata"].update(labels={True: 1}),
    lambda j: j["metadata"].update(name=b"bytes"),
    lambda j: j["metadata"].update(annotations={"a": "x" * 300_000}),
    lambda j: j["spec"].update(elasticPolicy=_deep(10_000)),
    lambda j: master(j)["template"]["spec"].update(affinity=_deep(200)),
    lambda j: master(j)["template"]["spec"].update(affinity=_loop()),
    lambda j: j["spec"].update(runPolicy={"managedBy": "x" * 100_000}),
    lambda j: j["spec"].update(runPolicy={"schedulingPolicy": {"minResources": {"cpu": [1]}}}),
    lambda j: j["spec"].update(elasticPolicy={"nProcPerNode": None, "maxReplicas": -5}),
    lambda j: j.update(status=[1]),
    lambda j: j.update(status={"conditions": [{"type": object()}]}),
])
def test_hostile_input_only_ever_raises_api_errors(mutate) -> None:
    job = seed()
    mutate(job)
    try:
        out = admit(job)
    except ApiError as e:
        assert 400 <= e.code < 500, e.message
        assert len(e.message) < 20_000
    else:
        assert isinstance(out, dict)


def test_hostile_old_object_is_tolerated() -> None:
    for old in ([], {"spec": []}, {"spec": {"runPolicy": "x"}}, {"spec": {"runPolicy": {"schedulingPolicy": 3}}}):
        assert admit(seed(), old)["kind"] == "PyTorchJob"


def test_random_mutations_never_escape_as_anything_but_api_errors() -> None:
    # A small, seeded fuzz over every kind (the hostile-input target runs a much larger one).
    bases = [seed(), tfjob(), pod(), queue(), {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "s"},
                                             "spec": {"ports": [{"port": 80}]}}]
    junk = [None, [], {}, 0, -1, 10**40, "", "x", "Always", "1Gi", True, 0.5, float("inf"), {"k": [None]}, [{}], b"b"]
    rnd = random.Random(1234)

    def paths(o: Any, p: tuple = ()):  # every (container, key) in the object
        if isinstance(o, dict):
            for k, v in o.items():
                yield (o, k)
                yield from paths(v)
        elif isinstance(o, list):
            for i, v in enumerate(o):
                yield (o, i)
                yield from paths(v)

    accepted = refused = 0
    for _ in range(600):
        obj = copy.deepcopy(rnd.choice(bases))
        for _ in range(rnd.randint(1, 3)):
            holder, key = rnd.choice(list(paths(obj)))
            holder[key] = copy.deepcopy(rnd.choice(junk))
        try:
            admit(obj)
            accepted += 1
        except ApiError as e:
            assert e.code < 500, e.message
            refused += 1
    assert refused > 0 and accepted > 0
