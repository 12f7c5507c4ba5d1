"""kubectl-style printing: `get` tables, `get -w` rows, `-o yaml|json`.

Pure functions, no I/O. Column sets and cell rules are the ones the real
apiserver renders (server-side Table printing of kubernetes 1.36 for Pods,
Nodes, Services, Events, Namespaces; the CRDs' additionalPrinterColumns for
the six job kinds, PodGroup and Queue), laid out the way kubectl 1.32 lays them out
(its tabwriter: minwidth 6, padding 3, widths remembered across a watch).
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from typing import Any, Iterable, Sequence

import yaml

from phalanx.clock import parse_time

Obj = dict[str, Any]

NONE = "<none>"
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

# --------------------------------------------------------------------------
# Go text/tabwriter (github.com/liggitt/tabwriter, as vendored by kubectl)
# --------------------------------------------------------------------------


class TabWriter:
    """A port of Go's elastic-tabstop writer, enough for kubectl's output.

    Cells are tab-terminated; the last cell of a line is never padded. A column
    block is a run of consecutive lines that have a cell in that column, which
    is why `describe` sections align independently. With ``remember_widths``
    column widths only grow across flushes (what keeps `get -w` rows aligned).
    """

    def __init__(self, minwidth: int = 0, padding: int = 1, remember_widths: bool = False) -> None:
        self.minwidth = minwidth
        self.padding = padding
        self.remember_widths = remember_widths
        self.max_widths: list[int] = []
        self._buf: list[str] = []

    def write(self, text: str) -> None:
        self._buf.append(text)

    def flush(self) -> str:
        """Format everything written since the last flush and return it."""
        text = "".join(self._buf)
        self._buf = []
        if not text:
            return ""
        lines = [line.split("\t") for line in text.split("\n")]
        out: list[str] = []
        self._format(lines, [], 0, len(lines), out)
        return "".join(out)

    def _format(self, lines: list[list[str]], widths: list[int], line0: int, line1: int,
                out: list[str]) -> None:
        column = len(widths)
        this = line0
        while this < line1:
            if column >= len(lines[this]) - 1:
                this += 1
                continue
            self._write_lines(lines, widths, line0, this, out)
            line0 = this
            width = self.minwidth
            while this < line1 and column < len(lines[this]) - 1:
                width = max(width, len(lines[this][column]) + self.padding)
                this += 1
            if self.remember_widths:
                if len(self.max_widths) < len(widths):
                    self.max_widths.extend(widths[len(self.max_widths):])
                if len(self.max_widths) == column:
                    self.max_widths.append(width)
                elif self.max_widths[column] > width:
                    width = self.max_widths[column]
                else:
                    self.max_widths[column] = width
            widths.append(width)
            self._format(lines, widths, line0, this, out)
            widths.pop()
            line0 = this
        self._write_lines(lines, widths, line0, line1, out)

    @staticmethod
    def _write_lines(lines: list[list[str]], widths: list[int], line0: int, line1: int,
                     out: list[str]) -> None:
        for i in range(line0, line1):
            for j, cell in enumerate(lines[i]):
                out.append(cell)
                if j < len(widths):
                    out.append(" " * (widths[j] - len(cell)))
            if i + 1 < len(lines):
                out.append("\n")


def escape_terminal(text: str) -> str:
    """kubectl's EscapeTerminal: user data may not drive the terminal."""
    return text.replace("\x1b", "^[").replace("\r", "\\r")


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


def _as_time(ts: str | datetime | None) -> datetime | None:
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
    t = _as_time(creation_ts)
    if t is None:
        return "<unknown>"
    return human_duration((now - t).total_seconds())


# --------------------------------------------------------------------------
# Small accessors
# --------------------------------------------------------------------------


def _get(obj: Any, *path: str | int) -> Any:
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


def _list(obj: Any, *path: str) -> list:
    v = _get(obj, *path)
    return v if isinstance(v, list) else []


def _dict(obj: Any, *path: str) -> dict:
    v = _get(obj, *path)
    return v if isinstance(v, dict) else {}


def _str(v: Any) -> str:
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


def _crd_cell(v: Any) -> str:
    """A CRD printer-column cell: null prints empty, numbers without decimals."""
    if v is None:
        return ""
    return go_value(v)


def format_labels(labels: dict[str, str] | None) -> str:
    """apimachinery labels.FormatLabels: sorted `k=v,k=v`, `<none>` when empty."""
    if not labels:
        return NONE
    return ",".join(f"{k}={labels[k]}" for k in sorted(labels))


# --------------------------------------------------------------------------
# Pod (pkg/printers/internalversion printPod)
# --------------------------------------------------------------------------


def _restartable_init(container: dict | None) -> bool:
    return bool(container) and container.get("restartPolicy") == "Always"


def _condition_true(pod: Obj, ctype: str) -> bool:
    return any(c.get("type") == ctype and c.get("status") == "True"
               for c in _list(pod, "status", "conditions") if isinstance(c, dict))


def _terminated_reason(term: dict, prefix: str = "") -> str:
    if term.get("reason"):
        return prefix + term["reason"]
    if term.get("signal"):
        return f"{prefix}Signal:{term['signal']}"
    return f"{prefix}ExitCode:{term.get('exitCode', 0)}"


def pod_summary(pod: Obj, now: datetime) -> tuple[str, str, str]:
    """(READY, STATUS, RESTARTS) exactly as the apiserver's printPod derives them."""
    spec = _dict(pod, "spec")
    status = _dict(pod, "status")
    containers = _list(spec, "containers")
    init_containers = [c for c in _list(spec, "initContainers") if isinstance(c, dict)]
    total = len(containers)
    ready = 0
    restarts = 0
    sidecar_restarts = 0
    last_restart: datetime | None = None
    last_sidecar_restart: datetime | None = None

    phase = status.get("phase") or ""
    reason = status.get("reason") or phase
    for c in _list(status, "conditions"):
        if isinstance(c, dict) and c.get("type") == "PodScheduled" and c.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"

    by_name = {c.get("name"): c for c in init_containers}
    total += sum(1 for c in init_containers if _restartable_init(c))

    def later(a: datetime | None, b: Any) -> datetime | None:
        t = _as_time(b)
        if t is None:
            return a
        return t if a is None or t > a else a

    initializing = False
    for i, cs in enumerate(s for s in _list(status, "initContainerStatuses") if isinstance(s, dict)):
        count = int(cs.get("restartCount") or 0)
        restarts += count
        last_term = _get(cs, "lastState", "terminated")
        if isinstance(last_term, dict):
            last_restart = later(last_restart, last_term.get("finishedAt"))
        sidecar = _restartable_init(by_name.get(cs.get("name")))
        if sidecar:
            sidecar_restarts += count
            if isinstance(last_term, dict):
                last_sidecar_restart = later(last_sidecar_restart, last_term.get("finishedAt"))
        term = _get(cs, "state", "terminated")
        waiting = _get(cs, "state", "waiting")
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
        for cs in reversed([s for s in _list(status, "containerStatuses") if isinstance(s, dict)]):
            restarts += int(cs.get("restartCount") or 0)
            last_term = _get(cs, "lastState", "terminated")
            if isinstance(last_term, dict):
                last_restart = later(last_restart, last_term.get("finishedAt"))
            waiting = _get(cs, "state", "waiting")
            term = _get(cs, "state", "terminated")
            if isinstance(waiting, dict) and waiting.get("reason"):
                reason = waiting["reason"]
            elif isinstance(term, dict):
                reason = _terminated_reason(term)
                if int(term.get("exitCode") or 0) != 0 and not error_reason:
                    error_reason = reason
            elif cs.get("ready") and isinstance(_get(cs, "state", "running"), dict):
                has_running = True
                ready += 1
        if reason == "Completed" and has_running:
            if _condition_true(pod, "Ready"):
                reason = "Running"
            else:
                reason = error_reason or "NotReady"

    deleting = bool(_get(pod, "metadata", "deletionTimestamp"))
    if deleting and status.get("reason") == "NodeLost":
        reason = "Unknown"
    elif deleting and phase not in ("Succeeded", "Failed"):
        reason = "Terminating"

    restarts_str = str(restarts)
    if restarts != 0 and last_restart is not None:
        restarts_str = f"{restarts} ({human_duration((now - last_restart).total_seconds())} ago)"
    return f"{ready}/{total}", reason, restarts_str


def pod_status(pod: Obj) -> str:
    """The STATUS column of `kubectl get pods` (Running, Init:0/1, CrashLoopBackOff, ...)."""
    return pod_summary(pod, _EPOCH)[1]  # the time only matters for RESTARTS


def _pod_row(pod: Obj, wide: bool, now: datetime) -> list[str]:
    ready, status, restarts = pod_summary(pod, now)
    cells = [_str(_get(pod, "metadata", "name")), ready, status, restarts,
             age(_get(pod, "metadata", "creationTimestamp"), now)]
    if wide:
        ips = _list(pod, "status", "podIPs")
        ip = _str(_get(ips, 0, "ip")) if ips else ""
        gates = _list(pod, "spec", "readinessGates")
        gates_str = NONE
        if gates:
            conds = {c.get("type"): c.get("status") for c in _list(pod, "status", "conditions")
                     if isinstance(c, dict)}
            true = sum(1 for g in gates if isinstance(g, dict) and conds.get(g.get("conditionType")) == "True")
            gates_str = f"{true}/{len(gates)}"
        cells += [ip or NONE, _str(_get(pod, "spec", "nodeName")) or NONE,
                  _str(_get(pod, "status", "nominatedNodeName")) or NONE, gates_str]
    return cells


# --------------------------------------------------------------------------
# Other built-in kinds
# --------------------------------------------------------------------------


def node_roles(node: Obj) -> list[str]:
    roles = set()
    for k, v in _dict(node, "metadata", "labels").items():
        if k.startswith("node-role.kubernetes.io/"):
            role = k[len("node-role.kubernetes.io/"):]
            if role:
                roles.add(role)
        elif k == "kubernetes.io/role" and v:
            roles.add(v)
    return sorted(roles)


def _node_address(node: Obj, kind: str) -> str:
    for a in _list(node, "status", "addresses"):
        if isinstance(a, dict) and a.get("type") == kind:
            return _str(a.get("address"))
    return NONE


def _node_row(node: Obj, wide: bool, now: datetime) -> list[str]:
    status: list[str] = []
    for c in _list(node, "status", "conditions"):
        if isinstance(c, dict) and c.get("type") == "Ready":
            status = ["Ready" if c.get("status") == "True" else "NotReady"]
    if not status:
        status = ["Unknown"]
    if _get(node, "spec", "unschedulable"):
        status.append("SchedulingDisabled")
    info = _dict(node, "status", "nodeInfo")
    cells = [_str(_get(node, "metadata", "name")), ",".join(status), ",".join(node_roles(node)) or NONE,
             age(_get(node, "metadata", "creationTimestamp"), now), _str(info.get("kubeletVersion"))]
    if wide:
        kernel = _str(info.get("kernelVersion")) or "<unknown>"
        if info.get("kernelVersion") and info.get("architecture"):
            kernel = f"{info['kernelVersion']} ({info['architecture']})"
        cells += [_node_address(node, "InternalIP"), _node_address(node, "ExternalIP"),
                  _str(info.get("osImage")) or "<unknown>", kernel,
                  _str(info.get("containerRuntimeVersion")) or "<unknown>"]
    return cells


def _service_external_ip(svc: Obj) -> str:
    spec = _dict(svc, "spec")
    stype = spec.get("type") or "ClusterIP"
    external = [str(x) for x in _list(spec, "externalIPs")]
    if stype in ("ClusterIP", "NodePort"):
        return ",".join(external) if external else NONE
    if stype == "LoadBalancer":
        lb = []
        for ing in _list(svc, "status", "loadBalancer", "ingress"):
            if isinstance(ing, dict) and (ing.get("ip") or ing.get("hostname")):
                lb.append(str(ing.get("ip") or ing.get("hostname")))
        lb = sorted(set(lb))
        if external:
            return ",".join(lb + external)
        return ",".join(lb) if lb else "<pending>"
    if stype == "ExternalName":
        return _str(spec.get("externalName"))
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
    spec = _dict(svc, "spec")
    ips = _list(spec, "clusterIPs")
    cluster_ip = _str(ips[0]) if ips else (_str(spec.get("clusterIP")) or NONE)
    cells = [_str(_get(svc, "metadata", "name")), _str(spec.get("type") or "ClusterIP"), cluster_ip,
             _service_external_ip(svc), service_ports(_list(spec, "ports")) or NONE,
             age(_get(svc, "metadata", "creationTimestamp"), now)]
    if wide:
        cells.append(format_labels(_dict(spec, "selector")))
    return cells


def _event_row(ev: Obj, wide: bool, now: datetime) -> list[str]:
    first = age(ev.get("firstTimestamp"), now) if ev.get("firstTimestamp") else age(ev.get("eventTime"), now)
    last = age(ev.get("lastTimestamp"), now) if ev.get("lastTimestamp") else first
    count = ev.get("count") or 1
    series = ev.get("series")
    if isinstance(series, dict):
        last = age(series.get("lastObservedTime"), now)
        count = series.get("count") or count
    inv = _dict(ev, "involvedObject")
    target = _str(inv.get("kind")).lower()
    if inv.get("name"):
        target = f"{target}/{inv['name']}"
    message = _str(ev.get("message")).strip()
    if not wide:
        return [last, _str(ev.get("type")), _str(ev.get("reason")), target, message]
    source = _dict(ev, "source")
    component = source.get("component") or ev.get("reportingController") or ev.get("reportingComponent") or ""
    host = source.get("host") or ev.get("reportingInstance") or ""
    src = f"{component}, {host}" if host else str(component)
    return [last, _str(ev.get("type")), _str(ev.get("reason")), target, _str(inv.get("fieldPath")), src,
            message, first, str(count), _str(_get(ev, "metadata", "name"))]


def _namespace_row(ns: Obj, wide: bool, now: datetime) -> list[str]:
    return [_str(_get(ns, "metadata", "name")), _str(_get(ns, "status", "phase")),
            age(_get(ns, "metadata", "creationTimestamp"), now)]


# --------------------------------------------------------------------------
# Custom resources (the CRDs' additionalPrinterColumns)
# --------------------------------------------------------------------------


def _job_state(job: Obj) -> str:
    conds = _list(job, "status", "conditions")
    return _crd_cell(_get(conds, -1, "type")) if conds else ""


def _job_row(job: Obj, wide: bool, now: datetime) -> list[str]:
    return [_str(_get(job, "metadata", "name")), _job_state(job), age(_get(job, "metadata", "creationTimestamp"), now)]


def _mpijob_row(job: Obj, wide: bool, now: datetime) -> list[str]:
    """The MPIJob CRD declares Age before State."""
    return [_str(_get(job, "metadata", "name")), age(_get(job, "metadata", "creationTimestamp"), now), _job_state(job)]


def _podgroup_row(pg: Obj, wide: bool, now: datetime) -> list[str]:
    cells = [_str(_get(pg, "metadata", "name")), _crd_cell(_get(pg, "status", "phase")),
             _crd_cell(_get(pg, "spec", "minMember")), _crd_cell(_get(pg, "status", "running")),
             age(_get(pg, "metadata", "creationTimestamp"), now)]
    if wide:
        cells.append(_crd_cell(_get(pg, "spec", "queue")))
    return cells


def _queue_row(q: Obj, wide: bool, now: datetime) -> list[str]:
    return [_str(_get(q, "metadata", "name")), _crd_cell(_get(q, "spec", "parent"))]


def _default_row(obj: Obj, wide: bool, now: datetime) -> list[str]:
    return [_str(_get(obj, "metadata", "name")), age(_get(obj, "metadata", "creationTimestamp"), now)]


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
    "Queue": (("NAME", "PARENT"), (), _queue_row),
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
        cells = [_str(_get(obj, "metadata", "namespace"))] + cells
    return cells


# --------------------------------------------------------------------------
# Table layout
# --------------------------------------------------------------------------

_BREAK = re.compile(r"[\f\n\r]")


def _cell_text(cell: Any) -> str:
    text = cell if isinstance(cell, str) else _crd_cell(cell)
    m = _BREAK.search(text)
    if m:
        text = text[:m.start()] + "..."
    return escape_terminal(text)


def _table_lines(headers: Sequence[str] | None, rows: Iterable[Sequence[Any]]) -> str:
    parts = []
    if headers:
        parts.append("\t".join(h.upper() for h in headers) + "\n")
    for r in rows:
        parts.append("\t".join(_cell_text(c) for c in r) + "\n")
    return "".join(parts)


def _table_writer() -> TabWriter:
    return TabWriter(minwidth=6, padding=3, remember_widths=True)


def format_table(headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    """Lay out a table as kubectl does: left aligned, 3 spaces between columns."""
    w = _table_writer()
    w.write(_table_lines(headers, rows))
    return w.flush()


class WatchPrinter:
    """What `kubectl get -w` prints: the header once with the first rows, then one
    line per event, column widths growing but never shrinking (kubectl keeps one
    tabwriter with RememberWidths for the whole watch)."""

    def __init__(self, kind: str, wide: bool = False, with_namespace: bool = False,
                 no_headers: bool = False) -> None:
        self.kind = kind
        self.wide = wide
        self.with_namespace = with_namespace
        self._header_done = no_headers
        self._writer = _table_writer()

    def print(self, objs: Iterable[Obj], now: datetime) -> str:
        rows = [row(o, self.kind, self.wide, now, self.with_namespace) for o in objs]
        if not rows:
            return ""
        headers = None
        if not self._header_done:
            headers = columns(self.kind, self.wide, self.with_namespace)
            self._header_done = True
        self._writer.write(_table_lines(headers, rows))
        return self._writer.flush()


def watch_row(obj: Obj, kind: str, wide: bool, now: datetime,
              widths: Sequence[int] = ()) -> tuple[str, list[int]]:
    """One `get -w` line for an event, given the widths remembered so far.

    Returns the line and the new remembered widths (pure form of WatchPrinter).
    """
    w = _table_writer()
    w.max_widths = list(widths)
    w.write(_table_lines(None, [row(obj, kind, wide, now)]))
    return w.flush(), list(w.max_widths)


# --------------------------------------------------------------------------
# -o yaml | -o json
# --------------------------------------------------------------------------


def _strip_managed_fields(obj: Any) -> Any:
    if isinstance(obj, dict):
        out = {}
        for k, v in obj.items():
            if k == "metadata" and isinstance(v, dict):
                v = {mk: mv for mk, mv in v.items() if mk != "managedFields"}
            out[k] = _strip_managed_fields(v) if k in ("items",) else v
        return out
    if isinstance(obj, list):
        return [_strip_managed_fields(o) for o in obj]
    return obj


def as_list(items: Iterable[Obj]) -> Obj:
    """The `List` wrapper kubectl prints for several objects with -o yaml|json."""
    return {"apiVersion": "v1", "items": list(items), "kind": "List", "metadata": {"resourceVersion": ""}}


class _KubeDumper(yaml.SafeDumper):
    """YAML as kubectl (go-yaml v2) writes it: strings that would read back as
    another type are double-quoted, multi-line strings are literal blocks."""


# go-yaml v2 also reads these one-letter words as booleans (PyYAML does not).
_GO_YAML_BOOLS = frozenset({"y", "Y", "n", "N"})


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    tag = dumper.resolve(yaml.ScalarNode, value, (True, False))
    if tag != "tag:yaml.org,2002:str" or value in _GO_YAML_BOOLS:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style='"')
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


def _represent_float(dumper: yaml.SafeDumper, value: float) -> yaml.ScalarNode:
    if value.is_integer() and abs(value) < 1e15:
        return dumper.represent_int(int(value))
    return yaml.SafeDumper.represent_float(dumper, value)


_KubeDumper.add_representer(str, _represent_str)
_KubeDumper.add_representer(float, _represent_float)


def to_yaml(obj: Any) -> str:
    """`-o yaml`: keys sorted (so apiVersion, kind, metadata, spec, status), no managedFields."""
    return yaml.dump(_strip_managed_fields(obj), Dumper=_KubeDumper, default_flow_style=False,
                     sort_keys=True, allow_unicode=True, width=80)


def _go_escape(text: str) -> str:
    for ch, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e"),
                    ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def compact_json(obj: Any) -> str:
    """JSON as Go's json.Marshal writes a decoded object: compact, sorted keys, HTML characters escaped."""
    return _go_escape(json.dumps(obj, separators=(",", ":"), sort_keys=True, ensure_ascii=False))


def to_json(obj: Any) -> str:
    """`-o json`: 4-space indent, sorted keys, HTML characters escaped as Go does."""
    return _go_escape(json.dumps(_strip_managed_fields(obj), indent=4, sort_keys=True, ensure_ascii=False)) + "\n"


# --------------------------------------------------------------------------
# -o name | -o custom-columns | --show-labels | --sort-by
# --------------------------------------------------------------------------


def object_name(obj: Obj) -> str:
    """`-o name` and `kind/name` table cells: ``pod/x``, ``pytorchjob.kubeflow.org/x``."""
    kind = _str(obj.get("kind")).lower()
    api_version = _str(obj.get("apiVersion"))
    group = api_version.split("/", 1)[0] if "/" in api_version else ""
    return f"{kind}{'.' + group if group else ''}/{_str(_get(obj, 'metadata', 'name'))}"


def with_kind_names(rows: list[list[str]], objs: Sequence[Obj], with_namespace: bool) -> list[list[str]]:
    """Table rows whose NAME cell is ``kind/name`` (what kubectl prints when several kinds are listed)."""
    i = 1 if with_namespace else 0
    return [r[:i] + [object_name(o)] + r[i + 1:] for r, o in zip(rows, objs)]


def add_labels_column(headers: list[str], rows: list[list[str]], objs: Sequence[Obj]) -> tuple[list[str], list]:
    """`--show-labels`: a LABELS column (sorted ``k=v`` pairs) at the end."""
    return headers + ["LABELS"], [r + [format_labels(_dict(o, "metadata", "labels"))] for r, o in zip(rows, objs)]


def go_print(v: Any) -> str:
    """A decoded JSON value as Go's ``fmt.Sprintf("%v")`` prints it (custom-columns cells)."""
    if isinstance(v, dict):
        return "map[" + " ".join(f"{k}:{go_print(v[k])}" for k in sorted(v)) + "]"
    if isinstance(v, list):
        return "[" + " ".join(go_print(x) for x in v) + "]"
    return go_value(v)


def parse_custom_columns(spec: str) -> list[tuple[str, str]]:
    """``HEADER:.json.path,...`` into (header, relaxed template) pairs; ValueError as kubectl words it."""
    from .jsonpath import JSONPathError, parse, relaxed

    if not spec:
        raise ValueError("custom-columns format specified but no custom columns given")
    cols = []
    for part in spec.split(","):
        bits = part.split(":", 1)
        if len(bits) != 2:
            raise ValueError(f'unexpected custom-columns spec: {part}, expected <header>:<json-path-expr>')
        try:
            template = relaxed(bits[1])
            parse(template)
        except JSONPathError as e:
            raise ValueError(str(e)) from None
        cols.append((bits[0], template))
    return cols


def custom_columns_rows(cols: list[tuple[str, str]], objs: Iterable[Obj]) -> list[list[str]]:
    """One row per object: each column's values joined by commas, ``<none>`` when it has none."""
    from .jsonpath import find_results

    rows = []
    for o in objs:
        cells = []
        for _, template in cols:
            results = find_results(template, o, allow_missing=True)
            values = results[0] if results else []
            cells.append(",".join(go_print(v) for v in values) if values else NONE)
        rows.append(cells)
    return rows


def _natural_key(s: str) -> list[tuple[int, Any]]:
    """Natural order as kubectl's sortorder.NaturalLess: digit runs compare as numbers."""
    return [(0, int(t), len(t)) if t.isdigit() else (1, t, 0) for t in re.split(r"(\d+)", s) if t != ""]


def sort_objects(objs: list[Obj], expr: str) -> list[Obj]:
    """`--sort-by EXPR`: objects ordered by the JSONPath's first value (numbers numerically,
    quantities as quantities, other strings naturally); those without it first.
    ValueError when no object has the field, as kubectl."""
    from .jsonpath import JSONPathError, find_results, relaxed
    from ..api.quantity import parse_quantity

    try:
        template = relaxed(expr)
        keyed = []
        for o in objs:
            results = find_results(template, o, allow_missing=True)
            keyed.append(results[0][0] if results and results[0] else _MISSING_SORT)
    except JSONPathError as e:
        raise ValueError(str(e)) from None
    if objs and all(k is _MISSING_SORT for k in keyed):
        raise ValueError(f"couldn't find any field with path \"{template}\" in the list of objects")

    def key(k: Any) -> tuple:
        if k is _MISSING_SORT:
            return (0,)
        if isinstance(k, bool):
            return (1, int(k))
        if isinstance(k, (int, float)):
            return (2, k)
        if isinstance(k, str):
            try:
                return (3, float(parse_quantity(k)))
            except (ValueError, TypeError, ArithmeticError):
                return (4, _natural_key(k))
        return (5, go_print(k))

    order = sorted(range(len(objs)), key=lambda i: key(keyed[i]))
    return [objs[i] for i in order]


_MISSING_SORT = object()
