"""Server-side printing: ``meta.k8s.io/v1`` Tables for list, get and watch.

kubectl 1.32 asks for a Table on every ``get`` and only lays it out: without one
it prints NAME and AGE alone (docs/REFERENCE.md W1.5). Built-in kinds get the
apiserver's printers (cells from ``phalanx.cli.printers``, all strings); the
custom resources get their CRD's additionalPrinterColumns (cells keep JSON
types, a missing value is null, dates are rendered ages). Pure: ``now`` is given.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from phalanx.api.columns import age, go_value, queue_wide_cells, row
from phalanx.objects.clock import parse_time

Obj = dict[str, Any]

TABLE_GROUP = "meta.k8s.io"
TABLE_VERSIONS = ("v1", "v1beta1")
# The apiserver answers a Table request with a plain JSON content type (docs/REFERENCE.md golden 13, 19, 26, 52).
TABLE_CONTENT_TYPE = "application/json"
INCLUDE_OBJECT = ("Metadata", "Object", "None")

# --------------------------------------------------------------------------
# Content negotiation
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class MediaRange:
    """One clause of an Accept header: ``type/subtype;param=value;q=0.5``."""

    type: str
    subtype: str
    params: dict[str, str]
    q: float = 1.0


def _split_outside_quotes(text: str, sep: str) -> list[str]:
    parts, buf, quoted, escaped = [], [], False, False
    for ch in text:
        if escaped:
            buf.append(ch)
            escaped = False
        elif ch == "\\" and quoted:
            buf.append(ch)
            escaped = True
        elif ch == '"':
            buf.append(ch)
            quoted = not quoted
        elif ch == sep and not quoted:
            parts.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
    parts.append("".join(buf))
    return parts


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        return re.sub(r"\\(.)", r"\1", value[1:-1])
    return value


def parse_accept(header: str | None) -> list[MediaRange]:
    """The clauses of an Accept header, most preferred first (by q, then
    concrete types before wildcards; ties keep the client's order). Malformed
    clauses are skipped, never fatal."""
    ranges: list[MediaRange] = []
    for clause in _split_outside_quotes(header or "", ","):
        pieces = _split_outside_quotes(clause, ";")
        typ, slash, subtype = pieces[0].strip().lower().partition("/")
        if not typ or not slash or not subtype:
            continue
        params: dict[str, str] = {}
        q = 1.0
        for piece in pieces[1:]:
            key, eq, value = piece.partition("=")
            key = key.strip().lower()
            if not key or not eq:
                continue
            if key == "q":
                try:
                    q = float(value.strip())
                except ValueError:
                    q = 0.0
                if not 0.0 <= q <= 1.0:
                    q = 0.0
                continue
            params[key] = _unquote(value)
        ranges.append(MediaRange(typ, subtype.strip(), params, q))
    ordered = sorted(enumerate(ranges), key=lambda ir: (-ir[1].q, ir[1].type == "*", ir[1].subtype == "*", ir[0]))
    return [r for _, r in ordered]


def negotiate_table(accept_header: str | None) -> str | None:
    """The Table version to answer with (``"v1"`` or ``"v1beta1"``), or None for
    the plain object. The first acceptable clause wins, as in apimachinery:
    a JSON clause asking for another conversion (e.g. PartialObjectMetadata)
    or a media type we do not produce (protobuf, yaml) is passed over."""
    for r in parse_accept(accept_header):
        if r.q <= 0:
            continue
        if (r.type, r.subtype) not in (("application", "json"), ("application", "*"), ("*", "*")):
            continue
        conversion = r.params.get("as")
        if conversion is None:
            return None
        if (conversion == "Table" and r.params.get("g") == TABLE_GROUP
                and r.params.get("v") in TABLE_VERSIONS and r.subtype == "json"):
            return r.params["v"]
    return None


def accepts_table(accept_header: str | None) -> bool:
    """True when the client prefers a ``meta.k8s.io`` Table (kubectl get does)."""
    return negotiate_table(accept_header) is not None


def parse_include_object(value: str | None) -> str:
    """The ``includeObject`` query parameter (default Metadata); ValueError names the rule."""
    if value is None or value == "":
        return "Metadata"
    if value not in INCLUDE_OBJECT:
        raise ValueError(f'includeObject: Unsupported value: "{value}": supported values: '
                         + ", ".join(f'"{v}"' for v in INCLUDE_OBJECT))
    return value


# --------------------------------------------------------------------------
# Column definitions
# --------------------------------------------------------------------------

NAME_DESCRIPTION = (
    "Name must be unique within a namespace. Is required when creating resources, although some resources may "
    "allow a client to request the generation of an appropriate name automatically. Name is primarily intended "
    "for creation idempotence and configuration definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names")
AGE_DESCRIPTION = (
    "CreationTimestamp is a timestamp representing the server time when this object was created. It is not "
    "guaranteed to be set in happens-before order across separate operations. Clients may not set this value. "
    "It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. "
    "More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata")
_NODE_ADDRESSES = (
    "List of addresses reachable to the node. Queried from cloud provider, if available. More info: "
    "https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, "
    "but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers "
    "should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should "
    "assume that addresses can change during the lifetime of a Node. However, there are some exceptions where "
    "this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the "
    "downward API (status.hostIP).")


def _col(name: str, description: str, priority: int = 0, type: str = "string", format: str = "") -> Obj:
    return {"name": name, "type": type, "format": format, "description": description, "priority": priority}


_NAME_COL = _col("Name", NAME_DESCRIPTION, format="name")
_AGE_COL = _col("Age", AGE_DESCRIPTION)

# The apiserver's built-in printers (pkg/printers/internalversion). Pod and Node
# texts are the goldens' (52, 13); Service, Event and Namespace have no golden
# and carry shortened descriptions (kubectl never prints them).
BUILTIN_COLUMNS: dict[str, list[Obj]] = {
    "Pod": [
        _NAME_COL,
        _col("Ready", "The aggregate readiness state of this pod for accepting traffic."),
        _col("Status", "The aggregate status of the containers in this pod."),
        _col("Restarts", "The number of times the containers in this pod have been restarted and when the last "
                         "container in this pod has restarted."),
        _AGE_COL,
        _col("IP", "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet "
                   "allocated.", 1),
        _col("Node", "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate "
                     "for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet "
                     "for this node becomes responsible for the lifecycle of this pod. This field should not be "
                     "used to express a desire for the pod to be scheduled on a specific node. "
                     "https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename", 1),
        _col("Nominated Node", "nominatedNodeName is set only when this pod preempts other pods on the node, but it "
                               "cannot be scheduled right away as preemption victims receive their graceful "
                               "termination periods. This field does not guarantee that the pod will be scheduled "
                               "on this node. Scheduler may decide to place the pod elsewhere if other nodes become "
                               "available sooner. Scheduler may also decide to give the resources on this node to a "
                               "higher priority pod that is created after preemption. As a result, this field may "
                               "be different than PodSpec.nodeName when the pod is scheduled.", 1),
        _col("Readiness Gates", "If specified, all readiness gates will be evaluated for pod readiness. A pod is "
                                "ready when all its containers are ready AND all conditions specified in the "
                                "readiness gates have status equal to \"True\" More info: "
                                "https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates", 1),
    ],
    "Node": [
        _NAME_COL,
        _col("Status", "The status of the node"),
        _col("Roles", "The roles of the node"),
        _AGE_COL,
        _col("Version", "Kubelet Version reported by the node."),
        _col("Internal-IP", _NODE_ADDRESSES, 1),
        _col("External-IP", _NODE_ADDRESSES, 1),
        _col("OS-Image", "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).", 1),
        _col("Kernel-Version", "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).", 1),
        _col("Container-Runtime", "ContainerRuntime Version reported by the node through runtime remote API (e.g. "
                                  "containerd://1.4.2).", 1),
    ],
    "Service": [
        _NAME_COL,
        _col("Type", "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are "
                     "ExternalName, ClusterIP, NodePort, and LoadBalancer."),
        _col("Cluster-IP", "clusterIP is the IP address of the service and is usually assigned randomly."),
        _col("External-IP", "externalIPs is a list of IP addresses for which nodes in the cluster will also accept "
                            "traffic for this service."),
        _col("Port(s)", "The list of ports that are exposed by this service."),
        _AGE_COL,
        _col("Selector", "Route service traffic to pods with label keys and values matching this selector.", 1),
    ],
    "Event": [
        _col("Last Seen", "The time at which the most recent occurrence of this event was recorded."),
        _col("Type", "Type of this event (Normal, Warning), new types could be added in the future"),
        _col("Reason", "This should be a short, machine understandable string that gives the reason for the "
                       "transition into the object's current status."),
        _col("Object", "The object that this event is about."),
        _col("Subobject", "If referring to a piece of an object instead of an entire object, this string should "
                          "contain a valid JSON/Go field access statement, such as "
                          "desiredState.manifest.containers[2].", 1),
        _col("Source", "The component reporting this event. Should be a short machine understandable string.", 1),
        _col("Message", "A human-readable description of the status of this operation."),
        _col("First Seen", "The time at which the event was first recorded. (Time of server receipt is in "
                           "TypeMeta.)", 1),
        _col("Count", "The number of times this event has occurred.", 1),
        _col("Name", NAME_DESCRIPTION, 1, format="name"),
    ],
    "Namespace": [
        _NAME_COL,
        _col("Status", "The status of the namespace"),
        _AGE_COL,
    ],
    "PriorityClass": [
        _NAME_COL,
        _col("Value", "value represents the integer value of this priority class. This is the actual priority that "
                      "pods receive when they have the name of this class in their pod spec.", type="integer"),
        _col("Global-Default", "globalDefault specifies whether this PriorityClass should be considered as the "
                               "default priority for pods that do not have any priority class. Only one "
                               "PriorityClass can be marked as `globalDefault`. However, if more than one "
                               "PriorityClasses exists with their `globalDefault` field set to true, the smallest "
                               "value of such global default PriorityClasses will be used as the default priority.",
             type="boolean"),
        _AGE_COL,
        _col("PreemptionPolicy", "preemptionPolicy is the Policy for preempting pods with lower priority. One of "
                                 "Never, PreemptLowerPriority. Defaults to PreemptLowerPriority if unset."),
    ],
    "HorizontalPodAutoscaler": [
        _NAME_COL,
        _col("Reference", "scaleTargetRef points to the target resource to scale, and is used to the pods for which "
                          "metrics should be collected, as well as to actually change the replica count."),
        _col("Targets", "metrics contains the specifications for which to use to calculate the desired replica "
                        "count (the maximum replica count across all metrics will be used).  The desired replica "
                        "count is calculated multiplying the ratio between the target value and the current value "
                        "by the current number of pods.  Ergo, metrics used must decrease as the pod count is "
                        "increased, and vice-versa.  See the individual metric source types for more information "
                        "about how each type of metric must respond. If not set, the default metric will be set to "
                        "80% average CPU utilization."),
        _col("MinPods", "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale "
                        "down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate "
                        "HPAScaleToZero is enabled and at least one Object or External metric is configured.  "
                        "Scaling is active as long as at least one metric value is available."),
        _col("MaxPods", "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale "
                        "up. It cannot be less that minReplicas."),
        _col("Replicas", "currentReplicas is current number of replicas of pods managed by this autoscaler, as last "
                         "seen by the autoscaler."),
        _AGE_COL,
    ],
}


@dataclass(frozen=True)
class PrinterColumn:
    """One ``additionalPrinterColumns`` entry of a CRD."""

    name: str
    type: str
    json_path: str
    priority: int = 0
    format: str = ""


_JOB_STATE = PrinterColumn("State", "string", ".status.conditions[-1:].type")
_JOB_AGE = PrinterColumn("Age", "date", ".metadata.creationTimestamp")

# As in the CRDs (training-operator v1.9, Volcano): names, case and order exactly as
# declared (the MPIJob CRD lists Age before State).
CRD_COLUMNS: dict[str, tuple[PrinterColumn, ...]] = {
    "PyTorchJob": (_JOB_STATE, _JOB_AGE),
    "TFJob": (_JOB_STATE, _JOB_AGE),
    "XGBoostJob": (_JOB_STATE, _JOB_AGE),
    "PaddleJob": (_JOB_STATE, _JOB_AGE),
    "JAXJob": (_JOB_STATE, _JOB_AGE),
    "MPIJob": (_JOB_AGE, _JOB_STATE),
    "PodGroup": (PrinterColumn("STATUS", "string", ".status.phase"),
                 PrinterColumn("minMember", "integer", ".spec.minMember"),
                 PrinterColumn("RUNNINGS", "integer", ".status.running"),
                 PrinterColumn("AGE", "date", ".metadata.creationTimestamp"),
                 PrinterColumn("QUEUE", "string", ".spec.queue", priority=1)),
    "Queue": (PrinterColumn("PARENT", "string", ".spec.parent"),),
}
# Columns the embedded server adds after a CRD's own (not in the CRD `phalanx install`
# prints): computed, priority 1 (`get -o wide`), string cells with `<none>` when unset
# as the built-in printers make them.
SERVER_COLUMNS: dict[str, list[Obj]] = {
    "Queue": [
        _col("WEIGHT", "The queue's weight (.spec.weight): its share of the cluster against its siblings'.", 1),
        _col("RECLAIMABLE", "Whether resources lent to this queue may be reclaimed by others "
                            "(.spec.reclaimable; unset means true).", 1),
        _col("GUARANTEE", "Resources reserved for this queue (.spec.guarantee.resource).", 1),
        _col("DESERVED", "The queue's deserved share as the scheduler's proportion plugin last computed it "
                         "(annotation phalanx.dev/deserved).", 1),
        _col("ALLOCATED", "Resources the queue's running pods hold (.status.allocated).", 1),
        _col("RECLAIMING", "Whether the queue is below its deserved share with pods waiting and takes resources "
                           "back from queues above theirs (annotation phalanx.dev/reclaiming).", 1),
    ],
}
_SERVER_CELLS = {"Queue": queue_wide_cells}
# A kind with no printer at all gets what a CRD without columns gets: Name and Age.
_DEFAULT_COLUMNS = (PrinterColumn("Age", "date", ".metadata.creationTimestamp"),)


def _crd_columns(kind: str) -> tuple[PrinterColumn, ...]:
    return CRD_COLUMNS.get(kind, _DEFAULT_COLUMNS)


def column_definitions(kind: str) -> list[Obj]:
    """``columnDefinitions`` of the kind's Table (fresh dicts)."""
    if kind in BUILTIN_COLUMNS:
        return [dict(c) for c in BUILTIN_COLUMNS[kind]]
    return [dict(_NAME_COL)] + [
        _col(c.name, f"Custom resource definition column (in JSONPath format): {c.json_path}", c.priority,
             c.type, c.format) for c in _crd_columns(kind)] + [dict(c) for c in SERVER_COLUMNS.get(kind, ())]


# --------------------------------------------------------------------------
# Cells
# --------------------------------------------------------------------------

_STEP = re.compile(r"\.([A-Za-z0-9_-]+)|\[(-?\d*):(-?\d*)\]|\[(-?\d+)\]")


def json_path_values(obj: Any, path: str) -> list[Any]:
    """The values a simple CRD column JSONPath selects (``.a.b``, ``[i]``, ``[a:b]``);
    a missing key or index selects nothing. Other syntax selects nothing."""
    if not path.startswith("."):
        return []
    current = [obj]
    pos = 0
    while pos < len(path):
        m = _STEP.match(path, pos)
        if m is None:
            return []
        pos = m.end()
        nxt: list[Any] = []
        for value in current:
            if m.group(1) is not None:
                if isinstance(value, dict) and m.group(1) in value:
                    nxt.append(value[m.group(1)])
            elif m.group(4) is not None:
                i = int(m.group(4))
                if isinstance(value, list) and -len(value) <= i < len(value):
                    nxt.append(value[i])
            elif isinstance(value, list):
                start = int(m.group(2)) if m.group(2) else None
                stop = int(m.group(3)) if m.group(3) else None
                nxt.extend(value[start:stop])
        current = nxt
    return current


def go_print(value: Any) -> str:
    """A decoded JSON value as Go's ``fmt.Fprint`` writes it (what a string CRD column shows)."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{go_print(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_print(v) for v in value) + "]"
    return go_value(value)


def crd_cell(column: PrinterColumn, obj: Obj, now: datetime) -> Any:
    """One CRD column cell, as the apiserver's CRD table convertor makes it."""
    values = json_path_values(obj, column.json_path)
    if not values or values[0] is None:
        return None
    value = values[0]
    if column.type == "string":
        return go_print(value)
    if column.type == "integer":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return int(value)
    if column.type == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return None
        return float(value)
    if column.type == "boolean":
        return value if isinstance(value, bool) else None
    if column.type == "date":
        if not isinstance(value, str):
            return None
        try:
            parse_time(value)
        except ValueError:
            return "<invalid>"
        return age(value, now)
    return None


def _name(obj: Obj) -> str:
    md = obj.get("metadata")
    name = md.get("name") if isinstance(md, dict) else None
    return name if isinstance(name, str) else ""


def _int_cell(obj: Obj, *path: str) -> int:
    node: Any = obj
    for key in path:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, int) and not isinstance(node, bool) else 0


def cells_for(kind: str, obj: Obj, now: datetime) -> list[Any]:
    """The cells of one object, aligned with ``column_definitions(kind)``."""
    if kind in BUILTIN_COLUMNS:
        cells: list[Any] = list(row(obj, kind, True, now))  # the server always prints wide
        if kind == "Event":  # Count is an int64 cell in the apiserver's event printer
            try:
                cells[8] = int(cells[8])
            except (ValueError, IndexError):
                pass
        elif kind == "PriorityClass":  # Value is an int64 cell, Global-Default a boolean
            value = obj.get("value")
            cells[1] = value if isinstance(value, int) and not isinstance(value, bool) else 0
            cells[2] = obj.get("globalDefault") is True
        elif kind == "HorizontalPodAutoscaler":  # MaxPods and Replicas are int32 cells
            cells[4] = _int_cell(obj, "spec", "maxReplicas")
            cells[5] = _int_cell(obj, "status", "currentReplicas")
        return cells
    cells = [_name(obj)] + [crd_cell(c, obj, now) for c in _crd_columns(kind)]
    if kind in _SERVER_CELLS:
        cells.extend(_SERVER_CELLS[kind](obj))
    return cells


# --------------------------------------------------------------------------
# Rows and tables
# --------------------------------------------------------------------------

# ObjectMeta's Go field order: PartialObjectMetadata is encoded in it.
_META_ORDER = ("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation",
               "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations",
               "ownerReferences", "finalizers", "managedFields")

_POD_SUCCEEDED = [{"type": "Completed", "status": "True", "reason": "Succeeded",
                   "message": "The pod has completed successfully."}]
_POD_FAILED = [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}]


def partial_object_metadata(obj: Obj) -> Obj:
    """``meta.k8s.io/v1 PartialObjectMetadata`` of an object: its whole metadata."""
    md = obj.get("metadata")
    if not isinstance(md, dict):
        md = {}
    ordered = {k: md[k] for k in _META_ORDER if k in md}
    ordered.update({k: v for k, v in md.items() if k not in ordered})
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": ordered}


def table_row(kind: str, obj: Obj, now: datetime, include_object: str = "Metadata") -> Obj:
    """One ``rows[]`` entry: cells, row conditions (finished pods), and the object
    as ``include_object`` asks (PartialObjectMetadata, the object, or null)."""
    out: Obj = {"cells": cells_for(kind, obj, now)}
    if kind == "Pod":
        phase = (obj.get("status") or {}).get("phase") if isinstance(obj.get("status"), dict) else None
        if phase == "Succeeded":
            out["conditions"] = [dict(c) for c in _POD_SUCCEEDED]
        elif phase == "Failed":
            out["conditions"] = [dict(c) for c in _POD_FAILED]
    if include_object == "Object":
        out["object"] = obj
    elif include_object == "None":
        out["object"] = None
    else:
        out["object"] = partial_object_metadata(obj)
    return out


def _resource_version(obj: Obj) -> str | None:
    md = obj.get("metadata")
    return md.get("resourceVersion") if isinstance(md, dict) else None


def table_for(kind: str, objs: list[Obj], now: datetime, include_object: str = "Metadata",
              list_meta: Obj | None = None, *, version: str = "v1", no_headers: bool = False) -> Obj:
    """A ``meta.k8s.io`` Table of ``objs``. ``list_meta`` is the list's metadata
    (resourceVersion, continue, remainingItemCount); without it a one-object table
    carries that object's resourceVersion, as a GET or a watch event does."""
    include_object = parse_include_object(include_object)
    metadata: Obj = {}
    if list_meta is not None:
        for key in ("resourceVersion", "continue", "remainingItemCount"):
            if list_meta.get(key) not in (None, ""):
                metadata[key] = list_meta[key]
    elif len(objs) == 1 and _resource_version(objs[0]):
        metadata["resourceVersion"] = _resource_version(objs[0])
    return {
        "kind": "Table",
        "apiVersion": f"{TABLE_GROUP}/{version}",
        "metadata": metadata,
        "columnDefinitions": [] if no_headers else column_definitions(kind),
        "rows": [table_row(kind, o, now, include_object) for o in objs],
    }


def table_watch_event(type: str, kind: str, obj: Obj, now: datetime, include_object: str = "Metadata",
                      *, version: str = "v1") -> Obj:
    """A watch event whose object is a one-row Table (docs/REFERENCE.md golden 26: full column
    definitions in every event). An ERROR keeps its Status; a BOOKMARK becomes
    an empty Table carrying the resourceVersion."""
    if type == "ERROR":
        return {"type": type, "object": obj}
    if type == "BOOKMARK":
        rv = _resource_version(obj)
        return {"type": type, "object": {"kind": "Table", "apiVersion": f"{TABLE_GROUP}/{version}",
                                         "metadata": {"resourceVersion": rv} if rv else {},
                                         "columnDefinitions": [], "rows": []}}
    return {"type": type, "object": table_for(kind, [obj], now, include_object, version=version)}
