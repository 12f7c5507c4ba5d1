"""What a training framework (PyTorch, TensorFlow, ...) plugs into the job reconciler.

A framework knows its kind's spelling (replica types in a fixed order,
container and port names), the environment its processes need, and the
per-kind success/failure rules. The reconciler knows everything else.
"""
from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Mapping

from phalanx.api.constants import ANNOTATION_ADDRESS, ANNOTATION_HOST_PORTS
from phalanx.controller.conditions import StatusWriter
from phalanx.controller.fields import as_dict, as_int, as_list, as_str, namespace, spec
from phalanx.objects.meta import name_of

# Replica-level restart policies; ExitCode is the operator's, pods get Never.
RESTART_POLICIES = ("Always", "OnFailure", "Never", "ExitCode")


@dataclass(frozen=True)
class ReplicaState:
    """One replica type as the reconciler counted it this round."""

    rtype: str
    replicas: int
    restart_policy: str
    active: int
    succeeded: int
    failed: int
    pods: tuple[dict | None, ...] = ()  # the pod in slot i (i < replicas), if any


def env_var(name_: str, value: object) -> dict[str, Any]:
    """A container ``env`` entry: ``{"name": name_, "value": str(value)}``."""
    return {"name": name_, "value": str(value)}


def general_name(job_name: str, rt: str, index: int) -> str:
    """``GenGeneralName``: ``<job>-<rt>-<index>`` with "/" turned into "-"."""
    return f"{job_name}-{rt}-{index}".replace("/", "-")


def replicas_of(rspec: dict) -> int:
    """``replicas`` with nil counted as 1; negative or garbage counted as 0."""
    v = as_dict(rspec).get("replicas", None)
    if v is None:
        return 1
    n = as_int(v, 0)
    return max(0, n if n is not None else 0)


class Framework(ABC):
    """One job kind. Subclasses set the class attributes and the hooks."""

    kind: str
    controller_name: str
    replica_specs_field: str
    replica_types: tuple[str, ...]  # fixed order: creation, minResources, status rules
    default_container_name: str
    default_port_name: str
    default_port: int
    default_restart_policy: str
    sets_replica_selector: bool = False  # replicaStatuses[rt].selector (PyTorch, Paddle, JAX)
    creates_services: bool = True  # one headless Service per pod slot (MPI: none)

    # ---- spec helpers -------------------------------------------------------------

    def replica_specs(self, job: dict) -> list[tuple[str, dict]]:
        """(canonical replica type, spec) in the fixed order; unknown types after,
        sorted. Keys are matched ignoring case, as the original's defaulting does."""
        raw = as_dict(spec(job).get(self.replica_specs_field))
        canon = {t.lower(): t for t in self.replica_types}
        found: dict[str, dict] = {}
        for key in sorted(raw, key=lambda k: (k not in self.replica_types, str(k))):
            if not isinstance(key, str) or not isinstance(raw[key], dict):
                continue
            rtype = canon.get(key.lower(), key)
            found.setdefault(rtype, raw[key])
        known = [(t, found[t]) for t in self.replica_types if t in found]
        unknown = sorted((t, s) for t, s in found.items() if t not in self.replica_types)
        return known + unknown

    def replica_spec(self, job: dict, rtype: str) -> dict | None:
        for t, s in self.replica_specs(job):
            if t == rtype:
                return s
        return None

    def total_replicas(self, job: dict) -> int:
        return sum(replicas_of(s) for _, s in self.replica_specs(job))

    def runs_on_without_evicted(self, job: dict, running: Mapping[str, int]) -> bool:
        """Whether the job keeps running, not Restarting, while the scheduler evicts some of its pods,
        given the pods of each replica type still ``running`` (and not evicted): never, for a rigid gang."""
        return False

    def gang_size(self, job: dict) -> int:
        """The PodGroup's minMember when schedulingPolicy.minAvailable does not set it: every replica."""
        return self.total_replicas(job)

    def restart_policy(self, rspec: dict) -> str:
        p = as_str(as_dict(rspec).get("restartPolicy"))
        return p if p in RESTART_POLICIES else self.default_restart_policy

    def default_container(self, rspec: dict) -> dict | None:
        containers = [c for c in as_list(as_dict(as_dict(as_dict(rspec).get("template")).get("spec")).get("containers"))
                      if isinstance(c, dict)]
        for c in containers:
            if c.get("name") == self.default_container_name:
                return c
        return None

    def declared_port(self, job: dict, rtype: str, port_name: str) -> int | None:
        """The containerPort named ``port_name`` of the default container of ``rtype``."""
        c = self.default_container(self.replica_spec(job, rtype) or {})
        for p in as_list((c or {}).get("ports")):
            if isinstance(p, dict) and p.get("name") == port_name:
                port = as_int(p.get("containerPort"))
                if port is not None and 0 < port < 65536:
                    return port
        return None

    # ---- hooks --------------------------------------------------------------------

    def pod_name(self, job: dict, rtype: str, index: int) -> str:
        """The pod (and Service) name of slot ``index``: ``<job>-<rt>-<index>``."""
        return general_name(name_of(job), rtype.lower(), index)

    def decorate_pod(self, job: dict, rtype: str, index: int, pod: dict, options) -> None:
        """Last touch on a pod built from the template (volumes, default command...)."""

    def owned_kinds(self, options) -> tuple[str, ...]:
        """The kinds of the other objects a job of this kind controls: those ``owned_objects`` may
        return, and the HorizontalPodAutoscaler of ``job.hpa`` (the shell watches them: a change
        enqueues the job)."""
        return ()

    def owned_objects(self, job: dict, pods: list[dict], options) -> list[dict]:
        """Other objects the job must own with exactly this content (MPI: the
        ConfigMap with the hostfile; in cluster mode its ServiceAccount, Role,
        RoleBinding). Each is a whole object with apiVersion/kind/metadata
        (name, namespace); the reconciler adds the ownerReference and creates or
        replaces it when absent or different (compared on what is given here)."""
        return []

    @abstractmethod
    def is_master_role(self, job: dict, rtype: str, index: int) -> bool:
        """Whether this pod gets ``training.kubeflow.org/job-role=master``."""

    @abstractmethod
    def pod_env(self, job: dict, rtype: str, index: int, addressing: "Addressing") -> list[dict]:
        """Env vars appended to the containers ``env_targets`` picks (docs/REFERENCE.md §5)."""

    def env_targets(self, containers: list[dict]) -> list[dict]:
        """Which containers get ``pod_env``: by default every one of them."""
        return containers

    def init_containers(self, job: dict, rtype: str, index: int, options, addressing: "Addressing") -> list[dict]:
        """Init containers appended to the pod's ``initContainers``."""
        return []

    @abstractmethod
    def update_status(self, job: dict, replicas: list[ReplicaState], st: StatusWriter) -> None:
        """The per-kind ``UpdateJobStatus`` rules (docs/REFERENCE.md §6), in fixed order."""


class Addressing:
    """Where each replica can be reached, read from the job's headless Services.

    Kubernetes mode: DNS names and the declared ports, as the original. Local
    runtime: the host port the local network allocated (annotation
    ``phalanx.dev/host-ports``) and, when names do not resolve, the Service's
    ``phalanx.dev/address`` instead of its name.
    """

    def __init__(
        self,
        job: dict,
        services: Mapping[str, dict],
        framework: Framework,
        local_runtime: bool = True,
        resolvable_names: bool = True,
        cluster_domain: str | None = None,
    ) -> None:
        self.job = job
        self.job_name = name_of(job)
        self.namespace = namespace(job)
        self.services = services
        self.framework = framework
        self.local = local_runtime
        self.use_ip = local_runtime and not resolvable_names
        self.cluster_domain = cluster_domain

    def service_name(self, rtype: str, index: int) -> str:
        return general_name(self.job_name, rtype.lower(), index)

    def _annotations(self, rtype: str, index: int) -> dict:
        svc = self.services.get(self.service_name(rtype, index))
        return as_dict(as_dict(as_dict(svc).get("metadata")).get("annotations"))

    def _host_ports(self, rtype: str, index: int) -> dict | None:
        raw = self._annotations(rtype, index).get(ANNOTATION_HOST_PORTS)
        if not isinstance(raw, str):
            return None
        try:
            ports = json.loads(raw)
        except ValueError:
            return None
        return ports if isinstance(ports, dict) else None

    def ready(self, rtype: str, index: int) -> bool:
        """The Service exists and, locally, carries what env needs."""
        if self.service_name(rtype, index) not in self.services:
            return False
        if not self.local:
            return True
        if self._host_ports(rtype, index) is None:
            return False
        return not self.use_ip or bool(self._annotations(rtype, index).get(ANNOTATION_ADDRESS))

    def host(self, rtype: str, index: int, fqdn: bool = False) -> str:
        """``<job>-<rt>-<i>`` (``fqdn``: ``.<ns>.svc[.<domain>]``, as TF), or the IP."""
        if self.use_ip:
            ip = self._annotations(rtype, index).get(ANNOTATION_ADDRESS)
            if isinstance(ip, str) and ip:
                return ip
        host = self.service_name(rtype, index)
        if fqdn:
            host += f".{self.namespace}.svc"
            if self.cluster_domain:
                host += f".{self.cluster_domain}"
        return host

    def port(self, rtype: str, index: int, port_name: str, default: int) -> int:
        """The effective port: the local host port, else the declared one, else ``default``."""
        if self.local:
            p = as_int((self._host_ports(rtype, index) or {}).get(port_name))
            if p is not None and 0 < p < 65536:
                return p
        declared = self.framework.declared_port(self.job, rtype, port_name)
        return declared if declared is not None else default
