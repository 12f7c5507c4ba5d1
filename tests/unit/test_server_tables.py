"""Server-side Tables against the real apiserver's Table bodies (k8s-golden
docs/REFERENCE.md golden 13, 19, 20, 23, 26, 38, 42, 43, 52, 66, 69). The objects are those
exchanges' bodies trimmed to what the printers read; ``now`` is the response's
Date header."""
from __future__ import annotations

import copy
from datetime import datetime, timezone

import pytest

from phalanx.server.tables import (
    CRD_COLUMNS,
    PrinterColumn,
    accepts_table,
    column_definitions,
    crd_cell,
    go_print,
    json_path_values,
    negotiate_table,
    parse_accept,
    parse_include_object,
    partial_object_metadata,
    table_for,
    table_watch_event,
)


def T(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(timezone.utc)


KUBECTL_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,"
                  "application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json")
NAME_DESC = ("Name must be unique within a namespace. Is required when creating resources, although some resources "
             "may allow a client to request the generation of an appropriate name automatically. Name is primarily "
             "intended for creation idempotence and configuration definition. Cannot be updated. More info: "
             "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names")


def crd_desc(path: str) -> str:
    return f"Custom resource definition column (in JSONPath format): {path}"


def shape(cols: list[dict]) -> list[tuple]:
    return [(c["name"], c["type"], c["format"], c["priority"]) for c in cols]


# --------------------------------------------------------------------------
# Content negotiation
# --------------------------------------------------------------------------


@pytest.mark.parametrize("header, version", [
    (KUBECTL_ACCEPT, "v1"),
    ("application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json", "v1beta1"),
    ("application/json; as=Table; g=meta.k8s.io; v=v1", "v1"),  # spaces and any parameter order
    ('application/json;as="Table";v="v1";g="meta.k8s.io"', "v1"),  # quoted values
    ("application/json;q=0.5,application/json;as=Table;v=v1;g=meta.k8s.io", "v1"),  # q decides
    ("application/json", None),
    ("application/json, */*", None),
    ("*/*", None),
    ("", None),
    (None, None),
    ("application/json,application/json;as=Table;v=v1;g=meta.k8s.io", None),  # first acceptable clause wins
    ("application/json;as=Table;v=v1;g=meta.k8s.io;q=0,application/json", None),  # refused by q=0
    ("application/json;as=Table;v=v2;g=meta.k8s.io,application/json", None),  # unknown Table version skipped
    ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json", None),
    ("application/vnd.kubernetes.protobuf;as=Table;v=v1;g=meta.k8s.io,application/json", None),
    ("application/yaml,application/json;as=Table;v=v1;g=meta.k8s.io", "v1"),  # a type we do not produce is skipped
    ("application/json;as=table;v=v1;g=meta.k8s.io", None),  # values are case-sensitive, as in apimachinery
    ("garbage,,;;=,application/json;as=Table;v=v1;g=meta.k8s.io", "v1"),  # malformed clauses never fatal
    ("application/json;q=abc;as=Table;v=v1;g=meta.k8s.io", None),  # a bad q is 0
])
def test_negotiate_table(header, version):
    assert negotiate_table(header) == version
    assert accepts_table(header) is (version is not None)


def test_parse_accept_orders_by_q_then_specificity_and_keeps_params():
    ranges = parse_accept('text/*;q=0.9, */*;q=0.9, application/json;as=Table;x="a,b";q=0.9, text/plain;q=1')
    assert [(r.type, r.subtype) for r in ranges] == [
        ("text", "plain"), ("application", "json"), ("text", "*"), ("*", "*")]
    assert ranges[1].params == {"as": "Table", "x": "a,b"}  # a quoted comma stays inside its clause
    assert ranges[1].q == 0.9


def test_include_object_parameter():
    assert parse_include_object(None) == "Metadata"
    assert parse_include_object("") == "Metadata"
    for v in ("Metadata", "Object", "None"):
        assert parse_include_object(v) == v
    with pytest.raises(ValueError, match='includeObject: Unsupported value: "metadata"'):
        parse_include_object("metadata")


# --------------------------------------------------------------------------
# Custom resources
# --------------------------------------------------------------------------

LAST_APPLIED = '{"apiVersion":"kubeflow.org/v1","kind":"PyTorchJob"}\n'


def pytorchjob(rv: str, conditions: list[str] | None = None) -> dict:
    job = {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
        "metadata": {"annotations": {"kubectl.kubernetes.io/last-applied-configuration": LAST_APPLIED},
                     "creationTimestamp": "2026-11-29T07:12:41Z", "generation": 1, "name": "pytest",
                     "namespace": "default", "resourceVersion": rv, "uid": "3b7da75f-3bc7-4bb3-a0a5-7a8088e6d42d"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}}, "runPolicy": {"suspend": False}},
    }
    if conditions is not None:
        job["status"] = {"conditions": [{"type": c, "status": "True"} for c in conditions]}
    return job


JOB_COLUMNS = [
    {"name": "Name", "type": "string", "format": "name", "description": NAME_DESC, "priority": 0},
    {"name": "State", "type": "string", "format": "", "description": crd_desc(".status.conditions[-1:].type"),
     "priority": 0},
    {"name": "Age", "type": "date", "format": "", "description": crd_desc(".metadata.creationTimestamp"),
     "priority": 0},
]


def test_pytorchjob_single_and_list_tables_like_goldens_19_20_23():
    before = pytorchjob("296")
    table = table_for("PyTorchJob", [before], T("2026-11-29T07:12:41Z"))  # docs/REFERENCE.md golden 19: GET one object
    assert table == {
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {"resourceVersion": "296"},
        "columnDefinitions": JOB_COLUMNS,
        "rows": [{"cells": ["pytest", None, "0s"], "object": {
            "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
            "metadata": {"name": "pytest", "namespace": "default", "uid": "3b7da75f-3bc7-4bb3-a0a5-7a8088e6d42d",
                         "resourceVersion": "296", "generation": 1, "creationTimestamp": "2026-11-29T07:12:41Z",
                         "annotations": {"kubectl.kubernetes.io/last-applied-configuration": LAST_APPLIED}}}}],
    }
    # PartialObjectMetadata keeps ObjectMeta's field order (the goldens' key order), not the object's.
    assert list(table["rows"][0]["object"]["metadata"]) == [
        "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "annotations"]
    running = table_for("PyTorchJob", [pytorchjob("300", ["Created", "Running"])], T("2026-11-29T07:12:48Z"),
                        list_meta={"resourceVersion": "300", "continue": ""})  # docs/REFERENCE.md golden 23
    assert running["metadata"] == {"resourceVersion": "300"}
    assert running["rows"][0]["cells"] == ["pytest", "Running", "7s"]
    tf = table_for("TFJob", [], T("2026-11-29T07:12:48Z"), list_meta={"resourceVersion": "9"})
    assert tf["columnDefinitions"] == JOB_COLUMNS and tf["rows"] == []


def test_pytorchjob_watch_events_like_golden_26():
    ev = table_watch_event("MODIFIED", "PyTorchJob", pytorchjob("303", ["Created", "Running", "Running"]),
                           T("2026-11-29T07:12:59Z"))
    assert ev["type"] == "MODIFIED"
    assert ev["object"]["metadata"] == {"resourceVersion": "303"}
    assert ev["object"]["columnDefinitions"] == JOB_COLUMNS  # repeated in every event, as the apiserver does
    assert [r["cells"] for r in ev["object"]["rows"]] == [["pytest", "Running", "18s"]]
    done = table_watch_event("MODIFIED", "PyTorchJob", pytorchjob("304", ["Created", "Running", "Succeeded"]),
                             T("2026-11-29T07:13:02Z"))
    assert done["object"]["rows"][0]["cells"] == ["pytest", "Succeeded", "21s"]
    gone = table_watch_event("DELETED", "PyTorchJob", pytorchjob("305"), T("2026-11-29T07:13:02Z"))
    assert gone["type"] == "DELETED" and gone["object"]["rows"][0]["cells"][0] == "pytest"


def test_watch_error_keeps_its_status_and_bookmark_is_an_empty_table():
    status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
              "message": "too old resource version: 1 (254)", "reason": "Expired", "code": 410}
    assert table_watch_event("ERROR", "PyTorchJob", status, T("2026-11-29T07:13:02Z")) == {
        "type": "ERROR", "object": status}
    bm = table_watch_event("BOOKMARK", "Pod", {"kind": "Pod", "apiVersion": "v1",
                                                "metadata": {"resourceVersion": "77"}}, T("2026-11-29T07:13:02Z"))
    assert bm == {"type": "BOOKMARK", "object": {"kind": "Table", "apiVersion": "meta.k8s.io/v1",
                                                 "metadata": {"resourceVersion": "77"},
                                                 "columnDefinitions": [], "rows": []}}


PODGROUP_COLUMNS = [("Name", "string", "name", 0), ("STATUS", "string", "", 0), ("minMember", "integer", "", 0),
                    ("RUNNINGS", "integer", "", 0), ("AGE", "date", "", 0), ("QUEUE", "string", "", 1)]


def podgroup(status: dict | None = None) -> dict:
    pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
          "metadata": {"name": "pytest", "namespace": "default", "resourceVersion": "338",
                       "creationTimestamp": "2026-11-29T07:14:36Z"},
          "spec": {"minMember": 4, "minResources": {"cpu": "4", "memory": "400Mi"}, "queue": "default"}}
    if status is not None:
        pg["status"] = status
    return pg


def test_podgroup_tables_like_goldens_38_42_69():
    cols = column_definitions("PodGroup")
    assert shape(cols) == PODGROUP_COLUMNS
    assert [c["description"] for c in cols[1:]] == [crd_desc(p) for p in (
        ".status.phase", ".spec.minMember", ".status.running", ".metadata.creationTimestamp", ".spec.queue")]
    pending = table_for("PodGroup", [podgroup()], T("2026-11-29T07:14:36Z"), list_meta={"resourceVersion": "338"})
    assert pending["rows"][0]["cells"] == ["pytest", None, 4, None, "0s", "default"]  # JSON types kept
    running = table_for("PodGroup", [podgroup({"phase": "Running", "running": 4})], T("2026-11-29T07:14:41Z"))
    assert running["rows"][0]["cells"] == ["pytest", "Running", 4, 4, "5s", "default"]
    empty = table_for("PodGroup", [], T("2026-11-29T07:16:48Z"), list_meta={"resourceVersion": "404"})
    assert empty["rows"] == [] and empty["metadata"] == {"resourceVersion": "404"} and shape(
        empty["columnDefinitions"]) == PODGROUP_COLUMNS


QUEUE_WIDE = [("WEIGHT", "string", "", 1), ("RECLAIMABLE", "string", "", 1), ("GUARANTEE", "string", "", 1),
              ("DESERVED", "string", "", 1), ("ALLOCATED", "string", "", 1), ("RECLAIMING", "string", "", 1)]


def test_queue_table_has_no_age_column_like_golden_43():
    """Golden 43's priority-0 columns (what a plain `get` prints); the priority-1 columns after
    them are Phalanx's, only `get -o wide` prints them."""
    q = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
         "metadata": {"name": "default", "resourceVersion": "341", "creationTimestamp": "2026-11-29T07:12:26Z"},
         "spec": {"weight": 1, "reclaimable": True}}
    t = table_for("Queue", [q], T("2026-11-29T07:14:42Z"), list_meta={"resourceVersion": "341"})
    assert shape(t["columnDefinitions"]) == [("Name", "string", "name", 0), ("PARENT", "string", "", 0),
                                             *QUEUE_WIDE]
    assert t["rows"][0]["cells"][:2] == ["default", None]
    q["spec"]["parent"] = "root"
    assert table_for("Queue", [q], T("2026-11-29T07:14:42Z"))["rows"][0]["cells"][:2] == ["default", "root"]


def queue(**over) -> dict:
    q = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
         "metadata": {"name": "team-a", "resourceVersion": "400"}, "spec": {"weight": 2, "parent": "root"}}
    for key, value in over.items():
        q[key] = value
    return q


def test_queue_wide_columns_show_its_share_compactly():
    q = queue(metadata={"name": "team-a", "annotations": {
        "phalanx.dev/deserved": '{"nvidia.com/gpu":"1","memory":"8Gi","cpu":"4","ephemeral-storage":"1Gi"}',
        "phalanx.dev/reclaiming": "true"}},
        spec={"weight": 2, "parent": "root", "reclaimable": False,
              "guarantee": {"resource": {"memory": "2Gi", "cpu": "500m"}}},
        status={"allocated": {"cpu": "6", "memory": "12Gi", "pods": "3"}})
    cells = table_for("Queue", [q], T("2026-11-29T07:14:42Z"))["rows"][0]["cells"]
    assert cells == ["team-a", "root", "2", "false", "cpu=500m,memory=2Gi",
                     "cpu=4,memory=8Gi,ephemeral-storage=1Gi,nvidia.com/gpu=1", "cpu=6,memory=12Gi,pods=3", "true"]


def test_queue_wide_columns_print_none_when_unset_and_reclaimable_defaults_to_true():
    bare = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"}}
    assert table_for("Queue", [bare], T("2026-11-29T07:14:42Z"))["rows"][0]["cells"] == [
        "q", None, "<none>", "true", "<none>", "<none>", "<none>", "false"]
    empty = queue(spec={"weight": 1, "guarantee": {}}, status={"allocated": {}})
    assert table_for("Queue", [empty], T("2026-11-29T07:14:42Z"))["rows"][0]["cells"][2:] == [
        "1", "true", "<none>", "<none>", "<none>", "false"]


@pytest.mark.parametrize("annotation, cell", [
    ('{"cpu":"4","memory":"8Gi"}', "cpu=4,memory=8Gi"),
    ('{"cpu":4}', "cpu=4"),  # a number as Go prints it
    ("{}", "<none>"),
    ("", "<none>"),
    ("not json", "not json"),  # shown as it is, never a crash
    ('["cpu"]', '["cpu"]'),
])
def test_queue_deserved_cell_reads_the_json_annotation(annotation, cell):
    q = queue(metadata={"name": "team-a", "annotations": {"phalanx.dev/deserved": annotation}})
    assert table_for("Queue", [q], T("2026-11-29T07:14:42Z"))["rows"][0]["cells"][5] == cell


def test_queue_reclaiming_cell_is_the_annotation_absent_meaning_false():
    for value, cell in (("true", "true"), ("false", "false"), (None, "false")):
        annotations = {} if value is None else {"phalanx.dev/reclaiming": value}
        q = queue(metadata={"name": "team-a", "annotations": annotations})
        assert table_for("Queue", [q], T("2026-11-29T07:14:42Z"))["rows"][0]["cells"][7] == cell


@pytest.mark.parametrize("typ, value, cell", [
    ("string", "Running", "Running"),
    ("string", 4, "4"),
    ("string", 4.5, "4.5"),
    ("string", True, "true"),
    ("string", {"b": 1, "a": [1, "x"]}, "map[a:[1 x] b:1]"),
    ("string", None, None),
    ("integer", 4, 4),
    ("integer", 4.9, 4),
    ("integer", "4", None),
    ("integer", True, None),
    ("number", 4, 4.0),
    ("number", "4", None),
    ("boolean", False, False),
    ("boolean", "true", None),
    ("date", "2026-11-29T07:10:00Z", "2m"),
    ("date", "yesterday", "<invalid>"),
    ("date", 5, None),
    ("unknown-type", "x", None),
])
def test_crd_cell_types_follow_the_apiserver(typ, value, cell):
    col = PrinterColumn("C", typ, ".spec.v")
    assert crd_cell(col, {"spec": {"v": value}}, T("2026-11-29T07:12:00Z")) == cell
    assert crd_cell(col, {"spec": {}}, T("2026-11-29T07:12:00Z")) is None  # no value: null cell


def test_json_path_subset():
    obj = {"status": {"conditions": [{"type": "A"}, {"type": "B"}, {"type": "C"}]}, "spec": {"x-y": 1}}
    assert json_path_values(obj, ".status.conditions[-1:].type") == ["C"]
    assert json_path_values(obj, ".status.conditions[0].type") == ["A"]
    assert json_path_values(obj, ".status.conditions[:2].type") == ["A", "B"]
    assert json_path_values(obj, ".status.conditions[7].type") == []
    assert json_path_values(obj, ".status.conditions[-1:].missing") == []
    assert json_path_values({"status": {"conditions": []}}, ".status.conditions[-1:].type") == []
    assert json_path_values(obj, ".spec.x-y") == [1]
    assert json_path_values(obj, "status") == [] and json_path_values(obj, ".status[?(@.x)]") == []
    assert json_path_values({"spec": "not a map"}, ".spec.v") == []


def test_go_print_matches_fmt_of_decoded_json():
    assert go_print([{"a": None}, 1.0, 1e21]) == "[map[a:<nil>] 1 1e+21]"


def test_every_registered_crd_column_mirrors_the_crds():
    assert [c.name for c in CRD_COLUMNS["PyTorchJob"]] == ["State", "Age"]
    assert CRD_COLUMNS["TFJob"] == CRD_COLUMNS["PyTorchJob"]
    unknown = column_definitions("SomethingNew")  # no printer: a CRD's default Name + Age
    assert shape(unknown) == [("Name", "string", "name", 0), ("Age", "date", "", 0)]
    t = table_for("SomethingNew", [{"metadata": {"name": "x", "creationTimestamp": "2026-11-29T07:00:00Z"}}],
                  T("2026-11-29T07:05:00Z"))
    assert t["rows"][0]["cells"] == ["x", "5m"]


# --------------------------------------------------------------------------
# Built-in kinds
# --------------------------------------------------------------------------


def cond(**kv: str) -> list[dict]:
    return [{"type": k, "status": v} for k, v in kv.items()]


def pod(name: str, created: str, status: dict, init: bool = True, deleting: str | None = None) -> dict:
    md: dict = {"name": name, "namespace": "default", "resourceVersion": "360", "creationTimestamp": created,
                "labels": {"training.kubeflow.org/job-name": "pytest"}}
    if deleting:
        md["deletionTimestamp"] = deleting
        md["deletionGracePeriodSeconds"] = 30
    spec: dict = {"containers": [{"name": "pytorch", "image": "busybox:1.37.0-glibc"}], "nodeName": "las1"}
    if init:
        spec["initContainers"] = [{"name": "init-pytorch", "image": "alpine:3.10"}]
    return {"kind": "Pod", "apiVersion": "v1", "metadata": md, "spec": spec, "status": status}


INIT_DONE = {"name": "init-pytorch", "ready": True, "restartCount": 0,
             "state": {"terminated": {"exitCode": 0, "reason": "Completed", "finishedAt": "2026-11-29T07:14:44Z"}}}


def pods() -> list[dict]:
    master = pod("pytest-master-0", "2026-11-29T07:15:28Z", {
        "phase": "Succeeded", "podIP": "127.0.1.4", "podIPs": [{"ip": "127.0.1.4"}],
        "conditions": cond(Initialized="True", Ready="False", ContainersReady="False", PodScheduled="True"),
        "containerStatuses": [{"name": "pytorch", "ready": False, "restartCount": 0, "state": {"terminated": {
            "exitCode": 0, "reason": "Completed", "finishedAt": "2026-11-29T07:15:26Z"}}}]}, init=False)
    worker0 = pod("pytest-worker-0", "2026-11-29T07:15:09Z", {
        "phase": "Running", "podIP": "127.0.1.5", "podIPs": [{"ip": "127.0.1.5"}],
        "conditions": cond(Initialized="True", Ready="True", ContainersReady="True", PodScheduled="True"),
        "initContainerStatuses": [INIT_DONE],
        "containerStatuses": [{"name": "pytorch", "ready": True, "restartCount": 0, "started": True,
                               "state": {"running": {"startedAt": "2026-11-29T07:14:45Z"}}}]})
    worker1 = pod("pytest-worker-1", "2026-11-29T07:15:28Z", {
        "phase": "Running", "podIP": "127.0.1.6", "podIPs": [{"ip": "127.0.1.6"}],
        "conditions": cond(Initialized="True", Ready="False", ContainersReady="False", PodScheduled="True"),
        "initContainerStatuses": [INIT_DONE],
        "containerStatuses": [{"name": "pytorch", "ready": False, "restartCount": 2,
                               "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                               "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                                                            "finishedAt": "2026-11-29T07:15:21Z"}}}]})
    worker2 = pod("pytest-worker-2", "2026-11-29T07:15:29Z", {
        "phase": "Pending", "podIP": "127.0.1.7", "podIPs": [{"ip": "127.0.1.7"}],
        "conditions": cond(Initialized="False", Ready="False", ContainersReady="False", PodScheduled="True"),
        "initContainerStatuses": [{"name": "init-pytorch", "ready": False, "restartCount": 0, "started": True,
                                   "state": {"running": {"startedAt": "2026-11-29T07:14:51Z"}}}],
        "containerStatuses": [{"name": "pytorch", "ready": False, "restartCount": 0,
                               "state": {"waiting": {"reason": "PodInitializing"}}}]})
    return [master, worker0, worker1, worker2]


POD_COLUMNS = [("Name", "string", "name", 0), ("Ready", "string", "", 0), ("Status", "string", "", 0),
               ("Restarts", "string", "", 0), ("Age", "string", "", 0), ("IP", "string", "", 1),
               ("Node", "string", "", 1), ("Nominated Node", "string", "", 1), ("Readiness Gates", "string", "", 1)]


def test_pods_table_like_golden_52():
    t = table_for("Pod", pods(), T("2026-11-29T07:15:32Z"), list_meta={"resourceVersion": "366"})
    assert t["metadata"] == {"resourceVersion": "366"}
    assert shape(t["columnDefinitions"]) == POD_COLUMNS
    assert t["columnDefinitions"][1]["description"] == "The aggregate readiness state of this pod for accepting traffic."
    assert [r["cells"] for r in t["rows"]] == [
        ["pytest-master-0", "0/1", "Completed", "0", "4s", "127.0.1.4", "las1", "<none>", "<none>"],
        ["pytest-worker-0", "1/1", "Running", "0", "23s", "127.0.1.5", "las1", "<none>", "<none>"],
        ["pytest-worker-1", "0/1", "CrashLoopBackOff", "2 (11s ago)", "4s", "127.0.1.6", "las1", "<none>", "<none>"],
        ["pytest-worker-2", "0/1", "Init:0/1", "0", "3s", "127.0.1.7", "las1", "<none>", "<none>"],
    ]
    # Only the finished pod's row carries the Completed row condition; key order cells, conditions, object.
    assert list(t["rows"][0]) == ["cells", "conditions", "object"]
    assert t["rows"][0]["conditions"] == [{"type": "Completed", "status": "True", "reason": "Succeeded",
                                           "message": "The pod has completed successfully."}]
    assert all("conditions" not in r for r in t["rows"][1:])
    failed = copy.deepcopy(pods()[0])
    failed["status"]["phase"] = "Failed"
    assert table_for("Pod", [failed], T("2026-11-29T07:15:32Z"))["rows"][0]["conditions"][0]["reason"] == "Failed"


def test_terminating_pod_like_golden_66():
    p = pods()[2]
    p["metadata"]["deletionTimestamp"] = "2026-11-29T07:17:07Z"
    p["metadata"]["deletionGracePeriodSeconds"] = 30
    t = table_for("Pod", [p], T("2026-11-29T07:16:38Z"))
    assert t["rows"][0]["cells"][:5] == ["pytest-worker-1", "0/1", "Terminating", "2 (77s ago)", "70s"]
    # deletionTimestamp was added last but sits in ObjectMeta's place, before labels
    assert list(t["rows"][0]["object"]["metadata"]) == [
        "name", "namespace", "resourceVersion", "creationTimestamp", "deletionTimestamp",
        "deletionGracePeriodSeconds", "labels"]


def test_include_object_variants():
    p = pods()[1]
    now = T("2026-11-29T07:15:32Z")
    assert table_for("Pod", [p], now, "Object")["rows"][0]["object"] == p
    assert table_for("Pod", [p], now, "None")["rows"][0]["object"] is None
    assert table_for("Pod", [p], now)["rows"][0]["object"] == partial_object_metadata(p)
    with pytest.raises(ValueError):
        table_for("Pod", [p], now, "Everything")


def test_nodes_table_like_golden_13():
    node = {"kind": "Node", "apiVersion": "v1",
            "metadata": {"name": "las1", "resourceVersion": "292", "creationTimestamp": "2026-11-29T07:12:26Z",
                         "labels": {"kubernetes.io/hostname": "las1"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}],
                       "addresses": [{"type": "InternalIP", "address": "127.0.0.1"},
                                     {"type": "Hostname", "address": "las1"}],
                       "nodeInfo": {"kernelVersion": "6.8.0", "osImage": "Ubuntu 24.04 LTS",
                                    "containerRuntimeVersion": "containerd://1.7.24", "kubeletVersion": "v1.36.2",
                                    "architecture": "amd64"}}}
    t = table_for("Node", [node], T("2026-11-29T07:12:26Z"), list_meta={"resourceVersion": "292"})
    assert shape(t["columnDefinitions"]) == [
        ("Name", "string", "name", 0), ("Status", "string", "", 0), ("Roles", "string", "", 0),
        ("Age", "string", "", 0), ("Version", "string", "", 0), ("Internal-IP", "string", "", 1),
        ("External-IP", "string", "", 1), ("OS-Image", "string", "", 1), ("Kernel-Version", "string", "", 1),
        ("Container-Runtime", "string", "", 1)]
    assert t["rows"][0]["cells"] == ["las1", "Ready", "<none>", "0s", "v1.36.2", "127.0.0.1", "<none>",
                                     "Ubuntu 24.04 LTS", "6.8.0 (amd64)", "containerd://1.7.24"]


def test_event_service_namespace_tables():
    now = T("2026-11-29T07:17:00Z")
    ev = {"kind": "Event", "apiVersion": "v1",
          "metadata": {"name": "pytest-worker-0.18b02c9d60ea1a3d", "namespace": "default"},
          "involvedObject": {"kind": "Pod", "name": "pytest-worker-0", "namespace": "default"},
          "reason": "Scheduled", "message": "Successfully assigned default/pytest-worker-0 to las1",
          "source": {"component": "volcano"}, "firstTimestamp": "2026-11-29T07:15:03Z",
          "lastTimestamp": "2026-11-29T07:15:03Z", "count": 1, "type": "Normal"}
    t = table_for("Event", [ev], now)
    assert [c["name"] for c in t["columnDefinitions"] if c["priority"] == 0] == [
        "Last Seen", "Type", "Reason", "Object", "Message"]  # what `kubectl get events` prints
    assert t["rows"][0]["cells"] == ["117s", "Normal", "Scheduled", "pod/pytest-worker-0", "", "volcano",
                                     "Successfully assigned default/pytest-worker-0 to las1", "117s", 1,
                                     "pytest-worker-0.18b02c9d60ea1a3d"]
    svc = {"kind": "Service", "apiVersion": "v1",
           "metadata": {"name": "pytest-master-0", "creationTimestamp": "2026-11-29T07:16:00Z"},
           "spec": {"type": "ClusterIP", "clusterIP": "None", "selector": {"a": "b"},
                    "ports": [{"port": 23456, "protocol": "TCP"}]}}
    t = table_for("Service", [svc], now)
    assert [c["name"] for c in t["columnDefinitions"]] == [
        "Name", "Type", "Cluster-IP", "External-IP", "Port(s)", "Age", "Selector"]
    assert t["rows"][0]["cells"] == ["pytest-master-0", "ClusterIP", "None", "<none>", "23456/TCP", "60s", "a=b"]
    ns = {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "default",
                                                                 "creationTimestamp": "2026-11-29T07:00:00Z"},
          "status": {"phase": "Active"}}
    t = table_for("Namespace", [ns], now)
    assert shape(t["columnDefinitions"]) == [("Name", "string", "name", 0), ("Status", "string", "", 0),
                                             ("Age", "string", "", 0)]
    assert t["rows"][0]["cells"] == ["default", "Active", "17m"]


def test_every_column_definition_has_the_apiserver_keys_and_cells_align():
    now = T("2026-11-29T07:17:00Z")
    for kind in ("Pod", "Node", "Service", "Event", "Namespace", "PyTorchJob", "TFJob", "PodGroup", "Queue"):
        cols = column_definitions(kind)
        assert all(list(c) == ["name", "type", "format", "description", "priority"] for c in cols), kind
        assert all(c["description"] for c in cols), kind
        # Garbage in never crashes and always yields one cell per column.
        for obj in ({}, {"metadata": "x", "status": [], "spec": 3}, {"metadata": {"name": 5}}):
            assert len(table_for(kind, [obj], now)["rows"][0]["cells"]) == len(cols), kind


def test_table_metadata_and_version():
    t = table_for("Queue", [], T("2026-11-29T07:17:00Z"),
                  list_meta={"resourceVersion": "5", "continue": "abc", "remainingItemCount": 3}, version="v1beta1")
    assert t["apiVersion"] == "meta.k8s.io/v1beta1"
    assert t["metadata"] == {"resourceVersion": "5", "continue": "abc", "remainingItemCount": 3}
    assert table_for("Queue", [], T("2026-11-29T07:17:00Z"))["metadata"] == {}
    assert table_for("Queue", [], T("2026-11-29T07:17:00Z"), no_headers=True)["columnDefinitions"] == []
