"""core/v1 resources: Pod (and the PodSpec used in job templates), Service,
Node, Event, Namespace.

The PodSpec carries every field of the PodTemplateSpec in the Kubeflow CRDs,
so any manifest that a real cluster accepts is accepted; the parts a local
runtime needs (containers, env, ports, resources) are typed, the rest
(affinity, probes, security contexts, volumes) are stored as given.
"""
from __future__ import annotations

import base64
import binascii
import re
from typing import Any, Literal

from pydantic import Field

from phalanx.api.constants import DEFAULT_SCHEDULER_NAME
from phalanx.api.meta import (
    FreeDict,
    Int32,
    Int64,
    IntOrString,
    K8sModel,
    ObjectMeta,
    Quantity,
    ResourceList,
    TemplateMeta,
    Time,
)
from phalanx.objects.errors import FieldError
from phalanx.objects.names import is_dns1123_label, is_dns1123_subdomain
from phalanx.objects.quantity import parse_resource_list

# --- containers ---------------------------------------------------------------


class ObjectFieldSelector(K8sModel):
    api_version: str | None = None
    field_path: str


class ResourceFieldSelector(K8sModel):
    container_name: str | None = None
    divisor: Quantity | None = None
    resource: str


class KeySelector(K8sModel):
    """configMapKeyRef / secretKeyRef."""

    key: str
    name: str | None = None
    optional: bool | None = None


class EnvVarSource(K8sModel):
    field_ref: ObjectFieldSelector | None = None
    resource_field_ref: ResourceFieldSelector | None = None
    config_map_key_ref: KeySelector | None = None
    secret_key_ref: KeySelector | None = None


class EnvVar(K8sModel):
    name: str
    value: str | None = None
    value_from: EnvVarSource | None = None


class LocalObjectReference(K8sModel):
    name: str | None = None
    optional: bool | None = None


class EnvFromSource(K8sModel):
    prefix: str | None = None
    config_map_ref: LocalObjectReference | None = None
    secret_ref: LocalObjectReference | None = None


class ContainerPort(K8sModel):
    name: str | None = None
    container_port: Int32
    protocol: str | None = None
    host_port: Int32 | None = None
    host_ip: str | None = Field(default=None, alias="hostIP")


class ResourceClaim(K8sModel):
    name: str
    request: str | None = None


class ResourceRequirements(K8sModel):
    limits: ResourceList | None = None
    requests: ResourceList | None = None
    claims: list[ResourceClaim] | None = None


class VolumeMount(K8sModel):
    name: str
    mount_path: str
    read_only: bool | None = None
    recursive_read_only: str | None = None
    sub_path: str | None = None
    sub_path_expr: str | None = None
    mount_propagation: str | None = None


class Container(K8sModel):
    name: str
    image: str | None = None
    image_pull_policy: str | None = None
    command: list[str] | None = None
    args: list[str] | None = None
    working_dir: str | None = None
    env: list[EnvVar] | None = None
    env_from: list[EnvFromSource] | None = None
    ports: list[ContainerPort] | None = None
    resources: ResourceRequirements | None = None
    resize_policy: list[FreeDict] | None = None
    restart_policy: str | None = None  # "Always" on an init container makes it a sidecar
    volume_mounts: list[VolumeMount] | None = None
    volume_devices: list[FreeDict] | None = None
    liveness_probe: FreeDict | None = None
    readiness_probe: FreeDict | None = None
    startup_probe: FreeDict | None = None
    lifecycle: FreeDict | None = None
    security_context: FreeDict | None = None
    stdin: bool | None = None
    stdin_once: bool | None = None
    tty: bool | None = None
    termination_message_path: str | None = None
    termination_message_policy: str | None = None


# --- pods -----------------------------------------------------------------------


class Toleration(K8sModel):
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: Int64 | None = None


class PodReadinessGate(K8sModel):
    condition_type: str


class PodSchedulingGate(K8sModel):
    name: str


class PodSpec(K8sModel):
    containers: list[Container] | None = None  # required for a Pod; a job's webhook says so itself
    init_containers: list[Container] | None = None
    ephemeral_containers: list[FreeDict] | None = None
    restart_policy: str | None = None
    termination_grace_period_seconds: Int64 | None = None
    active_deadline_seconds: Int64 | None = None
    dns_policy: str | None = None
    dns_config: FreeDict | None = None
    node_selector: dict[str, str] | None = None
    node_name: str | None = None
    affinity: FreeDict | None = None
    tolerations: list[Toleration] | None = None
    scheduler_name: str | None = None
    priority_class_name: str | None = None
    priority: Int32 | None = None
    preemption_policy: str | None = None
    service_account_name: str | None = None
    service_account: str | None = None
    automount_service_account_token: bool | None = None
    host_network: bool | None = None
    host_ipc: bool | None = Field(default=None, alias="hostIPC")
    host_pid: bool | None = Field(default=None, alias="hostPID")
    host_users: bool | None = None
    host_aliases: list[FreeDict] | None = None
    share_process_namespace: bool | None = None
    security_context: FreeDict | None = None
    image_pull_secrets: list[FreeDict] | None = None
    hostname: str | None = None
    subdomain: str | None = None
    set_hostname_as_fqdn: bool | None = Field(default=None, alias="setHostnameAsFQDN")
    volumes: list[FreeDict] | None = None
    runtime_class_name: str | None = None
    enable_service_links: bool | None = None
    overhead: ResourceList | None = None
    topology_spread_constraints: list[FreeDict] | None = None
    readiness_gates: list[PodReadinessGate] | None = None
    scheduling_gates: list[PodSchedulingGate] | None = None
    resource_claims: list[FreeDict] | None = None
    os: FreeDict | None = None


class PodTemplateSpec(K8sModel):
    metadata: TemplateMeta | None = None
    spec: PodSpec | None = None


class Pod(K8sModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Pod"] = "Pod"
    metadata: ObjectMeta | None = None
    spec: PodSpec | None = None
    status: FreeDict | None = None  # owned by the node agent; see docs/ARCHITECTURE.md "Pods"


# --- services -------------------------------------------------------------------


class ServicePort(K8sModel):
    name: str | None = None
    protocol: str | None = None
    app_protocol: str | None = None
    port: Int32
    target_port: IntOrString | None = None
    node_port: Int32 | None = None


class ServiceSpec(K8sModel):
    selector: dict[str, str] | None = None
    ports: list[ServicePort] | None = None
    cluster_ip: str | None = Field(default=None, alias="clusterIP")
    cluster_ips: list[str] | None = Field(default=None, alias="clusterIPs")
    type: str | None = None
    external_ips: list[str] | None = Field(default=None, alias="externalIPs")
    external_name: str | None = None
    external_traffic_policy: str | None = None
    internal_traffic_policy: str | None = None
    health_check_node_port: Int32 | None = None
    session_affinity: str | None = None
    session_affinity_config: FreeDict | None = None
    load_balancer_ip: str | None = Field(default=None, alias="loadBalancerIP")
    load_balancer_source_ranges: list[str] | None = None
    load_balancer_class: str | None = None
    allocate_load_balancer_node_ports: bool | None = None
    publish_not_ready_addresses: bool | None = None
    ip_families: list[str] | None = None
    ip_family_policy: str | None = None
    traffic_distribution: str | None = None


class Service(K8sModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Service"] = "Service"
    metadata: ObjectMeta | None = None
    spec: ServiceSpec | None = None
    status: FreeDict | None = None


# --- nodes, namespaces, events ---------------------------------------------------


class Taint(K8sModel):
    key: str
    value: str | None = None
    effect: str
    time_added: Time | None = None


class NodeSpec(K8sModel):
    pod_cidr: str | None = Field(default=None, alias="podCIDR")
    pod_cidrs: list[str] | None = Field(default=None, alias="podCIDRs")
    provider_id: str | None = Field(default=None, alias="providerID")
    unschedulable: bool | None = None
    taints: list[Taint] | None = None
    config_source: FreeDict | None = None
    external_id: str | None = Field(default=None, alias="externalID")


class Node(K8sModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Node"] = "Node"
    metadata: ObjectMeta | None = None
    spec: NodeSpec | None = None
    status: FreeDict | None = None  # capacity, allocatable, addresses, conditions


class NamespaceSpec(K8sModel):
    finalizers: list[str] | None = None


class Namespace(K8sModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Namespace"] = "Namespace"
    metadata: ObjectMeta | None = None
    spec: NamespaceSpec | None = None
    status: FreeDict | None = None


class ConfigMap(K8sModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["ConfigMap"] = "ConfigMap"
    metadata: ObjectMeta | None = None
    data: dict[str, str] | None = None
    binary_data: dict[str, str] | None = None
    immutable: bool | None = None


class Secret(K8sModel):
    api_version: Literal["v1"] = "v1"
    kind: Literal["Secret"] = "Secret"
    metadata: ObjectMeta | None = None
    data: dict[str, str] | None = None
    string_data: dict[str, str] | None = None
    type: str | None = None
    immutable: bool | None = None


def default_secret(obj: dict[str, Any]) -> None:
    """As the apiserver: ``type`` defaults to Opaque; ``stringData`` (write-only) is
    merged into ``data`` base64-encoded, its keys winning."""
    if not obj.get("type"):
        obj["type"] = "Opaque"
    string_data = obj.pop("stringData", None)
    if string_data:
        data = obj.get("data") or {}
        data.update({k: base64.b64encode(v.encode("utf-8")).decode("ascii") for k, v in string_data.items()})
        obj["data"] = data


def validate_secret(obj: dict[str, Any]) -> list[FieldError]:
    errs = []
    for key, value in (obj.get("data") or {}).items():
        try:
            base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            errs.append(FieldError(f"data[{key}]", "Invalid", "must be base64-encoded (illegal base64 data)",
                                   "<secret value>"))
    return errs


class ObjectReference(K8sModel):
    api_version: str | None = None
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None
    resource_version: str | None = None
    field_path: str | None = None


class EventSource(K8sModel):
    component: str | None = None
    host: str | None = None


class Event(K8sModel):
    """core/v1 Event: no spec/status, the fields sit at the top level."""

    api_version: Literal["v1"] = "v1"
    kind: Literal["Event"] = "Event"
    metadata: ObjectMeta | None = None
    involved_object: ObjectReference | None = None
    reason: str | None = None
    message: str | None = None
    type: str | None = None
    source: EventSource | None = None
    first_timestamp: Time | None = None
    last_timestamp: Time | None = None
    event_time: str | None = None
    count: Int32 | None = None
    series: FreeDict | None = None
    action: str | None = None
    related: ObjectReference | None = None
    reporting_component: str | None = None
    reporting_instance: str | None = None


# --- defaulting and validation (on JSON-shaped dicts, after the model parsed them) ---

POD_RESTART_POLICIES = ("Always", "OnFailure", "Never")
PROTOCOLS = ("SCTP", "TCP", "UDP")
SERVICE_TYPES = ("ClusterIP", "ExternalName", "LoadBalancer", "NodePort")
DEFAULT_TERMINATION_GRACE_PERIOD = 30
_ENV_NAME_RE = re.compile(r"[-._a-zA-Z][-._a-zA-Z0-9]*")
_ENV_NAME_MSG = ("a valid environment variable name must consist of alphabetic characters, digits, '_', '-', "
                 "or '.', and must not start with a digit (e.g. 'my.env-name',  or 'MY_ENV.NAME',  or "
                 "'MyEnvName1', regex used for validation is '[-._a-zA-Z][-._a-zA-Z0-9]*')")


def default_container_ports(pod_spec: dict[str, Any]) -> None:
    """Ports get ``protocol: TCP`` (the apiserver's and the CRDs' default)."""
    for key in ("initContainers", "containers"):
        for c in pod_spec.get(key) or []:
            for p in c.get("ports") or []:
                if not p.get("protocol"):
                    p["protocol"] = "TCP"


def default_pod(pod: dict[str, Any], creating: bool) -> None:
    """Minimal pod defaults: restartPolicy Always, schedulerName
    default-scheduler, a 30 s grace period, TCP ports, and phase Pending for a
    new pod without a status."""
    spec = pod.setdefault("spec", {})
    if not spec.get("restartPolicy"):
        spec["restartPolicy"] = "Always"
    if not spec.get("schedulerName"):
        spec["schedulerName"] = DEFAULT_SCHEDULER_NAME
    spec.setdefault("terminationGracePeriodSeconds", DEFAULT_TERMINATION_GRACE_PERIOD)
    default_container_ports(spec)
    if creating:
        status = pod.setdefault("status", {})
        status.setdefault("phase", "Pending")


def validate_container_strings(pod_spec: dict[str, Any], path: str) -> list[FieldError]:
    """What a process launcher cannot take: NUL characters in argv, env or
    the working directory, and env names that are not environment names."""
    errs: list[FieldError] = []
    for key in ("initContainers", "containers"):
        for i, c in enumerate(pod_spec.get(key) or []):
            cp = f"{path}.{key}[{i}]"
            for field in ("command", "args"):
                for j, s in enumerate(c.get(field) or []):
                    if "\x00" in s:
                        errs.append(FieldError(f"{cp}.{field}[{j}]", "Invalid", "must not contain a NUL character", s))
            if "\x00" in (c.get("workingDir") or ""):
                errs.append(FieldError(f"{cp}.workingDir", "Invalid", "must not contain a NUL character",
                                       c["workingDir"]))
            for j, e in enumerate(c.get("env") or []):
                if not _ENV_NAME_RE.fullmatch(e["name"]):
                    errs.append(FieldError(f"{cp}.env[{j}].name", "Invalid", _ENV_NAME_MSG, e["name"]))
                if "\x00" in (e.get("value") or ""):
                    errs.append(FieldError(f"{cp}.env[{j}].value", "Invalid", "must not contain a NUL character",
                                           e["value"]))
    return errs


def _port_number(value: Any, path: str) -> list[FieldError]:
    if isinstance(value, int) and not 1 <= value <= 65535:
        return [FieldError(path, "Invalid", "must be between 1 and 65535, inclusive", value)]
    return []


def _resources(c: dict[str, Any], path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    res = c.get("resources") or {}
    limits = parse_resource_list(res.get("limits"))
    requests = parse_resource_list(res.get("requests"))
    for kind, parsed in (("limits", limits), ("requests", requests)):
        for name in sorted(parsed):
            if parsed[name] < 0:
                errs.append(FieldError(f"{path}.resources.{kind}[{name}]", "Invalid",
                                       "must be greater than or equal to 0", str(res[kind][name])))
    for name in sorted(requests):
        if name in limits and requests[name] > limits[name]:
            errs.append(FieldError(f"{path}.resources.requests[{name}]", "Invalid",
                                   f"must be less than or equal to {name} limit of {res['limits'][name]}",
                                   str(res["requests"][name])))
    return errs


def validate_pod_spec(spec: dict[str, Any], path: str = "spec") -> list[FieldError]:
    """The apiserver's pod spec rules that matter on one machine: container
    names (they become file names), images, ports, resources, policies."""
    errs: list[FieldError] = []
    if not spec.get("containers"):
        errs.append(FieldError(f"{path}.containers", "Required"))
    seen: set[str] = set()
    for key in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(key) or []):
            cp = f"{path}.{key}[{i}]"
            name = c["name"]
            if not name:
                errs.append(FieldError(f"{cp}.name", "Required"))
            else:
                errs += [FieldError(f"{cp}.name", "Invalid", m, name) for m in is_dns1123_label(name)]
                if name in seen:
                    errs.append(FieldError(f"{cp}.name", "Duplicate", value=name))
                seen.add(name)
            if not c.get("image"):
                errs.append(FieldError(f"{cp}.image", "Required"))
            for j, p in enumerate(c.get("ports") or []):
                pp = f"{cp}.ports[{j}]"
                errs += _port_number(p["containerPort"], f"{pp}.containerPort")
                if p.get("hostPort"):
                    errs += _port_number(p["hostPort"], f"{pp}.hostPort")
                if p.get("protocol") and p["protocol"] not in PROTOCOLS:
                    errs.append(FieldError(f"{pp}.protocol", "NotSupported", value=p["protocol"], supported=PROTOCOLS))
                if p.get("name"):
                    errs += [FieldError(f"{pp}.name", "Invalid", m, p["name"]) for m in is_valid_port_name(p["name"])]
            errs += _resources(c, cp)
    errs += validate_container_strings(spec, path)
    rp = spec.get("restartPolicy")
    if rp and rp not in POD_RESTART_POLICIES:
        errs.append(FieldError(f"{path}.restartPolicy", "NotSupported", value=rp, supported=POD_RESTART_POLICIES))
    tgp = spec.get("terminationGracePeriodSeconds")
    if tgp is not None and tgp < 0:
        errs.append(FieldError(f"{path}.terminationGracePeriodSeconds", "Invalid",
                               "must be greater than or equal to 0", tgp))
    ads = spec.get("activeDeadlineSeconds")
    if ads is not None and not 1 <= ads <= 2**31 - 1:
        errs.append(FieldError(f"{path}.activeDeadlineSeconds", "Invalid",
                               "must be between 1 and 2147483647, inclusive", ads))
    if spec.get("nodeName"):
        errs += [FieldError(f"{path}.nodeName", "Invalid", m, spec["nodeName"])
                 for m in is_dns1123_subdomain(spec["nodeName"])]
    return errs


def is_valid_port_name(name: str) -> list[str]:
    """IANA_SVC_NAME, as apimachinery's IsValidPortName."""
    errs = []
    if len(name) > 15:
        errs.append("must be no more than 15 characters")
    if not re.fullmatch(r"[-a-z0-9]+", name):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if "--" in name:
        errs.append("must not contain consecutive hyphens")
    if not re.search(r"[a-z]", name):
        errs.append("must contain at least one letter (a-z)")
    if name.startswith("-") or name.endswith("-"):
        errs.append("must not begin or end with a hyphen")
    return errs


def default_service(svc: dict[str, Any]) -> None:
    spec = svc.setdefault("spec", {})
    if not spec.get("type"):
        spec["type"] = "ClusterIP"
    for p in spec.get("ports") or []:
        if not p.get("protocol"):
            p["protocol"] = "TCP"
        if p.get("targetPort") in (None, "", 0):
            p["targetPort"] = p["port"]


def validate_service_spec(spec: dict[str, Any], path: str = "spec") -> list[FieldError]:
    errs: list[FieldError] = []
    typ = spec.get("type")
    if typ and typ not in SERVICE_TYPES:
        errs.append(FieldError(f"{path}.type", "NotSupported", value=typ, supported=SERVICE_TYPES))
    ports = spec.get("ports") or []
    headless = spec.get("clusterIP") == "None"
    if not ports and typ != "ExternalName" and not headless:
        errs.append(FieldError(f"{path}.ports", "Required"))
    names: set[str] = set()
    for i, p in enumerate(ports):
        pp = f"{path}.ports[{i}]"
        name = p.get("name") or ""
        if len(ports) > 1 and not name:
            errs.append(FieldError(f"{pp}.name", "Required"))
        elif name:
            errs += [FieldError(f"{pp}.name", "Invalid", m, name) for m in is_dns1123_label(name)]
            if name in names:
                errs.append(FieldError(f"{pp}.name", "Duplicate", value=name))
            names.add(name)
        errs += _port_number(p["port"], f"{pp}.port")
        if p.get("protocol") and p["protocol"] not in PROTOCOLS:
            errs.append(FieldError(f"{pp}.protocol", "NotSupported", value=p["protocol"], supported=PROTOCOLS))
        tp = p.get("targetPort")
        if isinstance(tp, int) and tp != p["port"]:  # a defaulted targetPort repeats the port's error
            errs += _port_number(tp, f"{pp}.targetPort")
        elif isinstance(tp, str) and tp:
            errs += [FieldError(f"{pp}.targetPort", "Invalid", m, tp) for m in is_valid_port_name(tp)]
    return errs
