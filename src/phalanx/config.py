"""Where Phalanx keeps its state, and the cluster config (nodes, timings).

`PHALANX_HOME` (default: `$XDG_DATA_HOME/phalanx`, i.e. `~/.local/share/phalanx`)
holds the SQLite state, pod logs, the local network table and, when `phalanx up`
runs, the API address and token. `$PHALANX_HOME/cluster.yaml` declares nodes:

    nodes:
      - name: node-a        # DNS label
        cpu: 8              # cores advertised to the scheduler
        memory: 16Gi
        gpus: 0             # nvidia.com/gpu; "auto": the machine's NVIDIA GPUs
        pods: 110
    agent:
      backoffBase: 10       # seconds; kubelet's CrashLoopBackOff base
      backoffCap: 300
    operator:
      defaultBackoffLimit: 0
    autoscaler:             # the HorizontalPodAutoscaler controller (kube-controller-manager's flags)
      syncPeriod: 15        # seconds between two syncs of an HPA
      downscaleStabilization: 300   # seconds of recommendations a scale down waits for
      tolerance: 0.1        # no scaling while the metric is within 10% of its target
      cpuInitializationPeriod: 300  # seconds after a pod's start its cpu counts only once ready
      initialReadinessDelay: 30
    environments:           # the Python environment of containers by image (first match)
      - image: "pytorch/*"  # shell glob on the container's image
        prefix: ~/venvs/torch   # a venv or conda prefix: its bin/ goes first on PATH

Without a file (or without ``nodes``): one node named after this host,
advertising its memory, ``cpuOvercommit`` × its CPUs (default 8) and its
NVIDIA GPUs, if any. On the embedded runtime a CPU limit is a time share, not
a reservation, so jobs written for a cluster (the seed job asks for 4 × cpu 1)
still run on a 2-core laptop; set ``cpuOvercommit: 1`` for strict accounting.
Containers whose image matches no ``environments`` entry run in the Python
environment Phalanx runs from (``phalanx.node.pyenv``). Nodes are all this machine: each gets GPU device indices of its own (see
``phalanx.node.gpus.node_devices``).
"""
from __future__ import annotations

import os
import re
import socket
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import yaml

from phalanx.api.constants import DEFAULT_SCHEDULER_NAME, SCHEDULER_NAME
from phalanx.node.gpus import detect_gpus
from phalanx.node.home import phalanx_home
from phalanx.node.pyenv import PythonEnvironment, check_prefix
from phalanx.objects.names import is_dns_label
from phalanx.objects.quantity import parse_quantity

if TYPE_CHECKING:  # the scheduler's package stays unloaded for the commands that only read this config
    from phalanx.scheduler.config import SchedulerConfig


class ConfigError(ValueError):
    """A cluster config that cannot be used; the message names the field."""


def make_private_dir(path: Path) -> None:
    """Create the state directory 0700 (pod logs, SQLite state and credentials live
    there); tighten an existing one we own so other local users cannot read it."""
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        st = path.stat()
        if st.st_uid == os.getuid() and st.st_mode & 0o077:
            path.chmod(0o700)
    except OSError:
        pass


@dataclass
class NodeConfig:
    name: str
    cpu: float
    memory: float  # bytes
    gpus: int = 0
    pods: int = 110

    def capacity(self) -> dict[str, str]:
        cap = {
            "cpu": _fmt_cpu(self.cpu),
            "memory": str(int(self.memory)),
            "pods": str(self.pods),
        }
        if self.gpus:
            cap["nvidia.com/gpu"] = str(self.gpus)
        return cap


@dataclass
class AgentSettings:
    backoff_base: float = 10.0
    backoff_cap: float = 300.0


@dataclass
class OperatorSettings:
    default_backoff_limit: int = 0
    # Jobs reconciled at once (client-go's threadiness; one key is never
    # reconciled twice at once). Each reconcile waits for its writes' fsync,
    # so one worker would serialise every job behind the disk.
    workers: int = 16


@dataclass
class AutoscalerSettings:
    """kube-controller-manager's --horizontal-pod-autoscaler-* flags, in seconds (tolerance: a ratio)."""

    sync_period: float = 15.0
    downscale_stabilization: float = 300.0
    tolerance: float = 0.1
    cpu_initialization_period: float = 300.0
    initial_readiness_delay: float = 30.0


_AUTOSCALER_KEYS = {"syncPeriod": "sync_period", "downscaleStabilization": "downscale_stabilization",
                    "tolerance": "tolerance", "cpuInitializationPeriod": "cpu_initialization_period",
                    "initialReadinessDelay": "initial_readiness_delay"}


@dataclass
class ClusterConfig:
    nodes: list[NodeConfig] = field(default_factory=list)
    agent: AgentSettings = field(default_factory=AgentSettings)
    operator: OperatorSettings = field(default_factory=OperatorSettings)
    autoscaler: AutoscalerSettings = field(default_factory=AutoscalerSettings)
    environments: list[PythonEnvironment] = field(default_factory=list)
    # The schedulerNames the embedded gang scheduler serves (the first is its
    # own name, which job pods carry). It is the cluster's only scheduler, so
    # it serves the apiserver's default too: a pod is never left Pending for
    # its schedulerName. Pods without a PodGroup get one of their own.
    scheduler_names: tuple[str, ...] = (SCHEDULER_NAME, DEFAULT_SCHEDULER_NAME)
    # Its actions, tiers and plugin arguments (`phalanx up --scheduler-conf`; None: the defaults);
    # the names above win.
    scheduler: SchedulerConfig | None = None


def _fmt_cpu(cpu: float) -> str:
    if float(cpu).is_integer():
        return str(int(cpu))
    return f"{int(round(cpu * 1000))}m"


def default_node_name() -> str:
    host = socket.gethostname().split(".")[0].lower()
    host = re.sub(r"[^a-z0-9-]", "-", host).strip("-")[:63] or "local"
    return host if is_dns_label(host) else "local"


def default_config(cpu_overcommit: float = 8.0) -> ClusterConfig:
    cpus = os.cpu_count() or 1
    mem = psutil.virtual_memory().total
    return ClusterConfig(nodes=[NodeConfig(default_node_name(), cpus * cpu_overcommit, mem, detect_gpus())])


def load_config(path: Path | None = None, home: Path | None = None) -> ClusterConfig:
    """Read the cluster config; defaults for everything not given."""
    if path is None:
        candidate = (home or phalanx_home()) / "cluster.yaml"
        path = candidate if candidate.exists() else None
    if path is None:
        return default_config()
    try:
        data = yaml.safe_load(Path(path).read_text()) or {}
    except (OSError, yaml.YAMLError) as e:
        raise ConfigError(f"cannot read cluster config {path}: {e}") from None
    return parse_config(data, source=str(path))


def parse_config(data: object, source: str = "cluster config") -> ClusterConfig:
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: must be a mapping")
    unknown = set(data) - {"nodes", "agent", "operator", "autoscaler", "cpuOvercommit", "environments"}
    if unknown:
        raise ConfigError(f"{source}: unknown field(s) {sorted(unknown)}")
    overcommit = data.get("cpuOvercommit", 8.0)
    if not isinstance(overcommit, (int, float)) or overcommit <= 0:
        raise ConfigError(f"{source}: cpuOvercommit: must be a positive number")
    cfg = ClusterConfig()
    nodes = data.get("nodes")
    if nodes is None:
        cfg.nodes = default_config(float(overcommit)).nodes
    else:
        if not isinstance(nodes, list) or not nodes:
            raise ConfigError(f"{source}: nodes: must be a non-empty list")
        seen: set[str] = set()
        for i, n in enumerate(nodes):
            where = f"{source}: nodes[{i}]"
            if not isinstance(n, dict):
                raise ConfigError(f"{where}: must be a mapping")
            bad = set(n) - {"name", "cpu", "memory", "gpus", "pods"}
            if bad:
                raise ConfigError(f"{where}: unknown field(s) {sorted(bad)}")
            name = n.get("name")
            if not isinstance(name, str) or not is_dns_label(name):
                raise ConfigError(f"{where}.name: must be a DNS label (lower case alphanumerics and '-')")
            if name in seen:
                raise ConfigError(f"{where}.name: duplicate node name {name!r}")
            seen.add(name)
            try:
                cpu = parse_quantity(n.get("cpu", os.cpu_count() or 1))
                mem = parse_quantity(n.get("memory", psutil.virtual_memory().total))
            except ValueError as e:
                raise ConfigError(f"{where}: {e}") from None
            gpus = n.get("gpus", 0)
            pods = n.get("pods", 110)
            if gpus == "auto":
                gpus = detect_gpus()
            if isinstance(gpus, bool) or not isinstance(gpus, int) or gpus < 0:
                raise ConfigError(f'{where}.gpus: must be a non-negative integer or "auto"')
            if not isinstance(pods, int) or pods < 1:
                raise ConfigError(f"{where}.pods: must be a positive integer")
            if cpu <= 0 or mem <= 0:
                raise ConfigError(f"{where}: cpu and memory must be positive")
            cfg.nodes.append(NodeConfig(name, cpu, mem, gpus, pods))
    agent = data.get("agent") or {}
    if not isinstance(agent, dict):
        raise ConfigError(f"{source}: agent: must be a mapping")
    for key, attr in (("backoffBase", "backoff_base"), ("backoffCap", "backoff_cap")):
        if key in agent:
            v = agent[key]
            if not isinstance(v, (int, float)) or v < 0:
                raise ConfigError(f"{source}: agent.{key}: must be a non-negative number of seconds")
            setattr(cfg.agent, attr, float(v))
    op = data.get("operator") or {}
    if not isinstance(op, dict):
        raise ConfigError(f"{source}: operator: must be a mapping")
    if "defaultBackoffLimit" in op:
        v = op["defaultBackoffLimit"]
        if not isinstance(v, int) or v < 0:
            raise ConfigError(f"{source}: operator.defaultBackoffLimit: must be a non-negative integer")
        cfg.operator.default_backoff_limit = v
    if "workers" in op:
        v = op["workers"]
        if not isinstance(v, int) or isinstance(v, bool) or not 1 <= v <= 1024:
            raise ConfigError(f"{source}: operator.workers: must be an integer from 1 to 1024")
        cfg.operator.workers = v
    cfg.autoscaler = _parse_autoscaler(data.get("autoscaler"), source)
    cfg.environments = _parse_environments(data.get("environments"), source)
    return cfg


def _parse_autoscaler(data: object, source: str) -> AutoscalerSettings:
    out = AutoscalerSettings()
    if data is None:
        return out
    if not isinstance(data, dict):
        raise ConfigError(f"{source}: autoscaler: must be a mapping")
    unknown = set(data) - set(_AUTOSCALER_KEYS)
    if unknown:
        raise ConfigError(f"{source}: autoscaler: unknown field(s) {sorted(unknown)}")
    for key, attr in _AUTOSCALER_KEYS.items():
        if key in data:
            v = data[key]
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or (key == "syncPeriod" and v == 0):
                what = "a positive" if key == "syncPeriod" else "a non-negative"
                raise ConfigError(f"{source}: autoscaler.{key}: must be {what} number")
            setattr(out, attr, float(v))
    return out


def _parse_environments(data: object, source: str) -> list[PythonEnvironment]:
    if data is None:
        return []
    if not isinstance(data, list):
        raise ConfigError(f"{source}: environments: must be a list of {{image, prefix}}")
    out = []
    for i, e in enumerate(data):
        where = f"{source}: environments[{i}]"
        if not isinstance(e, dict):
            raise ConfigError(f"{where}: must be a mapping with image and prefix")
        bad = set(e) - {"image", "prefix"}
        if bad:
            raise ConfigError(f"{where}: unknown field(s) {sorted(bad)}")
        image, prefix = e.get("image"), e.get("prefix")
        if not isinstance(image, str) or not image:
            raise ConfigError(f"{where}.image: must be a non-empty image pattern (shell glob)")
        if not isinstance(prefix, str) or not prefix:
            raise ConfigError(f"{where}.prefix: must be the path of a venv or conda prefix")
        path = Path(prefix).expanduser()
        problem = check_prefix(path)
        if problem:
            raise ConfigError(f"{where}.prefix: {problem}")
        out.append(PythonEnvironment(image, path))
    return out
