"""Each kind's table: the columns and cells the apiserver's Table and `kubectl get` print.

Column sets and cell rules are the real apiserver's (server-side Table printing of kubernetes 1.36 for
Pods, Nodes, Services, Events, Namespaces, PriorityClasses, HorizontalPodAutoscalers; the CRDs'
additionalPrinterColumns for the six job kinds, PodGroup and Queue). Pure functions; the server and the
CLI both render through them.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Iterable

from phalanx.api.autoscaling import targets_cell
from phalanx.api.constants import ANNOTATION_DESERVED, ANNOTATION_RECLAIMING
from phalanx.objects.clock import parse_time

Obj = dict[str, Any]

NONE = "<none>"


# --------------------------------------------------------------------------
# Durations (apimachinery duration.HumanDuration)
# --------------------------------------------------------------------------


def human_duration(seconds: float) -> str:
    """apimachinery's HumanDuration: `35s`, `2m16s`, `5m`, `3h4m`, `30h`, `2d3h`, `120d`, `2y3d`."""
    s = int(seconds)  # truncates toward zero, as Go's int(d.Seconds())
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        rem = s % 60
        return f"{minutes}m" if rem == 0 else f"{minutes}m{rem}s"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        rem = minutes % 60
        return f"{hours}h" if rem == 0 else f"{hours}h{rem}m"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rem = hours % 24
        return f"{hours // 24}d" if rem == 0 else f"{hours // 24}d{rem}h"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y" if days == 0 else f"{hours // 24 // 365}y{days}d"
    return f"{hours // 24 // 365}y"


def as_time(ts: str | datetime | None) -> datetime | None:
    if ts is None or ts == "":
        return None
    if isinstance(ts, datetime):
        return ts if ts.tzinfo else ts.replace(tzinfo=timezone.utc)
    try:
        t = parse_time(str(ts))
    except ValueError:
        return None
    if t is not None and t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t


def age(creation_ts: str | datetime | None, now: datetime) -> str:
    """Elapsed time since a timestamp, as kubectl prints AGE; `<unknown>` if unset."""
    t = as_time(creation_ts)
    if t is None:
        return "<unknown>"
    return human_duration((now - t).total_seconds())


# --------------------------------------------------------------------------
# Small accessors
# --------------------------------------------------------------------------


def dig(obj: Any, *path: str | int) -> Any:
    cur = obj
    for p in path:
        if isinstance(p, int):
            if not isinstance(cur, list) or not -len(cur) <= p < len(cur):
                return None
            cur = cur[p]
        else:
            if not isinstance(cur, dict):
                return None
            cur = cur.get(p)
        if cur is None:
            return None
    return cur


def dig_list(obj: Any, *path: str) -> list:
    v = dig(obj, *path)
    return v if isinstance(v, list) else []


def dig_dict(obj: Any, *path: str) -> dict:
    v = dig(obj, *path)
    return v if isinstance(v, dict) else {}


def cell(v: Any) -> str:
    return "" if v is None else str(v)


def go_value(v: Any) -> str:
    """A JSON value as Go's fmt `%v` prints it after JSON decoding."""
    if v is None:
        return "<nil>"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        if v.is_integer() and abs(v) < 1e21:
            return str(int(v))
        return repr(v)
    if isinstance(v, (dict, list)):
        return json.dumps(v, separators=(",", ":"), sort_keys=True)
    return str(v)


def crd_cell(v: Any) -> str:
    """A CRD printer-column cell: null prints empty, numbers without decimals."""
    if v is None:
        return ""
    return go_value(v)


def format_labels(labels: dict[str, str] | None) -> str:
    """apimachinery labels.FormatLabels: sorted `k=v,k=v`, `<none>` when empty."""
    if not labels:
        return NONE
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


def _resource_order(name: str) -> tuple[int, str]:
    return ({"cpu": 0, "memory": 1}.get(name, 2), name)


def resource_list_text(resources: Any) -> str:
    """A resource list as one compact cell: `cpu=4,memory=8Gi,nvidia.com/gpu=1` (cpu, memory,
    then the rest by name; quantities as the object spells them), `<none>` when empty."""
    if not isinstance(resources, dict) or not resources:
        return NONE
    return ",".join(f"{k}={go_value(resources[k])}" for k in sorted(resources, key=_resource_order))


def json_resource_list_text(text: Any) -> str:
    """:func:`resource_list_text` of a JSON-encoded resource list (an annotation's value);
    a value that is not a JSON object is shown as it is."""
    if text is None or text == "":
        return NONE
    try:
        decoded = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return cell(text)
    return resource_list_text(decoded) if isinstance(decoded, dict) else cell(text)


def queue_share(q: Obj) -> list[tuple[str, str]]:
    """What a Queue's share looks like, as (label, text): weight, reclaimable (unset means
    true), guarantee, deserved (the scheduler's annotation), allocated, capability and
    reclaiming (the scheduler's annotation; absent means false)."""
    spec = dig_dict(q, "spec")
    annotations = dig_dict(q, "metadata", "annotations")
    weight = spec.get("weight")
    reclaimable = spec.get("reclaimable")
    reclaiming = annotations.get(ANNOTATION_RECLAIMING)
    return [
        ("Weight", NONE if weight is None else go_value(weight)),
        ("Reclaimable", "true" if reclaimable is None else go_value(reclaimable)),
        ("Guarantee", resource_list_text(dig(spec, "guarantee", "resource"))),
        ("Deserved", json_resource_list_text(annotations.get(ANNOTATION_DESERVED))),
        ("Allocated", resource_list_text(dig(q, "status", "allocated"))),
        ("Capability", resource_list_text(spec.get("capability"))),
        ("Reclaiming", "false" if reclaiming in (None, "") else cell(reclaiming)),
    ]


# The Queue columns `get -o wide` adds (not the CRD's: computed cells, strings, `<none>` when unset).
QUEUE_WIDE_COLUMNS = ("WEIGHT", "RECLAIMABLE", "GUARANTEE", "DESERVED", "ALLOCATED", "RECLAIMING")


def queue_wide_cells(q: Obj) -> list[str]:
    """The cells of ``QUEUE_WIDE_COLUMNS`` for one Queue."""
    share = dict(queue_share(q))
    return [share[c.capitalize()] for c in QUEUE_WIDE_COLUMNS]


# --------------------------------------------------------------------------
# Pod (pkg/printers/internalversion printPod)
# --------------------------------------------------------------------------


def _restartable_init(container: dict | None) -> bool:
    return container is not None and container.get("restartPolicy") == "Always"


def _condition_true(pod: Obj, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in dig_list(pod, "status", "conditions") if isinstance(c, dict))


def _terminated_reason(term: dict, prefix: str = "") -> str:
    if term.get("reason"):
        return prefix + term["reason"]
    if term.get("signal"):
        return f"{prefix}Signal:{term['signal']}"
    return f"{prefix}ExitCode:{term.get('exitCode', 0)}"


def pod_summary(pod: Obj, now: datetime) -> tuple[str, str, str]:
    """(READY, STATUS, RESTARTS) exactly as the apiserver's printPod derives them."""
    spec = dig_dict(pod, "spec")
    status = dig_dict(pod, "status")
    containers = dig_list(spec, "containers")
    init_containers = [c for c in dig_list(spec, "initContainers") if isinstance(c, dict)]
    total = len(containers)
    ready = 0
    restarts = 0
    sidecar_restarts = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None

    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    for c in dig_list(status, "conditions"):
        if isinstance(c, dict) and c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    by_name = {c.get("name"): c for c in init_containers}
    total += sum(1 for c in init_containers if _restartable_init(c))

    def later(a: datetime | None, b: Any) -> datetime | None:
        t = as_time(b)
        if t is None:
            return a
        return t if a is None or t > a else a

    initializing = False
    for i, cs in enumerate(s for s in dig_list(status, "initContainerStatuses") if isinstance(s, dict)):
        count = int(cs.get("restartCount") or 0)
        restarts += count
        last_term = dig(cs, "lastState", "terminated")
        if isinstance(last_term, dict):
            last_restart = later(last_restart, last_term.get("finishedAt"))
        sidecar = _restartable_init(by_name.get(cs.get("name")))
        if sidecar:
            sidecar_restarts += count
            if isinstance(last_term, dict):
                last_sidecar_restart = later(last_sidecar_restart, last_term.get("finishedAt"))
        term = dig(cs, "state", "terminated")
        waiting = dig(cs, "state", "waiting")
        if isinstance(term, dict) and int(term.get("exitCode") or 0) == 0:
            continue
        if sidecar and cs.get("started"):
            if cs.get("ready"):
                ready += 1
            continue
        if isinstance(term, dict):
            reason = _terminated_reason(term, "Init:")
        elif isinstance(waiting, dict) and waiting.get("reason") and waiting["reason"] != "PodInitializing":
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(init_containers)}"
        initializing = True
        break

    if not initializing or _condition_true(pod, "Initialized"):
        restarts = sidecar_restarts
        last_restart = last_sidecar_restart
        has_running = False
        error_reason = ""
        for cs in reversed([s for s in dig_list(status, "containerStatuses") if isinstance(s, dict)]):
            restarts += int(cs.get("restartCount") or 0)
            last_term = dig(cs, "lastState", "terminated")
            if isinstance(last_term, dict):
                last_restart = later(last_restart, last_term.get("finishedAt"))
            waiting = dig(cs, "state", "waiting")
            term = dig(cs, "state", "terminated")
            if isinstance(waiting, dict) and waiting.get("reason"):
                reason = waiting["reason"]
            elif isinstance(term, dict):
                reason = _terminated_reason(term)
                if int(term.get("exitCode") or 0) != 0 and not error_reason:
                    error_reason = reason
            elif cs.get("ready") and isinstance(dig(cs, "state", "running"), dict):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            if _condition_true(pod, "Ready"):
                reason = "Running"
            else:
                reason = error_reason or "NotReady"

    deleting = bool(dig(pod, "metadata", "deletionTimestamp"))
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"

    restarts_str = str(restarts)
    if restarts != 0 and last_restart is not None:
        restarts_str = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"
    return f"{ready}/{total}", reason, restarts_str


def _pod_row(pod: Obj, wide: bool, now: datetime) -> list[str]:
    ready, status, restarts = pod_summary(pod, now)
    cells = [cell(dig(pod, "metadata", "name")), ready, status, restarts,
             age(dig(pod, "metadata", "creationTimestamp"), now)]
    if wide:
        ips = dig_list(pod, "status", "podIPs")
        ip = cell(dig(ips, 0, "ip")) if ips else ""
        gates = dig_list(pod, "spec", "readinessGates")
        gates_str = NONE
        if gates:
            conds = {c.get("type"): c.get("status") for c in dig_list(pod, "status", "conditions")
                     if isinstance(c, dict)}
            true = sum(1 for g in gates if isinstance(g, dict) and conds.get(g.get("conditionType")) == "True")
            gates_str = f"{true}/{len(gates)}"
        cells += [ip or NONE, cell(dig(pod, "spec", "nodeName")) or NONE,
                  cell(dig(pod, "status", "nominatedNodeName")) or NONE, gates_str]
    return cells


# --------------------------------------------------------------------------
# Other built-in kinds
# --------------------------------------------------------------------------


def node_roles(node: Obj) -> list[str]:
    roles = set()
    for k, v in dig_dict(node, "metadata", "labels").items():
        if k.startswith("node-role.kubernetes.io/"):
            role = k[len("node-role.kubernetes.io/"):]
            if role:
                roles.add(role)
        elif k == "kubernetes.io/role" and v:
            roles.add(v)
    return sorted(roles)


def _node_address(node: Obj, kind: str) -> str:
    for a in dig_list(node, "status", "addresses"):
        if isinstance(a, dict) and a.get("type") == kind:
            return cell(a.get("address"))
    return NONE


def _node_row(node: Obj, wide: bool, now: datetime) -> list[str]:
    status: list[str] = []
    for c in dig_list(node, "status", "conditions"):
        if isinstance(c, dict) and c.get("type") == "Ready":
            status = ["Ready" if c.get("status") == "True" else "NotReady"]
    if not status:
        status = ["Unknown"]
    if dig(node, "spec", "unschedulable"):
        status.append("SchedulingDisabled")
    info = dig_dict(node, "status", "nodeInfo")
    cells = [cell(dig(node, "metadata", "name")), ",".join(status), ",".join(node_roles(node)) or NONE,
             age(dig(node, "metadata", "creationTimestamp"), now), cell(info.get("kubeletVersion"))]
    if wide:
        kernel = cell(info.get("kernelVersion")) or "<unknown>"
        if info.get("kernelVersion") and info.get("architecture"):
            kernel = f"{info['kernelVersion']} ({info['architecture']})"
        cells += [_node_address(node, "InternalIP"), _node_address(node, "ExternalIP"),
                  cell(info.get("osImage")) or "<unknown>", kernel,
                  cell(info.get("containerRuntimeVersion")) or "<unknown>"]
    return cells


def _service_external_ip(svc: Obj) -> str:
    spec = dig_dict(svc, "spec")
    stype = spec.get("type") or "ClusterIP"
    external = [str(x) for x in dig_list(spec, "externalIPs")]
    if stype in ("ClusterIP", "NodePort"):
        return ",".join(external) if external else NONE
    if stype == "LoadBalancer":
        lb = []
        for ing in dig_list(svc, "status", "loadBalancer", "ingress"):
            if isinstance(ing, dict) and (ing.get("ip") or ing.get("hostname")):
                lb.append(str(ing.get("ip") or ing.get("hostname")))
        lb = sorted(set(lb))
        if external:
            return ",".join(lb + external)
        return ",".join(lb) if lb else "<pending>"
    if stype == "ExternalName":
        return cell(spec.get("externalName"))
    return "<unknown>"


def service_ports(ports: Iterable[Any]) -> str:
    pieces = []
    for p in ports:
        if not isinstance(p, dict):
            continue
        proto = p.get("protocol") or "TCP"
        if p.get("nodePort"):
            pieces.append(f"{p.get('port')}:{p['nodePort']}/{proto}")
        else:
            pieces.append(f"{p.get('port')}/{proto}")
    return ",".join(pieces)


def _service_row(svc: Obj, wide: bool, now: datetime) -> list[str]:
    spec = dig_dict(svc, "spec")
    ips = dig_list(spec, "clusterIPs")
    cluster_ip = cell(ips[0]) if ips else (cell(spec.get("clusterIP")) or NONE)
    cells = [cell(dig(svc, "metadata", "name")), cell(spec.get("type") or "ClusterIP"), cluster_ip,
             _service_external_ip(svc), service_ports(dig_list(spec, "ports")) or NONE,
             age(dig(svc, "metadata", "creationTimestamp"), now)]
    if wide:
        cells.append(format_labels(dig_dict(spec, "selector")))
    return cells


def _event_row(ev: Obj, wide: bool, now: datetime) -> list[str]:
    first = age(ev.get("firstTimestamp"), now) if ev.get("firstTimestamp") else age(ev.get("eventTime"), now)
    last = age(ev.get("lastTimestamp"), now) if ev.get("lastTimestamp") else first
    count = ev.get("count") or 1
    series = ev.get("series")
    if isinstance(series, dict):
        last = age(series.get("lastObservedTime"), now)
        count = series.get("count") or count
    inv = dig_dict(ev, "involvedObject")
    target = cell(inv.get("kind")).lower()
    if inv.get("name"):
        target = f"{target}/{inv['name']}"
    message = cell(ev.get("message")).strip()
    if not wide:
        return [last, cell(ev.get("type")), cell(ev.get("reason")), target, message]
    source = dig_dict(ev, "source")
    component = source.get("component") or ev.get("reportingController") or ev.get("reportingComponent") or ""
    host = source.get("host") or ev.get("reportingInstance") or ""
    src = f"{component}, {host}" if host else str(component)
    return [last, cell(ev.get("type")), cell(ev.get("reason")), target, cell(inv.get("fieldPath")), src,
            message, first, str(count), cell(dig(ev, "metadata", "name"))]


def _namespace_row(ns: Obj, wide: bool, now: datetime) -> list[str]:
    return [cell(dig(ns, "metadata", "name")), cell(dig(ns, "status", "phase")),
            age(dig(ns, "metadata", "creationTimestamp"), now)]


# --------------------------------------------------------------------------
# Custom resources (the CRDs' additionalPrinterColumns)
# --------------------------------------------------------------------------


def _job_state(job: Obj) -> str:
    conds = dig_list(job, "status", "conditions")
    return crd_cell(dig(conds, -1, "type")) if conds else ""


def _job_row(job: Obj, wide: bool, now: datetime) -> list[str]:
    return [cell(dig(job, "metadata", "name")), _job_state(job), age(dig(job, "metadata", "creationTimestamp"), now)]


def _mpijob_row(job: Obj, wide: bool, now: datetime) -> list[str]:
    """The MPIJob CRD declares Age before State."""
    return [cell(dig(job, "metadata", "name")), age(dig(job, "metadata", "creationTimestamp"), now), _job_state(job)]


def _podgroup_row(pg: Obj, wide: bool, now: datetime) -> list[str]:
    cells = [cell(dig(pg, "metadata", "name")), crd_cell(dig(pg, "status", "phase")),
             crd_cell(dig(pg, "spec", "minMember")), crd_cell(dig(pg, "status", "running")),
             age(dig(pg, "metadata", "creationTimestamp"), now)]
    if wide:
        cells.append(crd_cell(dig(pg, "spec", "queue")))
    return cells


def _queue_row(q: Obj, wide: bool, now: datetime) -> list[str]:
    cells = [cell(dig(q, "metadata", "name")), crd_cell(dig(q, "spec", "parent"))]
    if wide:
        cells.extend(queue_wide_cells(q))
    return cells


def _priorityclass_row(pc: Obj, wide: bool, now: datetime) -> list[str]:
    """printPriorityClass: the value, globalDefault (false when unset), age, then the policy."""
    return [cell(dig(pc, "metadata", "name")), go_value(pc.get("value", 0)),
            go_value(pc.get("globalDefault") is True), age(dig(pc, "metadata", "creationTimestamp"), now),
            cell(pc.get("preemptionPolicy"))]


def _hpa_row(hpa: Obj, wide: bool, now: datetime) -> list[str]:
    """printHorizontalPodAutoscaler: the target as Kind/name, its metrics, the bounds, the replicas seen."""
    ref = dig_dict(hpa, "spec", "scaleTargetRef")
    low = dig(hpa, "spec", "minReplicas")
    return [cell(dig(hpa, "metadata", "name")), f"{go_value(ref.get('kind', ''))}/{go_value(ref.get('name', ''))}",
            targets_cell(hpa), go_value(low) if low is not None else "<unset>",
            go_value(dig(hpa, "spec", "maxReplicas") or 0), go_value(dig(hpa, "status", "currentReplicas") or 0),
            age(dig(hpa, "metadata", "creationTimestamp"), now)]


def _default_row(obj: Obj, wide: bool, now: datetime) -> list[str]:
    return [cell(dig(obj, "metadata", "name")), age(dig(obj, "metadata", "creationTimestamp"), now)]


# kind -> (columns, wide-only columns, row function)
_PRINTERS: dict[str, tuple[tuple[str, ...], tuple[str, ...], Any]] = {
    "Pod": (("NAME", "READY", "STATUS", "RESTARTS", "AGE"),
            ("IP", "NODE", "NOMINATED NODE", "READINESS GATES"), _pod_row),
    "Node": (("NAME", "STATUS", "ROLES", "AGE", "VERSION"),
             ("INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE", "KERNEL-VERSION", "CONTAINER-RUNTIME"), _node_row),
    "Service": (("NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE"), ("SELECTOR",), _service_row),
    "Event": (("LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"), (), _event_row),
    "Namespace": (("NAME", "STATUS", "AGE"), (), _namespace_row),
    "PyTorchJob": (("NAME", "STATE", "AGE"), (), _job_row),
    "TFJob": (("NAME", "STATE", "AGE"), (), _job_row),
    "XGBoostJob": (("NAME", "STATE", "AGE"), (), _job_row),
    "PaddleJob": (("NAME", "STATE", "AGE"), (), _job_row),
    "JAXJob": (("NAME", "STATE", "AGE"), (), _job_row),
    "MPIJob": (("NAME", "AGE", "STATE"), (), _mpijob_row),
    "PodGroup": (("NAME", "STATUS", "MINMEMBER", "RUNNINGS", "AGE"), ("QUEUE",), _podgroup_row),
    "Queue": (("NAME", "PARENT"), QUEUE_WIDE_COLUMNS, _queue_row),
    "PriorityClass": (("NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"), (), _priorityclass_row),
    "HorizontalPodAutoscaler": (("NAME", "REFERENCE", "TARGETS", "MINPODS", "MAXPODS", "REPLICAS", "AGE"), (),
                                _hpa_row),
}
_EVENT_WIDE = ("LAST SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE",
               "FIRST SEEN", "COUNT", "NAME")
_DEFAULT = (("NAME", "AGE"), (), _default_row)


def columns(kind: str, wide: bool = False, with_namespace: bool = False) -> list[str]:
    """Column headers of `kubectl get <kind>` (`-o wide` adds the priority-1 columns)."""
    base, extra, _ = _PRINTERS.get(kind, _DEFAULT)
    if kind == "Event" and wide:
        cols = list(_EVENT_WIDE)
    else:
        cols = list(base) + (list(extra) if wide else [])
    return (["NAMESPACE"] if with_namespace else []) + cols


def row(obj: Obj, kind: str, wide: bool, now: datetime, with_namespace: bool = False) -> list[str]:
    """The cells of one object's line, aligned with ``columns(kind, wide)``."""
    _, _, fn = _PRINTERS.get(kind, _DEFAULT)
    cells = fn(obj if isinstance(obj, dict) else {}, wide, now)
    if with_namespace:
        cells = [cell(dig(obj, "metadata", "namespace"))] + cells
    return cells
