"""`describe` for the built-in kinds without a status of their own to interpret: Service
(ports and ready endpoints), Namespace and PriorityClass; an Event is described generically.
"""
from __future__ import annotations

from datetime import datetime

from phalanx.api.columns import NONE, cell, dig, dig_dict, dig_list, format_labels, go_value
from phalanx.cli.describe.common import Obj, PrefixWriter, write_annotations, write_events, write_labels


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


def describe_service(svc: Obj, related: dict, now: datetime) -> str:
    w = PrefixWriter()
    meta = dig_dict(svc, "metadata")
    spec = dig_dict(svc, "spec")
    w.write(0, f"Name:\t{cell(meta.get('name'))}\n")
    w.write(0, f"Namespace:\t{cell(meta.get('namespace'))}\n")
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
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
    write_events(w, related.get("events", []), now)
    return w.text()


def describe_namespace(ns: Obj, related: dict, now: datetime) -> str:
    w = PrefixWriter()
    meta = dig_dict(ns, "metadata")
    w.write(0, f"Name:\t{cell(meta.get('name'))}\n")
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
    w.write(0, f"Status:\t{cell(dig(ns, 'status', 'phase'))}\n")
    return w.text()



def describe_priorityclass(pc: Obj, related: dict, now: datetime) -> str:
    """kubectl's PriorityClassDescriber: its annotations on one line (labels.FormatLabels)."""
    w = PrefixWriter()
    meta = dig_dict(pc, "metadata")
    w.write(0, f"Name:\t{cell(meta.get('name'))}\n")
    w.write(0, f"Value:\t{go_value(pc.get('value', 0))}\n")
    w.write(0, f"GlobalDefault:\t{go_value(pc.get('globalDefault') is True)}\n")
    w.write(0, f"PreemptionPolicy:\t{cell(pc.get('preemptionPolicy'))}\n")
    w.write(0, f"Description:\t{cell(pc.get('description'))}\n")
    w.write(0, f"Annotations:\t{format_labels(dig_dict(meta, 'annotations'))}\n")
    write_events(w, related.get("events", []), now)
    return w.text()
