"""kubectl-style tables, ages, watch rows and -o yaml/json, checked against the
real kubectl 1.32 / apiserver 1.36 output kept in docs/REFERENCE.md kubectl-output NN
(the objects below are the golden exchanges' bodies, trimmed to the fields the
printers read)."""
from __future__ import annotations

import copy
from datetime import datetime, timedelta

import pytest
import yaml

from phalanx.api.columns import age, columns, human_duration, pod_summary, row
from phalanx.cli import printers
from phalanx.cli.printers import TabWriter, WatchPrinter, format_table, to_json, to_yaml, watch_row


def T(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def table(kind: str, objs: list[dict], now: datetime, wide: bool = False) -> str:
    return format_table(columns(kind, wide), [row(o, kind, wide, now) for o in objs])


# --------------------------------------------------------------------------
# The five pods of docs/REFERENCE.md golden 48-51, 60 and 64 (kubectl-output 15, 16, 28, 29)
# --------------------------------------------------------------------------

INIT_DONE = {"name": "init-pytorch", "state": {"terminated": {
    "exitCode": 0, "reason": "Completed", "startedAt": "2026-11-29T07:14:49Z",
    "finishedAt": "2026-11-29T07:14:52Z"}}, "lastState": {}, "ready": True, "restartCount": 0,
    "started": False}


def conds(**kv: str) -> list[dict]:
    return [{"type": k, "status": v} for k, v in kv.items()]


MASTER_0 = {
    "metadata": {"name": "pytest-master-0", "creationTimestamp": "2026-11-29T07:15:28Z"},
    "spec": {"containers": [{"name": "pytorch"}], "nodeName": "las1"},
    "status": {"phase": "Succeeded", "podIPs": [{"ip": "127.0.1.4"}],
               "conditions": conds(PodReadyToStartContainers="False", Initialized="True", Ready="False",
                                   ContainersReady="False", PodScheduled="True"),
               "containerStatuses": [{"name": "pytorch", "state": {"terminated": {
                   "exitCode": 0, "reason": "Completed", "startedAt": "2026-11-29T07:14:50Z",
                   "finishedAt": "2026-11-29T07:15:26Z"}}, "lastState": {}, "ready": False,
                   "restartCount": 0, "started": False}]}}

WORKER_0 = {
    "metadata": {"name": "pytest-worker-0", "creationTimestamp": "2026-11-29T07:15:09Z"},
    "spec": {"containers": [{"name": "pytorch"}], "initContainers": [{"name": "init-pytorch"}],
             "nodeName": "las1"},
    "status": {"phase": "Running", "podIPs": [{"ip": "127.0.1.5"}],
               "conditions": conds(PodReadyToStartContainers="True", Initialized="True", Ready="True",
                                   ContainersReady="True", PodScheduled="True"),
               "initContainerStatuses": [INIT_DONE],
               "containerStatuses": [{"name": "pytorch", "state": {"running": {
                   "startedAt": "2026-11-29T07:14:45Z"}}, "lastState": {}, "ready": True,
                   "restartCount": 0, "started": True}]}}

WORKER_1 = {
    "metadata": {"name": "pytest-worker-1", "creationTimestamp": "2026-11-29T07:15:28Z"},
    "spec": {"containers": [{"name": "pytorch"}], "initContainers": [{"name": "init-pytorch"}],
             "nodeName": "las1"},
    "status": {"phase": "Running", "podIPs": [{"ip": "127.0.1.6"}],
               "conditions": conds(PodReadyToStartContainers="True", Initialized="True", Ready="False",
                                   ContainersReady="False", PodScheduled="True"),
               "initContainerStatuses": [INIT_DONE],
               "containerStatuses": [{"name": "pytorch",
                                      "state": {"waiting": {"reason": "CrashLoopBackOff",
                                                            "message": "back-off 20s restarting failed"}},
                                      "lastState": {"terminated": {
                                          "exitCode": 1, "reason": "Error", "startedAt": "2026-11-29T07:15:11Z",
                                          "finishedAt": "2026-11-29T07:15:21Z"}},
                                      "ready": False, "restartCount": 2, "started": False}]}}

WORKER_2 = {
    "metadata": {"name": "pytest-worker-2", "creationTimestamp": "2026-11-29T07:15:29Z"},
    "spec": {"containers": [{"name": "pytorch"}], "initContainers": [{"name": "init-pytorch"}],
             "nodeName": "las1"},
    "status": {"phase": "Pending", "podIPs": [{"ip": "127.0.1.7"}],
               "conditions": conds(PodReadyToStartContainers="True", Initialized="False", Ready="False",
                                   ContainersReady="False", PodScheduled="True"),
               "initContainerStatuses": [{"name": "init-pytorch", "state": {"running": {
                   "startedAt": "2026-11-29T07:14:51Z"}}, "lastState": {}, "ready": False,
                   "restartCount": 0, "started": True}],
               "containerStatuses": [{"name": "pytorch", "state": {"waiting": {"reason": "PodInitializing"}},
                                      "lastState": {}, "ready": False, "restartCount": 0, "started": False}]}}

UNBOUND = {"metadata": {"name": "scratch-unbound", "creationTimestamp": "2026-11-29T07:16:00Z"},
           "spec": {"containers": [{"name": "main"}]}, "status": {"phase": "Pending"}}


def deleting(pod: dict, when: str = "2026-11-29T07:17:08Z") -> dict:
    pod = copy.deepcopy(pod)
    pod["metadata"]["deletionTimestamp"] = when
    return pod


PODS = [MASTER_0, WORKER_0, WORKER_1, WORKER_2, UNBOUND]


def test_get_po_matches_kubectl_output_16():
    # kubectl-output/16-kubectl-get-po.txt
    assert table("Pod", PODS, T("2026-11-29T07:16:24Z")) == (
        "NAME              READY   STATUS             RESTARTS      AGE\n"
        "pytest-master-0   0/1     Completed          0             56s\n"
        "pytest-worker-0   1/1     Running            0             75s\n"
        "pytest-worker-1   0/1     CrashLoopBackOff   2 (63s ago)   56s\n"
        "pytest-worker-2   0/1     Init:0/1           0             55s\n"
        "scratch-unbound   0/1     Pending            0             24s\n")


def test_get_po_wide_matches_kubectl_output_15():
    # kubectl-output/15-kubectl-get-po-owide.txt
    assert table("Pod", PODS, T("2026-11-29T07:16:24Z"), wide=True) == (
        "NAME              READY   STATUS             RESTARTS      AGE   IP          NODE     NOMINATED NODE   READINESS GATES\n"
        "pytest-master-0   0/1     Completed          0             56s   127.0.1.4   las1     <none>           <none>\n"
        "pytest-worker-0   1/1     Running            0             75s   127.0.1.5   las1     <none>           <none>\n"
        "pytest-worker-1   0/1     CrashLoopBackOff   2 (63s ago)   56s   127.0.1.6   las1     <none>           <none>\n"
        "pytest-worker-2   0/1     Init:0/1           0             55s   127.0.1.7   las1     <none>           <none>\n"
        "scratch-unbound   0/1     Pending            0             24s   <none>      <none>   <none>           <none>\n")


def test_get_po_with_a_terminating_pod_matches_kubectl_output_28():
    pods = [MASTER_0, WORKER_0, deleting(WORKER_1), WORKER_2]
    assert table("Pod", pods, T("2026-11-29T07:16:38Z"), wide=True) == (
        "NAME              READY   STATUS        RESTARTS      AGE   IP          NODE   NOMINATED NODE   READINESS GATES\n"
        "pytest-master-0   0/1     Completed     0             70s   127.0.1.4   las1   <none>           <none>\n"
        "pytest-worker-0   1/1     Running       0             89s   127.0.1.5   las1   <none>           <none>\n"
        "pytest-worker-1   0/1     Terminating   2 (77s ago)   70s   127.0.1.6   las1   <none>           <none>\n"
        "pytest-worker-2   0/1     Init:0/1      0             69s   127.0.1.7   las1   <none>           <none>\n")


def test_owner_deleted_pods_all_terminating_matches_kubectl_output_29():
    pods = [deleting(WORKER_0), deleting(WORKER_1), deleting(WORKER_2)]
    assert table("Pod", pods, T("2026-11-29T07:16:48Z"), wide=True) == (
        "NAME              READY   STATUS        RESTARTS      AGE   IP          NODE   NOMINATED NODE   READINESS GATES\n"
        "pytest-worker-0   1/1     Terminating   0             99s   127.0.1.5   las1   <none>           <none>\n"
        "pytest-worker-1   0/1     Terminating   2 (87s ago)   80s   127.0.1.6   las1   <none>           <none>\n"
        "pytest-worker-2   0/1     Terminating   0             79s   127.0.1.7   las1   <none>           <none>\n")


# --------------------------------------------------------------------------
# Pod STATUS derivation beyond the golden pods (printPod's branches)
# --------------------------------------------------------------------------

NOW = T("2026-11-29T08:00:00Z")


def pod(containers: list[dict], inits: list[dict] | None = None, phase: str = "Running",
        conditions: list[dict] | None = None, **extra) -> dict:
    spec = {"containers": [{"name": c["name"]} for c in containers]}
    status = {"phase": phase, "containerStatuses": containers}
    if inits is not None:
        spec["initContainers"] = [{"name": c["name"], **({"restartPolicy": c.pop("_restartPolicy")}
                                                         if "_restartPolicy" in c else {})} for c in inits]
        status["initContainerStatuses"] = inits
    if conditions is not None:
        status["conditions"] = conditions
    status.update(extra.pop("status", {}))
    p = {"metadata": {"name": "p", "creationTimestamp": "2026-11-29T07:59:00Z"}, "spec": spec, "status": status}
    p["metadata"].update(extra.pop("metadata", {}))
    p["spec"].update(extra.pop("spec", {}))
    return p


def running(name: str = "c", ready: bool = True, restarts: int = 0, last: dict | None = None) -> dict:
    return {"name": name, "state": {"running": {"startedAt": "2026-11-29T07:59:10Z"}}, "ready": ready,
            "restartCount": restarts, "lastState": last or {}}


def waiting(name: str = "c", reason: str = "ContainerCreating", restarts: int = 0) -> dict:
    return {"name": name, "state": {"waiting": {"reason": reason}}, "ready": False, "restartCount": restarts}


def terminated(name: str = "c", code: int = 0, reason: str | None = None, signal: int | None = None) -> dict:
    t = {"exitCode": code, "finishedAt": "2026-11-29T07:59:30Z"}
    if reason:
        t["reason"] = reason
    if signal:
        t["signal"] = signal
    return {"name": name, "state": {"terminated": t}, "ready": False, "restartCount": 0}


@pytest.mark.parametrize("p, expected", [
    (pod([waiting(reason="ContainerCreating")], phase="Pending"), ("0/1", "ContainerCreating", "0")),
    (pod([waiting(reason="ErrImagePull")], phase="Pending"), ("0/1", "ErrImagePull", "0")),
    (pod([terminated(code=1, reason="Error")], phase="Failed"), ("0/1", "Error", "0")),
    (pod([terminated(code=137, reason="OOMKilled")], phase="Failed"), ("0/1", "OOMKilled", "0")),
    (pod([terminated(code=3)], phase="Failed"), ("0/1", "ExitCode:3", "0")),
    (pod([terminated(code=143, signal=15)], phase="Failed"), ("0/1", "Signal:15", "0")),
    (pod([waiting()], inits=[terminated("i", code=1, reason="Error")], phase="Pending"),
     ("0/1", "Init:Error", "0")),
    (pod([waiting()], inits=[terminated("i", code=2)], phase="Pending"), ("0/1", "Init:ExitCode:2", "0")),
    (pod([waiting()], inits=[terminated("i", code=2, signal=9)], phase="Pending"), ("0/1", "Init:Signal:9", "0")),
    (pod([waiting()], inits=[waiting("i", "CrashLoopBackOff", restarts=3)], phase="Pending"),
     ("0/1", "Init:CrashLoopBackOff", "3")),
    (pod([waiting(reason="PodInitializing")],
         inits=[terminated("i1"), running("i2", ready=False), waiting("i3", "PodInitializing")],
         phase="Pending"), ("0/1", "Init:1/3", "0")),
    (pod([waiting(reason="PodInitializing")], inits=[terminated("i1")], phase="Pending",
         conditions=conds(Initialized="True")), ("0/1", "PodInitializing", "0")),
    (pod([running("a"), running("b", ready=False)]), ("1/2", "Running", "0")),
    (pod([terminated("a", reason="Completed"), running("b")], conditions=conds(Ready="True")),
     ("1/2", "Running", "0")),
    (pod([terminated("a", reason="Completed"), running("b")], conditions=conds(Ready="False")),
     ("1/2", "NotReady", "0")),
    (pod([], phase="Pending", status={"conditions": [{"type": "PodScheduled", "status": "False",
                                                      "reason": "SchedulingGated"}]}),
     ("0/0", "SchedulingGated", "0")),
    (pod([running()], status={"reason": "Evicted"}, phase="Failed"), ("1/1", "Evicted", "0")),
    (pod([], phase="Failed", status={"reason": "Evicted"}), ("0/0", "Evicted", "0")),
    (pod([running()], metadata={"deletionTimestamp": "2026-11-29T08:00:30Z"}, status={"reason": "NodeLost"}),
     ("1/1", "Unknown", "0")),
    (pod([terminated(reason="Completed")], phase="Succeeded",
         metadata={"deletionTimestamp": "2026-11-29T08:00:30Z"}), ("0/1", "Completed", "0")),
])
def test_pod_status_follows_print_pod(p, expected):
    assert pod_summary(p, NOW) == expected


def test_restarts_show_time_since_last_termination():
    last = {"terminated": {"exitCode": 1, "finishedAt": "2026-11-29T07:57:44Z"}}
    older = {"terminated": {"exitCode": 1, "finishedAt": "2026-11-29T07:50:00Z"}}
    p = pod([running("a", restarts=2, last=last), running("b", restarts=1, last=older)])
    assert pod_summary(p, NOW) == ("2/2", "Running", "3 (2m16s ago)")


def test_restartable_init_container_counts_as_container_and_its_restarts_count():
    sidecar = running("side", restarts=4, last={"terminated": {"exitCode": 1, "finishedAt": "2026-11-29T07:59:55Z"}})
    sidecar["started"] = True
    sidecar["_restartPolicy"] = "Always"
    p = pod([running("main")], inits=[terminated("setup"), sidecar],
            conditions=conds(Initialized="True", Ready="True"))
    assert pod_summary(p, NOW) == ("2/2", "Running", "4 (5s ago)")


def test_init_restarts_are_dropped_once_initialized():
    init = terminated("i")
    init["restartCount"] = 5
    p = pod([running()], inits=[init], conditions=conds(Initialized="True"))
    assert pod_summary(p, NOW)[2] == "0"


def test_pod_with_no_status_prints_pending_like_placeholders():
    p = {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "a"}]}}
    assert row(p, "Pod", True, NOW) == ["x", "0/1", "", "0", "<unknown>", "<none>", "<none>", "<none>", "<none>"]


def test_readiness_gates_counted():
    p = pod([running()], conditions=[{"type": "example.com/gate", "status": "True"}],
            spec={"readinessGates": [{"conditionType": "example.com/gate"}, {"conditionType": "other"}]})
    assert row(p, "Pod", True, NOW)[-1] == "1/2"


# --------------------------------------------------------------------------
# Ages (apimachinery HumanDuration)
# --------------------------------------------------------------------------

@pytest.mark.parametrize("seconds, text", [
    (-5, "<invalid>"), (-1.5, "0s"), (0, "0s"), (35, "35s"), (119, "119s"), (120, "2m"),
    (136, "2m16s"), (300, "5m"), (599, "9m59s"), (600, "10m"), (179 * 60, "179m"), (3 * 3600, "3h"),
    (3 * 3600 + 4 * 60, "3h4m"), (8 * 3600, "8h"), (30 * 3600, "30h"), (48 * 3600, "2d"),
    (51 * 3600, "2d3h"), (8 * 86400, "8d"), (120 * 86400, "120d"), (730 * 86400, "2y"),
    (733 * 86400, "2y3d"), (9 * 365 * 86400, "9y"),
])
def test_human_duration(seconds, text):
    assert human_duration(seconds) == text


def test_age_of_missing_or_bad_timestamp_is_unknown():
    assert age(None, NOW) == "<unknown>"
    assert age("", NOW) == "<unknown>"
    assert age("yesterday", NOW) == "<unknown>"
    assert age("2026-11-29T07:57:44Z", NOW) == "2m16s"
    assert age(NOW - timedelta(seconds=7), NOW) == "7s"


# --------------------------------------------------------------------------
# Custom resources and other kinds
# --------------------------------------------------------------------------

JOB = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
       "metadata": {"name": "pytest", "creationTimestamp": "2026-11-29T07:14:10Z"},
       "status": {"conditions": [{"type": "Created", "status": "True"}, {"type": "Running", "status": "True"}]}}


def test_get_pytorchjob_matches_kubectl_output_10_and_11():
    now = T("2026-11-29T07:16:24Z")
    expected = "NAME     STATE     AGE\npytest   Running   2m14s\n"
    assert table("PyTorchJob", [JOB], now) == expected
    assert table("PyTorchJob", [JOB], now, wide=True) == expected


def test_job_without_conditions_has_empty_state_kubectl_output_31():
    job = {"metadata": {"name": "pytest", "creationTimestamp": "2026-11-29T07:17:02Z"}}
    assert table("TFJob", [job], T("2026-11-29T07:17:14Z")) == "NAME     STATE   AGE\npytest           12s\n"


PODGROUP = {"metadata": {"name": "pytest", "creationTimestamp": "2026-11-29T07:14:36Z"},
            "spec": {"minMember": 4, "queue": "default"}, "status": {"phase": "Running", "running": 4}}


def test_get_podgroup_matches_kubectl_output_12_and_13():
    now = T("2026-11-29T07:16:24Z")
    assert table("PodGroup", [PODGROUP], now) == (
        "NAME     STATUS    MINMEMBER   RUNNINGS   AGE\n"
        "pytest   Running   4           4          108s\n")
    assert table("PodGroup", [PODGROUP], now, wide=True) == (
        "NAME     STATUS    MINMEMBER   RUNNINGS   AGE    QUEUE\n"
        "pytest   Running   4           4          108s   default\n")


def test_podgroup_without_status_prints_empty_cells():
    pg = {"metadata": {"name": "pg"}, "spec": {"minMember": 2.0}}
    assert row(pg, "PodGroup", True, NOW) == ["pg", "", "2", "", "<unknown>", ""]


def test_get_q_matches_kubectl_output_14():
    q = {"metadata": {"name": "default", "creationTimestamp": "2026-11-29T07:12:26Z"}, "spec": {"weight": 1}}
    assert table("Queue", [q], NOW) == "NAME      PARENT\ndefault   \n"
    q2 = {"metadata": {"name": "team-a"}, "spec": {"parent": "root"}}
    assert table("Queue", [q2], NOW) == "NAME     PARENT\nteam-a   root\n"


def test_get_q_wide_shows_the_share():
    q = {"metadata": {"name": "team-a", "annotations": {"phalanx.dev/deserved": '{"memory":"8Gi","cpu":"4"}'}},
         "spec": {"parent": "root", "weight": 1, "reclaimable": True},
         "status": {"allocated": {"cpu": "2", "memory": "1Gi"}}}
    assert table("Queue", [q], NOW, wide=True) == (
        "NAME     PARENT   WEIGHT   RECLAIMABLE   GUARANTEE   DESERVED           ALLOCATED          RECLAIMING\n"
        "team-a   root     1        true          <none>      cpu=4,memory=8Gi   cpu=2,memory=1Gi   false\n")


NODE = {
    "metadata": {"name": "las1", "creationTimestamp": "2026-11-29T07:12:26Z",
                 "labels": {"kubernetes.io/hostname": "las1"}},
    "spec": {},
    "status": {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": "las1"}],
               "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady"}],
               "nodeInfo": {"kernelVersion": "6.8.0", "osImage": "Ubuntu 24.04 LTS",
                            "containerRuntimeVersion": "containerd://1.7.24", "kubeletVersion": "v1.36.2",
                            "operatingSystem": "linux", "architecture": "amd64"}}}


def test_get_nodes_wide_matches_kubectl_output_20():
    now = T("2026-11-29T07:16:24Z")
    assert table("Node", [NODE], now, wide=True) == (
        "NAME   STATUS   ROLES    AGE     VERSION   INTERNAL-IP   EXTERNAL-IP   OS-IMAGE           KERNEL-VERSION   CONTAINER-RUNTIME\n"
        "las1   Ready    <none>   3m58s   v1.36.2   127.0.0.1     <none>        Ubuntu 24.04 LTS   6.8.0 (amd64)    containerd://1.7.24\n")


def test_node_status_and_roles():
    n = copy.deepcopy(NODE)
    n["spec"]["unschedulable"] = True
    n["status"]["conditions"][0]["status"] = "Unknown"
    n["metadata"]["labels"].update({"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/gpu": "",
                                    "kubernetes.io/role": "edge"})
    assert row(n, "Node", False, NOW)[1:3] == ["NotReady,SchedulingDisabled", "edge,gpu,worker"]
    n["status"]["conditions"] = []
    assert row(n, "Node", False, NOW)[1] == "Unknown,SchedulingDisabled"


def event(name, kind, obj, reason, message, last, typ="Normal", first=None, count=1, component="kubelet"):
    return {"metadata": {"name": name}, "involvedObject": {"kind": kind, "name": obj},
            "reason": reason, "message": message, "type": typ, "count": count,
            "firstTimestamp": first or last, "lastTimestamp": last, "source": {"component": component}}


def test_get_events_matches_kubectl_output_21():
    now = T("2026-11-29T07:16:24Z")
    events = [
        event("a", "Namespace", "openshift-kube-apiserver", "KubeAPIReadyz", "readyz=true",
              "2026-11-29T07:10:45Z", typ="Warning"),
        event("b", "Pod", "pytest-worker-0", "Created", "Created container: pytorch", "2026-11-29T07:15:07Z"),
        event("c", "Pod", "pytest-worker-0", "Started", "Started container pytorch", "2026-11-29T07:15:08Z"),
        event("d", "Pod", "pytest-worker-0", "Pulled",
              'Container image "busybox:1.37.0-glibc" already present on machine', "2026-11-29T07:15:07Z"),
        event("e", "Pod", "pytest-worker-0", "Scheduled", "Successfully assigned default/pytest-worker-0 to las1",
              "2026-11-29T07:15:03Z"),
        event("f", "PyTorchJob", "pytest", "SuccessfulCreateService", "Created service: pytest-master-0",
              "2026-11-29T07:15:02Z"),
        event("g", "PyTorchJob", "pytest", "SuccessfulCreatePod", "Created pod: pytest-worker-0",
              "2026-11-29T07:15:02Z"),
        event("h", "PyTorchJob", "pytest", "PyTorchJobRunning", "PyTorchJob pytest is running. ",
              "2026-11-29T07:15:09Z"),
    ]
    assert table("Event", events, now) == (
        "LAST SEEN   TYPE      REASON                    OBJECT                               MESSAGE\n"
        "5m39s       Warning   KubeAPIReadyz             namespace/openshift-kube-apiserver   readyz=true\n"
        "77s         Normal    Created                   pod/pytest-worker-0                  Created container: pytorch\n"
        "76s         Normal    Started                   pod/pytest-worker-0                  Started container pytorch\n"
        "77s         Normal    Pulled                    pod/pytest-worker-0                  Container image \"busybox:1.37.0-glibc\" already present on machine\n"
        "81s         Normal    Scheduled                 pod/pytest-worker-0                  Successfully assigned default/pytest-worker-0 to las1\n"
        "82s         Normal    SuccessfulCreateService   pytorchjob/pytest                    Created service: pytest-master-0\n"
        "82s         Normal    SuccessfulCreatePod       pytorchjob/pytest                    Created pod: pytest-worker-0\n"
        "75s         Normal    PyTorchJobRunning         pytorchjob/pytest                    PyTorchJob pytest is running.\n")


def test_event_wide_columns_and_fallbacks():
    ev = {"metadata": {"name": "e1"}, "involvedObject": {"kind": "Pod", "name": "p", "fieldPath": "spec.containers{c}"},
          "reason": "BackOff", "message": "m", "type": "Warning", "count": 5,
          "firstTimestamp": "2026-11-29T07:50:00Z", "lastTimestamp": "2026-11-29T07:59:00Z",
          "source": {"component": "kubelet", "host": "las1"}}
    assert columns("Event", True) == ["LAST SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE",
                                      "FIRST SEEN", "COUNT", "NAME"]
    assert row(ev, "Event", True, NOW) == ["60s", "Warning", "BackOff", "pod/p", "spec.containers{c}",
                                           "kubelet, las1", "m", "10m", "5", "e1"]
    new_style = {"metadata": {"name": "e2"}, "involvedObject": {"kind": "Node"}, "reason": "R", "type": "Normal",
                 "eventTime": "2026-11-29T07:59:58.123456Z", "reportingController": "phalanx"}
    assert row(new_style, "Event", True, NOW) == ["1s", "Normal", "R", "node", "", "phalanx", "", "1s", "1", "e2"]


def test_services_table():
    svc = {"metadata": {"name": "pytest-master-0", "creationTimestamp": "2026-11-29T07:59:00Z"},
           "spec": {"clusterIP": "None", "clusterIPs": ["None"], "type": "ClusterIP",
                    "ports": [{"name": "pytorchjob-port", "port": 23456, "protocol": "TCP"}],
                    "selector": {"b": "2", "a": "1"}}}
    lb = {"metadata": {"name": "lb", "creationTimestamp": "2026-11-29T07:59:00Z"},
          "spec": {"type": "LoadBalancer", "clusterIPs": ["10.0.0.3"],
                   "ports": [{"port": 80, "nodePort": 30080}, {"port": 443, "nodePort": 30443, "protocol": "TCP"}]}}
    assert table("Service", [svc, lb], NOW, wide=True) == (
        "NAME              TYPE           CLUSTER-IP   EXTERNAL-IP   PORT(S)                      AGE   SELECTOR\n"
        "pytest-master-0   ClusterIP      None         <none>        23456/TCP                    60s   a=1,b=2\n"
        "lb                LoadBalancer   10.0.0.3     <pending>     80:30080/TCP,443:30443/TCP   60s   <none>\n")


def test_namespaces_and_unknown_kinds():
    ns = {"metadata": {"name": "default", "creationTimestamp": "2026-11-29T07:00:00Z"}, "status": {"phase": "Active"}}
    assert table("Namespace", [ns], NOW) == "NAME      STATUS   AGE\ndefault   Active   60m\n"
    assert columns("Frobnicator", True) == ["NAME", "AGE"]
    assert row({"metadata": {"name": "x"}}, "Frobnicator", False, NOW) == ["x", "<unknown>"]


def test_namespace_column_for_all_namespaces():
    assert columns("PodGroup", False, with_namespace=True)[:2] == ["NAMESPACE", "NAME"]
    pg = dict(PODGROUP, metadata=dict(PODGROUP["metadata"], namespace="team-a"))
    assert row(pg, "PodGroup", False, NOW, with_namespace=True)[:2] == ["team-a", "pytest"]


# --------------------------------------------------------------------------
# Layout
# --------------------------------------------------------------------------

def test_format_table_pads_to_widest_plus_three_with_minimum_six():
    assert format_table(["a", "bb"], [["x", "y"], ["longer", "z"]]) == (
        "A        BB\n"
        "x        y\n"
        "longer   z\n")
    # minwidth 6: a two-character column is still 6 wide
    assert format_table(["ab", "c"], [["xy", "z"]]) == "AB    C\nxy    z\n"
    assert format_table([], []) == ""


def test_cells_are_cut_at_newlines_and_terminal_escapes_neutralised():
    out = format_table(["name", "msg"], [["a", "line1\nline2"], ["b", "\x1b[31mred"]])
    assert out == "NAME   MSG\na      line1...\nb      ^[[31mred\n"


def test_tabwriter_column_blocks_are_independent():
    w = TabWriter(minwidth=0, padding=2)
    w.write("a:\t1\nlonger key:\t2\nbreak\nb:\t3\n")
    assert w.flush() == "a:           1\nlonger key:  2\nbreak\nb:  3\n"


def test_watch_rows_keep_widths_from_earlier_lines_kubectl_output_01():
    # kubectl-output/01: `get pytorchjob -owide -w` while the job went Running -> Succeeded
    created = T("2026-11-29T07:12:41Z")
    job = copy.deepcopy(JOB)
    job["metadata"]["creationTimestamp"] = "2026-11-29T07:12:41Z"
    printer = WatchPrinter("PyTorchJob", wide=True)
    out = printer.print([job], created + timedelta(seconds=16))
    out += printer.print([job], created + timedelta(seconds=18))
    done = copy.deepcopy(job)
    done["status"]["conditions"].append({"type": "Succeeded", "status": "True"})
    out += printer.print([done], created + timedelta(seconds=21))
    assert out == (
        "NAME     STATE     AGE\n"
        "pytest   Running   16s\n"
        "pytest   Running   18s\n"
        "pytest   Succeeded   21s\n")
    # widths only grow: a later shorter state keeps the Succeeded width
    assert printer.print([job], created + timedelta(seconds=25)) == "pytest   Running     25s\n"


def test_watch_printer_prints_header_with_first_event_when_list_was_empty():
    printer = WatchPrinter("Queue")
    assert printer.print([], NOW) == ""
    assert printer.print([{"metadata": {"name": "q"}, "spec": {"parent": "root"}}], NOW) == (
        "NAME   PARENT\nq      root\n")


def test_watch_row_pure_form_returns_new_widths():
    line, widths = watch_row(JOB, "PyTorchJob", False, T("2026-11-29T07:14:26Z"))
    assert line == "pytest   Running   16s\n"
    line2, widths2 = watch_row(JOB, "PyTorchJob", False, T("2026-11-29T07:14:27Z"), widths=[12, 12])
    assert line2 == "pytest      Running     17s\n"
    assert widths2 == [12, 12]


# --------------------------------------------------------------------------
# -o yaml / -o json
# --------------------------------------------------------------------------

# kubectl-output/19-kubectl-get-pytorchjob-pytest-o-yaml.txt
JOB_YAML = '''\
apiVersion: kubeflow.org/v1
kind: PyTorchJob
metadata:
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: |
      {"apiVersion":"kubeflow.org/v1","kind":"PyTorchJob","metadata":{"annotations":{},"name":"pytest","namespace":"default"},"spec":{"pytorchReplicaSpecs":{"Master":{"replicas":1,"restartPolicy":"OnFailure","template":{"spec":{"containers":[{"command":["sh","-c","trap exit INT TERM; sleep 30s \\u0026 wait"],"image":"busybox:1.37.0-glibc","imagePullPolicy":"IfNotPresent","name":"pytorch","resources":{"limits":{"cpu":"1","memory":"100Mi"}}}]}}},"Worker":{"replicas":3,"restartPolicy":"OnFailure","template":{"spec":{"containers":[{"command":["sh","-c","trap exit INT TERM; sleep 30s \\u0026 wait"],"image":"busybox:1.37.0-glibc","imagePullPolicy":"IfNotPresent","name":"pytorch","resources":{"limits":{"cpu":"1","memory":"100Mi"}}}]}}}},"runPolicy":{"backoffLimit":3}}}
  creationTimestamp: "2026-11-29T07:14:10Z"
  generation: 3
  name: pytest
  namespace: default
  resourceVersion: "388"
  uid: dd780d46-45c9-468d-bb1a-f17b6c90e612
spec:
  pytorchReplicaSpecs:
    Master:
      replicas: 1
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - command:
            - sh
            - -c
            - trap exit INT TERM; sleep 30s & wait
            image: busybox:1.37.0-glibc
            imagePullPolicy: IfNotPresent
            name: pytorch
            resources:
              limits:
                cpu: "1"
                memory: 100Mi
    Worker:
      replicas: 3
      restartPolicy: OnFailure
      template:
        spec:
          containers:
          - command:
            - sh
            - -c
            - trap exit INT TERM; sleep 30s & wait
            image: busybox:1.37.0-glibc
            imagePullPolicy: IfNotPresent
            name: pytorch
            resources:
              limits:
                cpu: "1"
                memory: 100Mi
  runPolicy:
    backoffLimit: 3
    suspend: false
status:
  conditions:
  - lastTransitionTime: "2026-11-29T07:14:36Z"
    lastUpdateTime: "2026-11-29T07:14:36Z"
    message: PyTorchJob pytest is created.
    reason: PyTorchJobCreated
    status: "True"
    type: Created
  - lastTransitionTime: "2026-11-29T07:16:12Z"
    lastUpdateTime: "2026-11-29T07:16:12Z"
    message: PyTorchJob default/pytest is running.
    reason: PyTorchJobRunning
    status: "True"
    type: Running
  replicaStatuses:
    Master:
      active: 1
      selector: training.kubeflow.org/job-name=pytest,training.kubeflow.org/operator-name=pytorchjob-controller,training.kubeflow.org/replica-type=master
    Worker:
      active: 3
      selector: training.kubeflow.org/job-name=pytest,training.kubeflow.org/operator-name=pytorchjob-controller,training.kubeflow.org/replica-type=worker
  startTime: "2026-11-29T07:14:36Z"
'''

# kubectl-output/24-kubectl-get-podgroup-pytest-o-yaml.txt
PODGROUP_YAML = '''\
apiVersion: scheduling.volcano.sh/v1beta1
kind: PodGroup
metadata:
  creationTimestamp: "2026-11-29T07:14:36Z"
  generation: 3
  name: pytest
  namespace: default
  ownerReferences:
  - apiVersion: kubeflow.org/v1
    blockOwnerDeletion: true
    controller: true
    kind: PyTorchJob
    name: pytest
    uid: dd780d46-45c9-468d-bb1a-f17b6c90e612
  resourceVersion: "341"
  uid: 9de01389-706f-461f-adf3-7c36ba507ab7
spec:
  minMember: 4
  minResources:
    cpu: "4"
    memory: 400Mi
  queue: default
status:
  conditions:
  - lastTransitionTime: "2026-11-29T07:14:41Z"
    message: ""
    reason: tasks in gang are ready to be scheduled
    status: "True"
    transitionID: 5d6f2b07-3a61-4f0e-9c56-7c1c1f0a9e11
    type: Scheduled
  phase: Running
  running: 4
'''


def reversed_keys(v):
    if isinstance(v, dict):
        return {k: reversed_keys(v[k]) for k in reversed(list(v))}
    if isinstance(v, list):
        return [reversed_keys(x) for x in v]
    return v


@pytest.mark.parametrize("golden", [JOB_YAML, PODGROUP_YAML])
def test_to_yaml_matches_kubectl(golden):
    obj = reversed_keys(yaml.safe_load(golden))
    obj["metadata"]["managedFields"] = [{"manager": "kubectl", "operation": "Update"}]
    assert to_yaml(obj) == golden


def test_to_yaml_quotes_strings_that_read_as_other_types():
    out = to_yaml({"labels": {"a": "yes", "b": "0", "c": "true", "d": "", "e": "null", "f": "1.5", "g": "plain"},
                   "n": 3, "x": 2.0, "t": True, "none": None, "empty": {}, "list": []})
    assert out == ('empty: {}\nlabels:\n  a: "yes"\n  b: "0"\n  c: "true"\n  d: ""\n  e: "null"\n  f: "1.5"\n'
                   '  g: plain\nlist: []\n"n": 3\nnone: null\nt: true\nx: 2\n')


def test_to_json_is_kubectl_shaped():
    obj = {"kind": "Pod", "apiVersion": "v1",
           "metadata": {"name": "p", "managedFields": [{}], "annotations": {"cmd": "a && b <c>"}}}
    assert to_json(obj) == (
        '{\n    "apiVersion": "v1",\n    "kind": "Pod",\n    "metadata": {\n        "annotations": {\n'
        '            "cmd": "a \\u0026\\u0026 b \\u003cc\\u003e"\n        },\n        "name": "p"\n    }\n}\n')


def test_list_wrapper_strips_managed_fields_of_items():
    lst = printers.as_list([{"kind": "Queue", "metadata": {"name": "q", "managedFields": []}}])
    assert to_yaml(lst) == ("apiVersion: v1\nitems:\n- kind: Queue\n  metadata:\n    name: q\nkind: List\n"
                            "metadata:\n  resourceVersion: \"\"\n")
