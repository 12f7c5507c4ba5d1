"""`describe node`: conditions, addresses, capacity, system info, and the non-terminated
pods' requests and limits against the node's allocatable resources.
"""
from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any, Iterable

from phalanx.api.columns import NONE, age, cell, dig, dig_dict, dig_list, node_roles
from phalanx.cli.describe.common import (
    BINARY_SI,
    DECIMAL_SI,
    Obj,
    PrefixWriter,
    canonical_quantity,
    quantity_text,
    quantity_value,
    rfc1123z,
    write_annotations,
    write_events,
    write_labels,
)


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
                p = quantity_value(v)
                if p is not None:
                    parsed[k] = p
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


def describe_node(node: Obj, related: dict, now: datetime) -> str:
    w = PrefixWriter()
    meta = dig_dict(node, "metadata")
    spec = dig_dict(node, "spec")
    status = dig_dict(node, "status")
    w.write(0, f"Name:\t{cell(meta.get('name'))}\n")
    w.write(0, f"Roles:\t{','.join(node_roles(node)) or NONE}\n")
    write_labels(w, "Labels", meta.get("labels"))
    write_annotations(w, "Annotations", meta.get("annotations"))
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
                w.write(0, f"  {k}:\t{quantity_text(values[k])}\n")
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
    write_events(w, related.get("events", []), now)
    return w.text()


def _describe_node_resources(w: PrefixWriter, node: Obj, pods: list[Obj], now: datetime) -> None:
    pods = [p for p in pods if dig(p, "status", "phase") not in ("Succeeded", "Failed")]
    allocatable = dig_dict(node, "status", "allocatable") or dig_dict(node, "status", "capacity")
    alloc = {k: quantity_value(v) or Decimal(0) for k, v in allocatable.items()}
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
        for d, res, fmt in ((req, "cpu", DECIMAL_SI), (lim, "cpu", DECIMAL_SI),
                            (req, "memory", BINARY_SI), (lim, "memory", BINARY_SI)):
            v = d.get(res, Decimal(0))
            cells.append(f"{canonical_quantity(v, fmt)} ({_pct(v, alloc.get(res))}%)")
        w.write(1, f"{cell(dig(p, 'metadata', 'namespace'))}\t{cell(dig(p, 'metadata', 'name'))}\t\t"
                   f"{chr(9).join(cells)}\t{age(dig(p, 'metadata', 'creationTimestamp'), now)}\n")
    w.write(0, "Allocated resources:\n  (Total limits may be over 100 percent, i.e., overcommitted.)\n")
    w.write(1, "Resource\tRequests\tLimits\n")
    w.write(1, "--------\t--------\t------\n")
    for res, fmt in (("cpu", DECIMAL_SI), ("memory", BINARY_SI)):
        r, lmt = total_req.get(res, Decimal(0)), total_lim.get(res, Decimal(0))
        w.write(1, f"{res}\t{canonical_quantity(r, fmt)} ({_pct(r, alloc.get(res))}%)\t"
                   f"{canonical_quantity(lmt, fmt)} ({_pct(lmt, alloc.get(res))}%)\n")
    standard = {"cpu", "memory", "pods", "ephemeral-storage", "storage"}
    for res in sorted(k for k in allocatable if k not in standard and not k.startswith("hugepages-")):
        w.write(1, f"{res}\t{canonical_quantity(total_req.get(res, Decimal(0)))}\t"
                   f"{canonical_quantity(total_lim.get(res, Decimal(0)))}\n")
