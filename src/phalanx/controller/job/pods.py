"""Pods and headless Services of a job: names, labels, slots, as the original builds them."""
from __future__ import annotations

import copy

from phalanx.api.constants import (
    ANNOTATION_GROUP_NAME,
    ANNOTATION_TASK_SPEC,
    LABEL_JOB_NAME,
    LABEL_JOB_ROLE,
    LABEL_OPERATOR_NAME,
    LABEL_REPLICA_INDEX,
    LABEL_REPLICA_TYPE,
)
from phalanx.controller.conditions import Event
from phalanx.controller.fields import as_dict, as_int, as_list, as_str, namespace, owner_reference
from phalanx.controller.frameworks.base import Addressing, Framework, general_name
from phalanx.controller.job.plan import ReconcileOptions
from phalanx.objects.meta import Obj, labels_of, name_of


def job_labels(fw: Framework, job: Obj) -> dict[str, str]:
    """``GenLabels``: operator-name and job-name."""
    return {LABEL_OPERATOR_NAME: fw.controller_name, LABEL_JOB_NAME: name_of(job).replace("/", "-")}


def replica_labels(fw: Framework, job: Obj, rtype: str, index: int) -> dict[str, str]:
    return {**job_labels(fw, job), LABEL_REPLICA_TYPE: rtype.lower(), LABEL_REPLICA_INDEX: str(index)}


def replica_selector(fw: Framework, job: Obj, rtype: str) -> str:
    """``FormatLabelSelector`` of {job-name, operator-name, replica-type}: keys sorted."""
    sel = {**job_labels(fw, job), LABEL_REPLICA_TYPE: rtype.lower()}
    return ",".join(f"{k}={v}" for k, v in sorted(sel.items()))


def slots(objs: list[Obj], rtype: str, replicas: int) -> list[list[Obj]]:
    """``GetPodSlices``: objects of ``rtype`` by their replica-index label, in a
    list of length max(max index + 1, replicas). Starting from -1 (not 0) fixes
    the original's replicas=0 create/delete loop (kubeflow #1709). Objects with a missing or
    garbage index are skipped."""
    rt = rtype.lower()
    mine: list[tuple[int, Obj]] = []
    for o in objs:
        lab = labels_of(o)
        if as_str(lab.get(LABEL_REPLICA_TYPE)).lower() != rt:
            continue
        raw = lab.get(LABEL_REPLICA_INDEX)
        idx = as_int(raw) if isinstance(raw, str) and raw.isdigit() else None
        if idx is None:
            continue
        mine.append((idx, o))
    size = max([replicas] + [i + 1 for i, _ in mine])
    out: list[list[Obj]] = [[] for _ in range(size)]
    for i, o in sorted(mine, key=lambda t: (t[0], name_of(t[1]))):
        out[i].append(o)
    return out


def pod_restart_policy(fw: Framework, rspec: Obj) -> str:
    """``SetRestartPolicy``: ExitCode is handled by the operator, the pod gets Never."""
    p = fw.restart_policy(rspec)
    return "Never" if p == "ExitCode" else p


def build_service(fw: Framework, job: Obj, rtype: str, index: int, rspec: Obj) -> Obj:
    """One headless Service per pod slot, ports = every containerPort of the default container."""
    sel = replica_labels(fw, job, rtype, index)
    ports = []
    for p in as_list((fw.default_container(rspec) or {}).get("ports")):
        if not isinstance(p, dict) or as_int(p.get("containerPort")) is None:
            continue
        entry: Obj = {}
        if as_str(p.get("name")):
            entry["name"] = p["name"]
        entry["port"] = as_int(p.get("containerPort"))
        ports.append(entry)
    svc_spec: Obj = {"clusterIP": "None", "selector": dict(sel)}
    if ports:
        svc_spec["ports"] = ports
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": general_name(name_of(job), rtype.lower(), index),
            "namespace": namespace(job),
            "labels": dict(sel),
            "ownerReferences": [owner_reference(job)],
        },
        "spec": svc_spec,
    }


def build_pod(
    fw: Framework, job: Obj, rtype: str, index: int, rspec: Obj,
    addressing: Addressing, options: ReconcileOptions,
) -> tuple[Obj, list[Event]]:
    """``createNewPod``: the template, decorated (labels, env, init containers,
    restart policy, gang scheduling), owned by the job."""
    events: list[Event] = []
    template = copy.deepcopy(as_dict(rspec.get("template")))
    tmeta = as_dict(template.get("metadata"))
    pod_spec = as_dict(template.get("spec"))

    pod_labels = {k: v for k, v in as_dict(tmeta.get("labels")).items() if isinstance(v, str)}
    pod_labels.update(replica_labels(fw, job, rtype, index))
    if fw.is_master_role(job, rtype, index):
        pod_labels[LABEL_JOB_ROLE] = "master"
    pod_ann = {k: v for k, v in as_dict(tmeta.get("annotations")).items() if isinstance(v, str)}

    containers = [c for c in as_list(pod_spec.get("containers")) if isinstance(c, dict)]
    env = fw.pod_env(job, rtype, index, addressing)
    for c in fw.env_targets(containers):
        c["env"] = [e for e in as_list(c.get("env"))] + copy.deepcopy(env)
    pod_spec["containers"] = containers
    inits = fw.init_containers(job, rtype, index, options, addressing)
    if inits:
        pod_spec["initContainers"] = [c for c in as_list(pod_spec.get("initContainers")) if isinstance(c, dict)] + inits

    if as_str(pod_spec.get("restartPolicy")):
        events.append(("Warning", "SetPodTemplateRestartPolicy",
                       "Restart policy in pod template will be overwritten by restart policy in replica spec"))
    pod_spec["restartPolicy"] = pod_restart_policy(fw, rspec)

    if options.gang_scheduler:
        scheduler = as_str(pod_spec.get("schedulerName"))
        if scheduler and scheduler != options.gang_scheduler:
            events.append(("Warning", "SetPodTemplateSchedulerName",
                           "Another scheduler is specified when gang-scheduling is enabled and it will not be overwritten"))
        if not scheduler:
            pod_spec["schedulerName"] = options.gang_scheduler
        pod_ann[ANNOTATION_GROUP_NAME] = name_of(job)
        pod_ann[ANNOTATION_TASK_SPEC] = rtype.lower()

    metadata: Obj = {
        "name": fw.pod_name(job, rtype, index),
        "namespace": namespace(job),
        "labels": pod_labels,
    }
    if pod_ann:
        metadata["annotations"] = pod_ann
    if as_list(tmeta.get("finalizers")):
        metadata["finalizers"] = [f for f in tmeta["finalizers"] if isinstance(f, str)]
    metadata["ownerReferences"] = [owner_reference(job)]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": pod_spec}
    fw.decorate_pod(job, rtype, index, pod, options)
    return pod, events
