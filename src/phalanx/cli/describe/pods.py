"""`describe pod`: containers (state, probes, environment, mounts), volumes, QoS class
and tolerations, as kubectl 1.32's PodDescriber prints them.
"""
from __future__ import annotations

import math
import re
from datetime import datetime
from decimal import Decimal
from typing import Any

from phalanx.api.columns import NONE, age, cell, dig, dig_dict, dig_list
from phalanx.cli.describe.common import (
    Obj,
    PrefixWriter,
    controller_of,
    quantity_text,
    quantity_value,
    rfc1123z,
    write_annotations,
    write_events,
    write_labels,
)


def _bool(v: Any) -> str:
    return "True" if v else "False"


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
    parsed = quantity_value(q) if q is not None else Decimal(0)
    divisor = quantity_value(ref.get("divisor") or "1")
    if parsed is None or divisor is None or divisor == 0:
        return ""
    value = math.ceil(parsed / divisor)
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
                w.write(level + 1, f"{k}:\t{quantity_text(values[k])}\n")


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
                       f"    SizeLimit:\t{quantity_text(size) if size else '<unset>'}\n")
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
                p = quantity_value(v)
                if p is not None and p != 0:
                    dst[k] = dst.get(k, Decimal(0)) + p
        if set(lim) != {"cpu", "memory"}:
            guaranteed = False
        for k, v in req.items():
            if quantity_value(v) != quantity_value(lim.get(k)):
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


def describe_pod(pod: Obj, related: dict, now: datetime) -> str:
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
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
    phase = cell(status.get("phase"))
    if meta.get("deletionTimestamp") and phase not in ("Failed", "Succeeded"):
        w.write(0, f"Status:\tTerminating (lasts {age(meta['deletionTimestamp'], now)})\n")
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
    controlled_by = controller_of(pod)
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
    write_labels(w, "Node-Selectors", spec.get("nodeSelector"))
    _tolerations(w, dig_list(spec, "tolerations"))
    write_events(w, related.get("events", []), now)
    return w.text()
