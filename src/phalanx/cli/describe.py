"""`kubectl describe`-style text for Pods, jobs, PodGroups, Queues, Nodes, Services.

Pure: the object, the related objects (its events, a job's PodGroup, a node's
pods, ...) and ``now`` come in, text goes out. Layout follows kubectl 1.32's
describers (k8s.io/kubectl/pkg/describe): a prefix writer over a tabwriter
with padding 2, so sections align exactly as kubectl aligns them. For a job
or PodGroup that waits for admission or resources, a ``Waiting:`` line (not in
kubectl) says why, from the PodGroup's Unschedulable condition.
"""
from __future__ import annotations

import json
import math
import re
from datetime import datetime, timezone
from decimal import Decimal, InvalidOperation
from typing import Any, Callable, Iterable

from phalanx.api.columns import NONE, age, as_time, cell, dig, dig_dict, dig_list, format_labels, go_value, node_roles
from phalanx.cli.printers import TabWriter, escape_terminal

Obj = dict[str, Any]

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MAX_ANNOTATION_LEN = 140


class PrefixWriter:
    """kubectl's PrefixWriter: each level indents two spaces; cells are tab-terminated."""

    def __init__(self) -> None:
        self._tw = TabWriter(minwidth=0, padding=2)
        self._out: list[str] = []

    def write(self, level: int, text: str) -> None:
        self._tw.write("  " * level + escape_terminal(text))

    def flush(self) -> None:
        self._out.append(self._tw.flush())

    def text(self) -> str:
        self.flush()
        return "".join(self._out)


# --------------------------------------------------------------------------
# Time formatting
# --------------------------------------------------------------------------

_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def rfc1123z(ts: Any, now: datetime) -> str:
    """Go's time.RFC1123Z (`Sun, 29 Nov 2026 07:14:40 +0000`) in the zone of ``now``;
    an unset time prints as Go's zero time, as kubectl does."""
    t = as_time(ts)
    if t is None:
        return "Mon, 01 Jan 0001 00:00:00 +0000"
    t = t.astimezone(now.tzinfo or timezone.utc)
    off = t.utcoffset() or (t - t)
    minutes = int(off.total_seconds()) // 60
    sign = "+" if minutes >= 0 else "-"
    minutes = abs(minutes)
    return (f"{_DAYS[t.weekday()]}, {t.day:02d} {_MONTHS[t.month - 1]} {t.year:04d} "
            f"{t.hour:02d}:{t.minute:02d}:{t.second:02d} {sign}{minutes // 60:02d}{minutes % 60:02d}")


def _since(ts: Any, now: datetime) -> str:
    return age(ts, now)


def _bool(v: Any) -> str:
    return "True" if v else "False"


# --------------------------------------------------------------------------
# Quantities (enough of resource.Quantity for describe's sums and percentages)
# --------------------------------------------------------------------------

_BINARY = {"Ki": 2 ** 10, "Mi": 2 ** 20, "Gi": 2 ** 30, "Ti": 2 ** 40, "Pi": 2 ** 50, "Ei": 2 ** 60}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1),
            "k": Decimal("1e3"), "M": Decimal("1e6"), "G": Decimal("1e9"), "T": Decimal("1e12"),
            "P": Decimal("1e15"), "E": Decimal("1e18")}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[a-zA-Z]*)$")


def parse_quantity(q: Any) -> tuple[Decimal, str] | None:
    """(value, format) with format "BinarySI" or "DecimalSI"; None if unparseable."""
    if isinstance(q, bool):
        return None
    if isinstance(q, (int, float)):
        return Decimal(str(q)), "DecimalSI"
    m = _QUANTITY.match(str(q).strip())
    if not m:
        return None
    try:
        num = Decimal(m.group(1))
    except InvalidOperation:
        return None
    suffix = m.group(2)
    if suffix in _BINARY:
        return num * _BINARY[suffix], "BinarySI"
    if suffix in _DECIMAL:
        return num * _DECIMAL[suffix], "DecimalSI"
    if suffix[:1] in ("e", "E"):
        return num * (Decimal(10) ** int(suffix[1:])), "DecimalSI"
    return None


def format_quantity(value: Decimal, fmt: str = "DecimalSI") -> str:
    """A canonical quantity string (`1100m`, `400Mi`, `4`), rounded up to milli-units."""
    if value == 0:
        return "0"
    milli = (value * 1000).to_integral_value(rounding="ROUND_CEILING")
    value = milli / 1000
    if fmt == "BinarySI" and value == value.to_integral_value() and abs(value) >= 1024:
        n = int(value)
        for suffix, unit in reversed(list(_BINARY.items())):
            if n % unit == 0:
                return f"{n // unit}{suffix}"
    if value != value.to_integral_value():
        return f"{int(milli)}m"
    n = int(value)
    for suffix, exp in (("E", 18), ("P", 15), ("T", 12), ("G", 9), ("M", 6), ("k", 3)):
        if n % (10 ** exp) == 0:
            return f"{n // 10 ** exp}{suffix}"
    return str(n)


def _quantity_str(q: Any) -> str:
    return go_value(q) if not isinstance(q, str) else q


# --------------------------------------------------------------------------
# Shared sections
# --------------------------------------------------------------------------


def _labels(w: PrefixWriter, title: str, labels: Any) -> None:
    w.write(0, f"{title}:\t")
    labels = labels if isinstance(labels, dict) else {}
    if not labels:
        w.write(0, f"{NONE}\n")
        return
    for i, k in enumerate(sorted(labels)):
        if i:
            w.write(0, "\t")
        w.write(0, f"{k}={cell(labels[k])}\n")


def _annotations(w: PrefixWriter, title: str, annotations: Any) -> None:
    w.write(0, f"{title}:\t")
    annotations = annotations if isinstance(annotations, dict) else {}
    keys = sorted(k for k in annotations if k != LAST_APPLIED)
    if not keys:
        w.write(0, f"{NONE}\n")
        return
    for i, k in enumerate(keys):
        if i:
            w.write(0, "\t")
        value = cell(annotations[k])
        if value.endswith("\n"):
            value = value[:-1]
        if len(value) + len(k) + 2 > MAX_ANNOTATION_LEN or "\n" in value:
            w.write(0, f"{k}:\n")
            for line in value.split("\n"):
                if len(line) > MAX_ANNOTATION_LEN - 2:
                    line = line[:MAX_ANNOTATION_LEN - 2] + "..."
                w.write(0, f"\t  {line}\n")
        else:
            w.write(0, f"{k}: {value}\n")


def _event_time(ev: Obj) -> datetime:
    t = as_time(ev.get("lastTimestamp"))
    return t or datetime.min.replace(tzinfo=timezone.utc)


def _events(w: PrefixWriter, events: list[Obj] | None, now: datetime) -> None:
    if events is None:
        return
    events = [e for e in events if isinstance(e, dict)]
    if not events:
        w.write(0, f"Events:\t{NONE}\n")
        return
    w.flush()
    w.write(0, "Events:\n  Type\tReason\tAge\tFrom\tMessage\n")
    w.write(1, "----\t------\t----\t----\t-------\n")
    for e in sorted(events, key=_event_time):  # stable, like Go's insertion sort for short lists
        first = _since(e.get("eventTime"), now) if e.get("eventTime") else _since(e.get("firstTimestamp"), now)
        series = e.get("series")
        count = e.get("count") or 0
        if isinstance(series, dict):
            interval = f"{_since(series.get('lastObservedTime'), now)} (x{series.get('count')} over {first})"
        elif isinstance(count, int) and count > 1:
            interval = f"{_since(e.get('lastTimestamp'), now)} (x{count} over {first})"
        else:
            interval = first
        source = cell(dig(e, "source", "component")) or cell(e.get("reportingController")) \
            or cell(e.get("reportingComponent"))
        w.write(1, f"{cell(e.get('type'))}\t{cell(e.get('reason'))}\t{interval}\t{source}\t"
                   f"{cell(e.get('message')).strip()}\n")


def _controller(obj: Obj) -> str:
    for ref in dig_list(obj, "metadata", "ownerReferences"):
        if isinstance(ref, dict) and ref.get("controller"):
            return f"{cell(ref.get('kind'))}/{cell(ref.get('name'))}"
    return ""


# --------------------------------------------------------------------------
# Pod
# --------------------------------------------------------------------------


def _container_ports(ports: list, host: bool) -> str:
    out = []
    for p in ports:
        if isinstance(p, dict):
            num = p.get("hostPort", 0) if host else p.get("containerPort", 0)
            out.append(f"{num or 0}/{p.get('protocol') or 'TCP'}")
    return ", ".join(out)


def _resolve_field(pod: Obj, path: str) -> str:
    simple = {
        "metadata.name": ("metadata", "name"), "metadata.namespace": ("metadata", "namespace"),
        "metadata.uid": ("metadata", "uid"), "spec.nodeName": ("spec", "nodeName"),
        "spec.serviceAccountName": ("spec", "serviceAccountName"), "status.hostIP": ("status", "hostIP"),
        "status.podIP": ("status", "podIP"),
    }
    if path in simple:
        return cell(dig(pod, *simple[path]))
    if path == "status.podIPs":
        return ",".join(cell(dig(ip, "ip")) for ip in dig_list(pod, "status", "podIPs"))
    if path == "status.hostIPs":
        return ",".join(cell(dig(ip, "ip")) for ip in dig_list(pod, "status", "hostIPs"))
    m = re.match(r"^metadata\.(labels|annotations)\['(.*)'\]$", path)
    if m:
        return cell(dig_dict(pod, "metadata", m.group(1)).get(m.group(2)))
    if path in ("metadata.labels", "metadata.annotations"):
        d = dig_dict(pod, *path.split("."))
        return "\n".join(f'{k}="{d[k]}"' for k in sorted(d))
    return ""


def _resource_field(container: Obj, ref: Obj) -> str:
    resource = cell(ref.get("resource"))
    section, _, name = resource.partition(".")
    q = dig(container, "resources", section, name)
    if q is None and section == "requests":
        q = dig(container, "resources", "limits", name)
    parsed = parse_quantity(q) if q is not None else (Decimal(0), "DecimalSI")
    divisor = parse_quantity(ref.get("divisor") or "1")
    if parsed is None or divisor is None or divisor[0] == 0:
        return ""
    value = math.ceil(parsed[0] / divisor[0])
    return str(value)


def _describe_env(w: PrefixWriter, pod: Obj, c: Obj) -> None:
    env_from = [e for e in dig_list(c, "envFrom") if isinstance(e, dict)]
    if env_from:
        w.write(2, "Environment Variables from:\n")
        for e in env_from:
            src, name, optional = "", "", False
            if isinstance(e.get("configMapRef"), dict):
                src, name = "ConfigMap", cell(e["configMapRef"].get("name"))
                optional = bool(e["configMapRef"].get("optional"))
            elif isinstance(e.get("secretRef"), dict):
                src, name = "Secret", cell(e["secretRef"].get("name"))
                optional = bool(e["secretRef"].get("optional"))
            opt = "true" if optional else "false"
            if e.get("prefix"):
                w.write(3, f"{name}\t{src} with prefix '{e['prefix']}'\tOptional: {opt}\n")
            else:
                w.write(3, f"{name}\t{src}\tOptional: {opt}\n")
    env = [e for e in dig_list(c, "env") if isinstance(e, dict)]
    w.write(2, "Environment:" + ("\t<none>" if not env else "") + "\n")
    for e in env:
        name = cell(e.get("name"))
        vf = e.get("valueFrom")
        if not isinstance(vf, dict):
            for i, line in enumerate(cell(e.get("value")).split("\n")):
                w.write(3, f"{name}:\t{line}\n" if i == 0 else f"\t{line}\n")
            continue
        if isinstance(vf.get("fieldRef"), dict):
            ref = vf["fieldRef"]
            path = cell(ref.get("fieldPath"))
            w.write(3, f"{name}:\t{_resolve_field(pod, path)} ({cell(ref.get('apiVersion')) or 'v1'}:{path})\n")
        elif isinstance(vf.get("resourceFieldRef"), dict):
            ref = vf["resourceFieldRef"]
            value = _resource_field(c, ref)
            resource = cell(ref.get("resource"))
            if value == "0" and resource in ("limits.cpu", "limits.memory"):
                value = "node allocatable"
            w.write(3, f"{name}:\t{value} ({resource})\n")
        elif isinstance(vf.get("secretKeyRef"), dict):
            ref = vf["secretKeyRef"]
            opt = "true" if ref.get("optional") else "false"
            w.write(3, f"{name}:\t<set to the key '{cell(ref.get('key'))}' in secret '{cell(ref.get('name'))}'>"
                       f"\tOptional: {opt}\n")
        elif isinstance(vf.get("configMapKeyRef"), dict):
            ref = vf["configMapKeyRef"]
            opt = "true" if ref.get("optional") else "false"
            w.write(3, f"{name}:\t<set to the key '{cell(ref.get('key'))}' of config map "
                       f"'{cell(ref.get('name'))}'>\tOptional: {opt}\n")


def _describe_probe(probe: Obj) -> str:
    attrs = (f"delay={probe.get('initialDelaySeconds') or 0}s timeout={probe.get('timeoutSeconds') or 0}s "
             f"period={probe.get('periodSeconds') or 0}s #success={probe.get('successThreshold') or 0} "
             f"#failure={probe.get('failureThreshold') or 0}")
    if isinstance(probe.get("exec"), dict):
        cmd = " ".join(cell(x) for x in dig_list(probe, "exec", "command"))
        return f"exec [{cmd}] {attrs}"
    if isinstance(probe.get("httpGet"), dict):
        h = probe["httpGet"]
        scheme = cell(h.get("scheme") or "HTTP").lower()
        host = cell(h.get("host"))
        port = cell(h.get("port"))
        hostport = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
        return f"http-get {scheme}://{hostport if port else host}{cell(h.get('path'))} {attrs}"
    if isinstance(probe.get("tcpSocket"), dict):
        t = probe["tcpSocket"]
        return f"tcp-socket {cell(t.get('host'))}:{cell(t.get('port'))} {attrs}"
    if isinstance(probe.get("grpc"), dict):
        g = probe["grpc"]
        return f"grpc <pod>:{cell(g.get('port'))} {cell(g.get('service'))} {attrs}"
    return f"unknown {attrs}"


def _describe_state(w: PrefixWriter, name: str, state: Any, now: datetime) -> None:
    state = state if isinstance(state, dict) else {}
    if isinstance(state.get("running"), dict):
        w.write(2, f"{name}:\tRunning\n")
        w.write(3, f"Started:\t{rfc1123z(state['running'].get('startedAt'), now)}\n")
    elif isinstance(state.get("waiting"), dict):
        w.write(2, f"{name}:\tWaiting\n")
        if state["waiting"].get("reason"):
            w.write(3, f"Reason:\t{state['waiting']['reason']}\n")
    elif isinstance(state.get("terminated"), dict):
        t = state["terminated"]
        w.write(2, f"{name}:\tTerminated\n")
        if t.get("reason"):
            w.write(3, f"Reason:\t{t['reason']}\n")
        if t.get("message"):
            w.write(3, f"Message:\t{t['message']}\n")
        w.write(3, f"Exit Code:\t{t.get('exitCode') or 0}\n")
        if t.get("signal"):
            w.write(3, f"Signal:\t{t['signal']}\n")
        w.write(3, f"Started:\t{rfc1123z(t.get('startedAt'), now)}\n")
        w.write(3, f"Finished:\t{rfc1123z(t.get('finishedAt'), now)}\n")
    else:
        w.write(2, f"{name}:\tWaiting\n")


def _describe_resources(w: PrefixWriter, resources: Any, level: int) -> None:
    resources = resources if isinstance(resources, dict) else {}
    for section, title in (("limits", "Limits"), ("requests", "Requests")):
        values = resources.get(section)
        if isinstance(values, dict) and values:
            w.write(level, f"{title}:\n")
            for k in sorted(values):
                w.write(level + 1, f"{k}:\t{_quantity_str(values[k])}\n")


def _describe_containers(w: PrefixWriter, pod: Obj, label: str, containers: list, statuses: list,
                         now: datetime) -> None:
    by_name = {s.get("name"): s for s in statuses if isinstance(s, dict)}
    w.write(0, f"{label}:" + (" <none>" if not containers else "") + "\n")
    for c in containers:
        if not isinstance(c, dict):
            continue
        status = by_name.get(c.get("name"))
        w.write(1, f"{cell(c.get('name'))}:\n")
        if status is not None:
            w.write(2, f"Container ID:\t{cell(status.get('containerID'))}\n")
        w.write(2, f"Image:\t{cell(c.get('image'))}\n")
        if status is not None:
            w.write(2, f"Image ID:\t{cell(status.get('imageID'))}\n")
        ports = dig_list(c, "ports")
        ports_str = _container_ports(ports, host=False)
        if "," in ports_str:
            w.write(2, f"Ports:\t{ports_str}\n")
        else:
            w.write(2, f"Port:\t{ports_str or NONE}\n")
        host_str = _container_ports(ports, host=True)
        if "," in host_str:
            w.write(2, f"Host Ports:\t{host_str}\n")
        else:
            w.write(2, f"Host Port:\t{host_str or NONE}\n")
        for key, title in (("command", "Command"), ("args", "Args")):
            items = dig_list(c, key)
            if items:
                w.write(2, f"{title}:\n")
                for item in items:
                    for line in cell(item).split("\n"):
                        w.write(3, f"{line}\n")
        if status is not None:
            _describe_state(w, "State", status.get("state"), now)
            last = status.get("lastState")
            if isinstance(last, dict) and isinstance(last.get("terminated"), dict):
                _describe_state(w, "Last State", last, now)
            w.write(2, f"Ready:\t{_bool(status.get('ready'))}\n")
            w.write(2, f"Restart Count:\t{status.get('restartCount') or 0}\n")
        _describe_resources(w, c.get("resources"), 2)
        for key, title in (("livenessProbe", "Liveness"), ("readinessProbe", "Readiness"),
                           ("startupProbe", "Startup")):
            if isinstance(c.get(key), dict):
                w.write(2, f"{title}:\t{_describe_probe(c[key])}\n")
        _describe_env(w, pod, c)
        mounts = sorted((m for m in dig_list(c, "volumeMounts") if isinstance(m, dict)),
                        key=lambda m: cell(m.get("mountPath")))
        w.write(2, "Mounts:" + ("\t<none>" if not mounts else "") + "\n")
        for m in mounts:
            flags = ["ro" if m.get("readOnly") else "rw"]
            if m.get("subPath"):
                flags.append(f'path="{m["subPath"]}"')
            w.write(3, f"{cell(m.get('mountPath'))} from {cell(m.get('name'))} ({','.join(flags)})\n")


def _optional(v: Any) -> str:
    return "<nil>" if v is None else ("true" if v else "false")


def _describe_volumes(w: PrefixWriter, volumes: list) -> None:
    volumes = [v for v in volumes if isinstance(v, dict)]
    if not volumes:
        w.write(0, f"Volumes:\t{NONE}\n")
        return
    w.write(0, "Volumes:\n")
    for v in volumes:
        w.write(1, f"{cell(v.get('name'))}:\n")
        if isinstance(v.get("hostPath"), dict):
            hp = v["hostPath"]
            w.write(2, "Type:\tHostPath (bare host directory volume)\n"
                       f"    Path:\t{cell(hp.get('path'))}\n"
                       f"    HostPathType:\t{cell(hp.get('type')) if 'type' in hp else NONE}\n")
        elif isinstance(v.get("emptyDir"), dict):
            ed = v["emptyDir"]
            size = ed.get("sizeLimit")
            w.write(2, "Type:\tEmptyDir (a temporary directory that shares a pod's lifetime)\n"
                       f"    Medium:\t{cell(ed.get('medium'))}\n"
                       f"    SizeLimit:\t{_quantity_str(size) if size else '<unset>'}\n")
        elif isinstance(v.get("secret"), dict):
            s = v["secret"]
            w.write(2, "Type:\tSecret (a volume populated by a Secret)\n"
                       f"    SecretName:\t{cell(s.get('secretName'))}\n"
                       f"    Optional:\t{'true' if s.get('optional') else 'false'}\n")
        elif isinstance(v.get("configMap"), dict):
            cm = v["configMap"]
            w.write(2, "Type:\tConfigMap (a volume populated by a ConfigMap)\n"
                       f"    Name:\t{cell(cm.get('name'))}\n"
                       f"    Optional:\t{'true' if cm.get('optional') else 'false'}\n")
        elif isinstance(v.get("persistentVolumeClaim"), dict):
            pvc = v["persistentVolumeClaim"]
            w.write(2, "Type:\tPersistentVolumeClaim (a reference to a PersistentVolumeClaim in the same "
                       "namespace)\n"
                       f"    ClaimName:\t{cell(pvc.get('claimName'))}\n"
                       f"    ReadOnly:\t{'true' if pvc.get('readOnly') else 'false'}\n")
        elif isinstance(v.get("projected"), dict):
            w.write(2, "Type:\tProjected (a volume that contains injected data from multiple sources)\n")
            for src in dig_list(v, "projected", "sources"):
                if not isinstance(src, dict):
                    continue
                if isinstance(src.get("secret"), dict):
                    w.write(2, f"SecretName:\t{cell(src['secret'].get('name'))}\n"
                               f"    SecretOptionalName:\t{_optional(src['secret'].get('optional'))}\n")
                elif isinstance(src.get("downwardAPI"), dict):
                    w.write(2, "DownwardAPI:\ttrue\n")
                elif isinstance(src.get("configMap"), dict):
                    w.write(2, f"ConfigMapName:\t{cell(src['configMap'].get('name'))}\n"
                               f"    ConfigMapOptional:\t{_optional(src['configMap'].get('optional'))}\n")
                elif isinstance(src.get("serviceAccountToken"), dict):
                    w.write(2, f"TokenExpirationSeconds:\t"
                               f"{src['serviceAccountToken'].get('expirationSeconds') or 0}\n")
        elif isinstance(v.get("downwardAPI"), dict):
            w.write(2, "Type:\tDownwardAPI (a volume populated by information about the pod)\n    Items:\n")
            for item in dig_list(v, "downwardAPI", "items"):
                if isinstance(item, dict):
                    ref = item.get("fieldRef") or item.get("resourceFieldRef") or {}
                    src = ref.get("fieldPath") or ref.get("resource")
                    w.write(3, f"{cell(src)} -> {cell(item.get('path'))}\n")
        else:
            w.write(1, "<unknown>\n")


def _qos_class(pod: Obj) -> str:
    qos = dig(pod, "status", "qosClass")
    if qos:
        return cell(qos)
    requests: dict[str, Decimal] = {}
    limits: dict[str, Decimal] = {}
    guaranteed = True
    containers = [c for c in dig_list(pod, "spec", "containers") + dig_list(pod, "spec", "initContainers")
                  if isinstance(c, dict)]
    for c in containers:
        req = {k: v for k, v in dig_dict(c, "resources", "requests").items() if k in ("cpu", "memory")}
        lim = {k: v for k, v in dig_dict(c, "resources", "limits").items() if k in ("cpu", "memory")}
        for src, dst in ((req, requests), (lim, limits)):
            for k, v in src.items():
                p = parse_quantity(v)
                if p and p[0] != 0:
                    dst[k] = dst.get(k, Decimal(0)) + p[0]
        if set(lim) != {"cpu", "memory"}:
            guaranteed = False
        for k, v in req.items():
            if parse_quantity(v) != parse_quantity(lim.get(k)):
                guaranteed = False
    if not requests and not limits:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


def _tolerations(w: PrefixWriter, tolerations: list) -> None:
    w.write(0, "Tolerations:\t")
    tolerations = sorted((t for t in tolerations if isinstance(t, dict)), key=lambda t: cell(t.get("key")))
    if not tolerations:
        w.write(0, f"{NONE}\n")
        return
    for i, t in enumerate(tolerations):
        if i:
            w.write(0, "\t")
        text = cell(t.get("key"))
        if t.get("value"):
            text += f"={t['value']}"
        if t.get("effect"):
            text += f":{t['effect']}"
        if t.get("operator") == "Exists" and not t.get("value"):
            text += " op=Exists" if (t.get("key") or t.get("effect")) else "op=Exists"
        if t.get("tolerationSeconds") is not None:
            text += f" for {t['tolerationSeconds']}s"
        w.write(0, text + "\n")


def _describe_pod(pod: Obj, related: dict, now: datetime) -> str:
    w = PrefixWriter()
    meta = dig_dict(pod, "metadata")
    spec = dig_dict(pod, "spec")
    status = dig_dict(pod, "status")
    w.write(0, f"Name:\t{cell(meta.get('name'))}\n")
    w.write(0, f"Namespace:\t{cell(meta.get('namespace'))}\n")
    if spec.get("priority") is not None:
        w.write(0, f"Priority:\t{spec['priority']}\n")
    if spec.get("priorityClassName"):
        w.write(0, f"Priority Class Name:\t{spec['priorityClassName']}\n")
    if spec.get("runtimeClassName"):
        w.write(0, f"Runtime Class Name:\t{spec['runtimeClassName']}\n")
    if spec.get("serviceAccountName"):
        w.write(0, f"Service Account:\t{spec['serviceAccountName']}\n")
    if not spec.get("nodeName"):
        w.write(0, f"Node:\t{NONE}\n")
    else:
        w.write(0, f"Node:\t{spec['nodeName']}/{cell(status.get('hostIP'))}\n")
    if status.get("startTime"):
        w.write(0, f"Start Time:\t{rfc1123z(status['startTime'], now)}\n")
    _labels(w, "Labels", meta.get("labels"))
    _annotations(w, "Annotations", meta.get("annotations"))
    phase = cell(status.get("phase"))
    if meta.get("deletionTimestamp") and phase not in ("Failed", "Succeeded"):
        w.write(0, f"Status:\tTerminating (lasts {_since(meta['deletionTimestamp'], now)})\n")
        w.write(0, f"Termination Grace Period:\t{meta.get('deletionGracePeriodSeconds') or 0}s\n")
    else:
        w.write(0, f"Status:\t{phase}\n")
    if status.get("reason"):
        w.write(0, f"Reason:\t{status['reason']}\n")
    if status.get("message"):
        w.write(0, f"Message:\t{status['message']}\n")
    w.write(0, f"IP:\t{cell(status.get('podIP'))}\n")
    ips = [ip for ip in dig_list(status, "podIPs") if isinstance(ip, dict)]
    if not ips:
        w.write(0, f"IPs:\t{NONE}\n")
    else:
        w.write(0, "IPs:\n")
        for ip in ips:
            w.write(1, f"IP:\t{cell(ip.get('ip'))}\n")
    controlled_by = _controller(pod)
    if controlled_by:
        w.write(0, f"Controlled By:\t{controlled_by}\n")
    if status.get("nominatedNodeName"):
        w.write(0, f"NominatedNodeName:\t{status['nominatedNodeName']}\n")
    inits = dig_list(spec, "initContainers")
    if inits:
        _describe_containers(w, pod, "Init Containers", inits, dig_list(status, "initContainerStatuses"), now)
    _describe_containers(w, pod, "Containers", dig_list(spec, "containers"), dig_list(status, "containerStatuses"), now)
    conditions = [c for c in dig_list(status, "conditions") if isinstance(c, dict)]
    gates = [g for g in dig_list(spec, "readinessGates") if isinstance(g, dict)]
    if gates:
        w.write(0, "Readiness Gates:\n  Type\tStatus\n")
        for g in gates:
            st = next((cell(c.get("status")) for c in conditions if c.get("type") == g.get("conditionType")),
                      NONE)
            w.write(1, f"{cell(g.get('conditionType'))} \t{st} \n")
    if conditions:
        w.write(0, "Conditions:\n  Type\tStatus\n")
        for c in conditions:
            w.write(1, f"{cell(c.get('type'))} \t{cell(c.get('status'))} \n")
    _describe_volumes(w, dig_list(spec, "volumes"))
    w.write(0, f"QoS Class:\t{_qos_class(pod)}\n")
    _labels(w, "Node-Selectors", spec.get("nodeSelector"))
    _tolerations(w, dig_list(spec, "tolerations"))
    _events(w, related.get("events", []), now)
    return w.text()


# --------------------------------------------------------------------------
# Generic (custom resources): kubectl's printUnstructuredContent
# --------------------------------------------------------------------------

_ACRONYMS = ("API", "URL", "UID", "OSB", "GUID")


def camelcase_split(src: str) -> list[str]:
    """fatih/camelcase.Split: runs of lower/upper/digit/other, `PDFLoader` -> PDF Loader."""
    runs: list[list[str]] = []
    last = 0
    for ch in src:
        cls = 1 if ch.islower() else 2 if ch.isupper() else 3 if ch.isdigit() else 4
        if cls == last:
            runs[-1].append(ch)
        else:
            runs.append([ch])
        last = cls
    for i in range(len(runs) - 1):
        if runs[i] and runs[i + 1] and runs[i][0].isupper() and runs[i + 1][0].islower():
            runs[i + 1].insert(0, runs[i].pop())
    return ["".join(r) for r in runs if r]


def smart_label(field: str) -> str:
    """kubectl 1.32's smartLabelFor: `pytorchReplicaSpecs` -> `Pytorch Replica Specs`, `uid` -> `UID`."""
    if any(not (ch.isalpha() or ch == "-") for ch in field):
        return field
    parts = []
    for part in camelcase_split(field):
        if part == "_":
            continue
        if part.upper() in _ACRONYMS:
            parts.append(part.upper())
        else:
            parts.append(part[:1].upper() + part[1:])
    return " ".join(parts)


Renderer = Callable[[PrefixWriter, int, Any], None]


def _unstructured(w: PrefixWriter, level: int, content: dict, prefix: str, skip: tuple[str, ...],
                  custom: dict[str, Renderer] | None = None) -> None:
    """kubectl's generic printing of nested keys; ``custom`` renders chosen
    paths (e.g. ``.status.replicaStatuses``) its own way, in the same place."""
    for field in sorted(content):
        value = content[field]
        expr = f"{prefix}.{field}"
        if expr in skip:
            continue
        if custom and expr in custom:
            custom[expr](w, level, value)
        elif isinstance(value, dict):
            w.write(level, f"{smart_label(field)}:\n")
            _unstructured(w, level + 1, value, expr, skip, custom)
        elif isinstance(value, list):
            w.write(level, f"{smart_label(field)}:\n")
            for child in value:
                if isinstance(child, dict):
                    _unstructured(w, level + 1, child, expr, skip, custom)
                else:
                    w.write(level + 1, f"{go_value(child)}\n")
        else:
            w.write(level, f"{smart_label(field)}:\t{go_value(value)}\n")


_GENERIC_SKIP = (".metadata.managedFields", ".metadata.name", ".metadata.namespace", ".metadata.labels",
                 ".metadata.annotations")


def waiting_reason(podgroup: Obj | None) -> str:
    """Why a gang is not running yet: the PodGroup's Unschedulable condition, if any."""
    if not isinstance(podgroup, dict):
        return ""
    phase = cell(dig(podgroup, "status", "phase")) or "Pending"
    if phase not in ("Pending", "Inqueue", "Unknown"):
        return ""
    for c in reversed(dig_list(podgroup, "status", "conditions")):
        if isinstance(c, dict) and c.get("type") == "Unschedulable" and c.get("status") == "True":
            detail = cell(c.get("message")) or cell(c.get("reason"))
            return f"PodGroup {cell(dig(podgroup, 'metadata', 'name'))} is {phase}: {detail}"
    return ""


def _job_finished_or_running(job: Obj) -> bool:
    for c in dig_list(job, "status", "conditions"):
        if isinstance(c, dict) and c.get("status") == "True" and c.get("type") in ("Running", "Succeeded",
                                                                                  "Failed"):
            return True
    return False


# --------------------------------------------------------------------------
# Restart accounting of a job (SEMANTICS S2/S3): status.restartCount,
# replicaStatuses[<type>].restarts and the podRestarts bookkeeping
# --------------------------------------------------------------------------

_REPLICA_COUNTS = (("active", "Active"), ("succeeded", "Succeeded"), ("failed", "Failed"),
                   ("restarts", "Restarts"))


def has_restart_accounting(obj: Obj) -> bool:
    """Whether the job's status carries restart counters (any restart was counted)."""
    status = dig_dict(obj, "status")
    return "restartCount" in status or any(
        isinstance(rs, dict) and "restarts" in rs for rs in dig_dict(status, "replicaStatuses").values())


def _count(v: Any) -> str:
    return go_value(v if v is not None else 0)


def _replica_statuses(w: PrefixWriter, level: int, value: Any) -> None:
    """Per replica type Active / Succeeded / Failed / Restarts (0 when unset),
    then the type's other keys as kubectl prints them."""
    w.write(level, "Replica Statuses:\n")
    if not isinstance(value, dict):
        return
    for rtype in sorted(value):
        rs = value[rtype]
        w.write(level + 1, f"{rtype}:\n")
        if not isinstance(rs, dict):
            continue
        for key, label in _REPLICA_COUNTS:
            w.write(level + 2, f"{label}:\t{_count(rs.get(key))}\n")
        rest = {k: v for k, v in rs.items() if k not in dict(_REPLICA_COUNTS)}
        _unstructured(w, level + 2, rest, f".status.replicaStatuses.{rtype}", ())


def _restart_count_renderer(obj: Obj) -> Renderer:
    limit = dig(obj, "spec", "runPolicy", "backoffLimit")
    said = f"backoffLimit {go_value(limit)}" if limit is not None else "backoffLimit not set: operator default"

    def render(w: PrefixWriter, level: int, value: Any) -> None:
        w.write(level, f"Restart Count:\t{_count(value)} ({said})\n")

    return render


def _pod_restarts(w: PrefixWriter, level: int, value: Any) -> None:
    """One line per pod: the restarts counted per container, and whether the
    pod's own failure (deleted and recreated) was counted."""
    entries = {k: v for k, v in value.items() if isinstance(v, dict)} if isinstance(value, dict) else {}

    def counted(e: dict) -> bool:  # bookkeeping-only entries (uid, failing, ...) are not shown
        cs = e.get("containers") if isinstance(e.get("containers"), dict) else {}
        return bool(e.get("failureCounted")) or any(isinstance(n, int) and n > 0 for n in cs.values())

    entries = {k: v for k, v in entries.items() if counted(v)}
    if not entries:
        return
    w.write(level, "Pod Restarts:\n")
    for pod in sorted(entries):
        e = entries[pod]
        containers = e.get("containers") if isinstance(e.get("containers"), dict) else {}
        parts = [f"{c}={go_value(containers[c])}" for c in sorted(containers)]
        if e.get("failureCounted"):
            parts.append("pod failure counted")
        w.write(level + 1, f"{pod}:\t{', '.join(parts) or NONE}\n")


def _job_status_renderers(obj: Obj) -> dict[str, Renderer]:
    custom: dict[str, Renderer] = {".status.podRestarts": _pod_restarts}
    if has_restart_accounting(obj):
        custom[".status.replicaStatuses"] = _replica_statuses
        custom[".status.restartCount"] = _restart_count_renderer(obj)
    return custom


def _describe_generic(obj: Obj, related: dict, now: datetime) -> str:
    w = PrefixWriter()
    meta = dig_dict(obj, "metadata")
    w.write(0, f"Name:\t{cell(meta.get('name'))}\n")
    w.write(0, f"Namespace:\t{cell(meta.get('namespace'))}\n")
    _labels(w, "Labels", meta.get("labels"))
    _annotations(w, "Annotations", meta.get("annotations"))
    custom = _job_status_renderers(obj)
    if has_restart_accounting(obj) and "restartCount" not in dig_dict(obj, "status"):
        obj = {**obj, "status": {**dig_dict(obj, "status"), "restartCount": 0}}
    _unstructured(w, 0, obj, "", _GENERIC_SKIP, custom)
    waiting = ""
    if obj.get("kind") == "PodGroup":
        waiting = waiting_reason(obj)
    elif "podgroup" in related and not _job_finished_or_running(obj):
        waiting = waiting_reason(related.get("podgroup"))
    if waiting:
        w.write(0, f"Waiting:\t{waiting}\n")
    _events(w, related.get("events", []), now)
    return w.text()


# --------------------------------------------------------------------------
# Node, Service, Namespace
# --------------------------------------------------------------------------


def _pod_requests_limits(pod: Obj) -> tuple[dict[str, Decimal], dict[str, Decimal]]:
    """resourcehelper.PodRequestsAndLimits: sum of containers, at least the largest init container."""
    def collect(containers: Iterable[Any], section: str) -> list[dict[str, Decimal]]:
        out = []
        for c in containers:
            if not isinstance(c, dict):
                continue
            values = dig_dict(c, "resources", section)
            if section == "requests":  # the apiserver defaults each missing request to its limit
                values = {**dig_dict(c, "resources", "limits"), **values}
            parsed = {}
            for k, v in values.items():
                p = parse_quantity(v)
                if p is not None:
                    parsed[k] = p[0]
            out.append(parsed)
        return out

    result = []
    for section in ("requests", "limits"):
        total: dict[str, Decimal] = {}
        for d in collect(dig_list(pod, "spec", "containers"), section):
            for k, v in d.items():
                total[k] = total.get(k, Decimal(0)) + v
        for d in collect(dig_list(pod, "spec", "initContainers"), section):
            for k, v in d.items():
                total[k] = max(total.get(k, Decimal(0)), v)
        result.append(total)
    return result[0], result[1]


def _pct(value: Decimal, total: Decimal | None) -> int:
    if not total:
        return 0
    return int(value / total * 100)


def _describe_node(node: Obj, related: dict, now: datetime) -> str:
    w = PrefixWriter()
    meta = dig_dict(node, "metadata")
    spec = dig_dict(node, "spec")
    status = dig_dict(node, "status")
    w.write(0, f"Name:\t{cell(meta.get('name'))}\n")
    w.write(0, f"Roles:\t{','.join(node_roles(node)) or NONE}\n")
    _labels(w, "Labels", meta.get("labels"))
    _annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, f"CreationTimestamp:\t{rfc1123z(meta.get('creationTimestamp'), now)}\n")
    taints = sorted((t for t in dig_list(spec, "taints") if isinstance(t, dict)),
                    key=lambda t: f"{cell(t.get('effect'))},{cell(t.get('key'))}")
    w.write(0, "Taints:\t")
    if not taints:
        w.write(0, f"{NONE}\n")
    for i, t in enumerate(taints):
        if i:
            w.write(0, "\t")
        value = f"={t['value']}" if t.get("value") else ""
        w.write(0, f"{cell(t.get('key'))}{value}:{cell(t.get('effect'))}\n")
    w.write(0, f"Unschedulable:\t{'true' if spec.get('unschedulable') else 'false'}\n")
    conditions = [c for c in dig_list(status, "conditions") if isinstance(c, dict)]
    if conditions:
        w.write(0, "Conditions:\n  Type\tStatus\tLastHeartbeatTime\tLastTransitionTime\tReason\tMessage\n")
        w.write(1, "----\t------\t-----------------\t------------------\t------\t-------\n")
        for c in conditions:
            w.write(1, f"{cell(c.get('type'))} \t{cell(c.get('status'))} \t"
                       f"{rfc1123z(c.get('lastHeartbeatTime'), now)} \t{rfc1123z(c.get('lastTransitionTime'), now)} "
                       f"\t{cell(c.get('reason'))} \t{cell(c.get('message'))}\n")
    w.write(0, "Addresses:\n")
    for a in dig_list(status, "addresses"):
        if isinstance(a, dict):
            w.write(1, f"{cell(a.get('type'))}:\t{cell(a.get('address'))}\n")
    for key, title in (("capacity", "Capacity"), ("allocatable", "Allocatable")):
        values = dig_dict(status, key)
        if values:
            w.write(0, f"{title}:\n")
            for k in sorted(values):
                w.write(0, f"  {k}:\t{_quantity_str(values[k])}\n")
    info = dig_dict(status, "nodeInfo")
    w.write(0, "System Info:\n")
    for key, title in (("machineID", "Machine ID"), ("systemUUID", "System UUID"), ("bootID", "Boot ID"),
                       ("kernelVersion", "Kernel Version"), ("osImage", "OS Image"),
                       ("operatingSystem", "Operating System"), ("architecture", "Architecture"),
                       ("containerRuntimeVersion", "Container Runtime Version"),
                       ("kubeletVersion", "Kubelet Version")):
        w.write(0, f"  {title}:\t{cell(info.get(key))}\n")
    if spec.get("podCIDR"):
        w.write(0, f"PodCIDR:\t{spec['podCIDR']}\n")
    if dig_list(spec, "podCIDRs"):
        w.write(0, f"PodCIDRs:\t{','.join(cell(x) for x in dig_list(spec, 'podCIDRs'))}\n")
    if spec.get("providerID"):
        w.write(0, f"ProviderID:\t{spec['providerID']}\n")
    pods = related.get("pods")
    if isinstance(pods, list):
        _describe_node_resources(w, node, [p for p in pods if isinstance(p, dict)], now)
    _events(w, related.get("events", []), now)
    return w.text()


def _describe_node_resources(w: PrefixWriter, node: Obj, pods: list[Obj], now: datetime) -> None:
    pods = [p for p in pods if dig(p, "status", "phase") not in ("Succeeded", "Failed")]
    allocatable = dig_dict(node, "status", "allocatable") or dig_dict(node, "status", "capacity")
    alloc = {k: (parse_quantity(v) or (Decimal(0), "DecimalSI"))[0] for k, v in allocatable.items()}
    w.write(0, f"Non-terminated Pods:\t({len(pods)} in total)\n")
    w.write(1, "Namespace\tName\t\tCPU Requests\tCPU Limits\tMemory Requests\tMemory Limits\tAge\n")
    w.write(1, "---------\t----\t\t------------\t----------\t---------------\t-------------\t---\n")
    total_req: dict[str, Decimal] = {}
    total_lim: dict[str, Decimal] = {}
    for p in pods:
        req, lim = _pod_requests_limits(p)
        for src, dst in ((req, total_req), (lim, total_lim)):
            for k, v in src.items():
                dst[k] = dst.get(k, Decimal(0)) + v
        cells = []
        for d, res, fmt in ((req, "cpu", "DecimalSI"), (lim, "cpu", "DecimalSI"),
                            (req, "memory", "BinarySI"), (lim, "memory", "BinarySI")):
            v = d.get(res, Decimal(0))
            cells.append(f"{format_quantity(v, fmt)} ({_pct(v, alloc.get(res))}%)")
        w.write(1, f"{cell(dig(p, 'metadata', 'namespace'))}\t{cell(dig(p, 'metadata', 'name'))}\t\t"
                   f"{chr(9).join(cells)}\t{age(dig(p, 'metadata', 'creationTimestamp'), now)}\n")
    w.write(0, "Allocated resources:\n  (Total limits may be over 100 percent, i.e., overcommitted.)\n")
    w.write(1, "Resource\tRequests\tLimits\n")
    w.write(1, "--------\t--------\t------\n")
    for res, fmt in (("cpu", "DecimalSI"), ("memory", "BinarySI")):
        r, lmt = total_req.get(res, Decimal(0)), total_lim.get(res, Decimal(0))
        w.write(1, f"{res}\t{format_quantity(r, fmt)} ({_pct(r, alloc.get(res))}%)\t"
                   f"{format_quantity(lmt, fmt)} ({_pct(lmt, alloc.get(res))}%)\n")
    standard = {"cpu", "memory", "pods", "ephemeral-storage", "storage"}
    for res in sorted(k for k in allocatable if k not in standard and not k.startswith("hugepages-")):
        w.write(1, f"{res}\t{format_quantity(total_req.get(res, Decimal(0)))}\t"
                   f"{format_quantity(total_lim.get(res, Decimal(0)))}\n")


def _endpoints(svc: Obj, port: Obj, related: dict) -> str:
    given = related.get("endpoints")
    if isinstance(given, list):
        addrs = [str(a) for a in given]
    else:
        addrs = []
        target = port.get("targetPort", port.get("port"))
        for p in related.get("pods") or []:
            if not isinstance(p, dict):
                continue
            ready = any(isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
                        for c in dig_list(p, "status", "conditions"))
            ip = dig(p, "status", "podIP")
            if not ready or not ip:
                continue
            num = target
            if isinstance(target, str):
                num = next((cp.get("containerPort") for c in dig_list(p, "spec", "containers") if isinstance(c, dict)
                            for cp in dig_list(c, "ports") if isinstance(cp, dict) and cp.get("name") == target), None)
            if num is None:
                continue
            addrs.append(f"{ip}:{num}")
    if not addrs:
        return NONE
    if len(addrs) > 3:
        return ",".join(addrs[:3]) + f" + {len(addrs) - 3} more..."
    return ",".join(addrs)


def _describe_service(svc: Obj, related: dict, now: datetime) -> str:
    w = PrefixWriter()
    meta = dig_dict(svc, "metadata")
    spec = dig_dict(svc, "spec")
    w.write(0, f"Name:\t{cell(meta.get('name'))}\n")
    w.write(0, f"Namespace:\t{cell(meta.get('namespace'))}\n")
    _labels(w, "Labels", meta.get("labels"))
    _annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Selector:\t{format_labels(dig_dict(spec, 'selector'))}\n")
    w.write(0, f"Type:\t{cell(spec.get('type') or 'ClusterIP')}\n")
    if spec.get("ipFamilyPolicy"):
        w.write(0, f"IP Family Policy:\t{spec['ipFamilyPolicy']}\n")
    families = dig_list(spec, "ipFamilies")
    w.write(0, f"IP Families:\t{','.join(cell(f) for f in families) if families else NONE}\n")
    w.write(0, f"IP:\t{cell(spec.get('clusterIP'))}\n")
    ips = dig_list(spec, "clusterIPs")
    w.write(0, f"IPs:\t{','.join(cell(i) for i in ips) if ips else NONE}\n")
    if dig_list(spec, "externalIPs"):
        w.write(0, f"External IPs:\t{','.join(cell(i) for i in dig_list(spec, 'externalIPs'))}\n")
    if spec.get("externalName"):
        w.write(0, f"External Name:\t{spec['externalName']}\n")
    for p in dig_list(spec, "ports"):
        if not isinstance(p, dict):
            continue
        name = cell(p.get("name")) or "<unset>"
        proto = cell(p.get("protocol") or "TCP")
        w.write(0, f"Port:\t{name}\t{cell(p.get('port'))}/{proto}\n")
        target = p.get("targetPort", p.get("port"))
        w.write(0, f"TargetPort:\t{cell(target)}/{proto}\n")
        if p.get("appProtocol"):
            w.write(0, f"AppProtocol:\t{p['appProtocol']}\n")
        if p.get("nodePort"):
            w.write(0, f"NodePort:\t{name}\t{p['nodePort']}/{proto}\n")
        w.write(0, f"Endpoints:\t{_endpoints(svc, p, related)}\n")
    w.write(0, f"Session Affinity:\t{cell(spec.get('sessionAffinity') or 'None')}\n")
    if spec.get("externalTrafficPolicy"):
        w.write(0, f"External Traffic Policy:\t{spec['externalTrafficPolicy']}\n")
    if spec.get("internalTrafficPolicy"):
        w.write(0, f"Internal Traffic Policy:\t{spec['internalTrafficPolicy']}\n")
    _events(w, related.get("events", []), now)
    return w.text()


def _describe_namespace(ns: Obj, related: dict, now: datetime) -> str:
    w = PrefixWriter()
    meta = dig_dict(ns, "metadata")
    w.write(0, f"Name:\t{cell(meta.get('name'))}\n")
    _labels(w, "Labels", meta.get("labels"))
    _annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Status:\t{cell(dig(ns, 'status', 'phase'))}\n")
    return w.text()


_DESCRIBERS: dict[str, Callable[[Obj, dict, datetime], str]] = {
    "Pod": _describe_pod,
    "Node": _describe_node,
    "Service": _describe_service,
    "Namespace": _describe_namespace,
}


def describe(obj: Obj, related: dict | None = None, now: datetime | None = None) -> str:
    """`kubectl describe` text for one object.

    ``related`` may hold: ``events`` (Event dicts about the object; None hides the
    section), ``podgroup`` (a job's PodGroup, to say why it waits), ``pods``
    (a Node's pods, or a Service's selected pods for Endpoints), ``endpoints``
    (a Service's ready ``ip:port`` strings).
    """
    now = now or datetime.now(timezone.utc)
    related = related or {}
    if not isinstance(obj, dict):
        return json.dumps(obj) + "\n"
    fn = _DESCRIBERS.get(cell(obj.get("kind")), _describe_generic)
    return fn(obj, related, now)
