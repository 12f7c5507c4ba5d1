"""Workload files for ``phalanx simulate``: the cluster, the timings, and the jobs.

```yaml
cluster:
  nodes: 1000            # N identical nodes (or a list of groups: {count, cpu, memory, gpus, prefix})
  cpu: 32
  memory: 256Gi
  gpus: 8
  queues:                # Volcano Queue objects, created before any job
  - {apiVersion: scheduling.volcano.sh/v1beta1, kind: Queue, metadata: {name: research}, spec: {weight: 2}}
sim:                     # optional
  backoffBase: 10s
  backoffCap: 5m
  stopTime: 2s           # SIGTERM to exit of a killed container (at most its grace)
  schedulerPeriod: 1s
  until: 8d              # stop at this virtual time at the latest
jobs:                    # explicit submissions ...
- at: 0s
  file: ../seeds/p5-worker-fails.yaml      # relative to this file; or `manifest: {...}`
  behaviour:
    Worker: {duration: 30s}
    Worker[0]: {failAfter: 10s, exitCode: 1}
generator:               # ... and/or generated ones (Poisson arrivals)
  seed: 1
  horizon: 7d
  arrivalRate: 30        # jobs per hour
  replicas: {dist: choice, values: [1, 2, 4, 8], weights: [4, 3, 2, 1]}
  duration: {dist: lognormal, median: 30m, sigma: 1.0, max: 1d}
  failureProbability: 0.05
  kinds: {PyTorchJob: 3, TFJob: 1}
  queues: {default: 1}
  cpu: 4
  memory: 16Gi
  gpus: 1
```

Validated with pydantic; ``WorkloadError`` lists every problem as ``field.path: message``.
Generation is deterministic: the same file and seed give the same jobs.
"""
from __future__ import annotations

import math
import random
import re
from typing import Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic.alias_generators import to_camel

from phalanx.objects.names import is_dns_label
from phalanx.objects.quantity import parse_quantity
from phalanx.sim.units import DurationError, parse_duration

BEHAVIOUR_KEY = re.compile(r"^([A-Za-z][A-Za-z0-9]*)(?:\[(\d+)\])?$")
GENERATED_KINDS = ("PyTorchJob", "TFJob")
MAX_NODES = 100_000


class WorkloadError(ValueError):
    """A workload file that cannot be simulated; one ``field: problem`` per line."""

    def __init__(self, problems: list[str], source: str = "workload") -> None:
        self.problems = problems
        super().__init__(f"{source}: invalid workload:\n" + "\n".join(f"  {p}" for p in problems))


def duration_seconds(v: Any) -> float:
    """A workload duration ("30s", "5m", a number of seconds) in seconds; ValueError if it is not one."""
    try:
        return parse_duration(v)
    except DurationError as e:
        raise ValueError(str(e)) from None


def _quantity(v: Any) -> float:
    try:
        q = parse_quantity(v)
    except ValueError as e:
        raise ValueError(f"{v!r}: {e}") from None
    if q < 0 or not math.isfinite(q):
        raise ValueError(f"{v!r}: must be a finite, non-negative quantity")
    return q


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, frozen=True)


# ----------------------------------------------------------------------------- distributions


class Dist(_Model):
    """A random quantity: ``fixed`` value, ``uniform`` [min, max], ``lognormal``
    (median, sigma), ``exponential`` (mean), or ``choice`` of values with weights.
    ``min``/``max`` clamp the others. A bare scalar means ``fixed``."""

    dist: Literal["fixed", "uniform", "lognormal", "exponential", "choice"] = "fixed"
    value: Any = None
    min: Any = None
    max: Any = None
    median: Any = None
    sigma: float = Field(default=1.0, ge=0, le=10)
    mean: Any = None
    values: list[Any] | None = None
    weights: list[float] | None = None

    @model_validator(mode="before")
    @classmethod
    def _scalar(cls, v: Any) -> Any:
        return {"dist": "fixed", "value": v} if not isinstance(v, dict) else v

    @model_validator(mode="after")
    def _required(self) -> "Dist":
        need = {"fixed": ("value",), "uniform": ("min", "max"), "lognormal": ("median",),
                "exponential": ("mean",), "choice": ("values",)}[self.dist]
        for f in need:
            if getattr(self, f) is None:
                raise ValueError(f"{f}: Required value for dist {self.dist}")
        if self.dist == "choice":
            if not self.values:
                raise ValueError("values: must not be empty")
            if self.weights is not None:
                if len(self.weights) != len(self.values):
                    raise ValueError("weights: must have one weight per value")
                if any(w < 0 or not math.isfinite(w) for w in self.weights) or sum(self.weights) <= 0:
                    raise ValueError("weights: must be non-negative with a positive sum")
        return self

    def sampler(self, parse: Any) -> "Sampler":
        try:
            return Sampler(self, parse)
        except ValueError as e:
            raise ValueError(str(e)) from None


def _given(v: float | None) -> float:
    """A parameter ``Dist`` requires for its kind (its validator made sure it is set)."""
    assert v is not None
    return v


class Sampler:
    """A ``Dist`` with its values parsed (durations or counts), ready to draw."""

    def __init__(self, d: Dist, parse: Any) -> None:
        def p(field: str, v: Any) -> float:
            try:
                return parse(v)
            except (ValueError, TypeError) as e:
                raise ValueError(f"{field}: {e}") from None
        self.kind = d.dist
        self.value = p("value", d.value) if d.value is not None else None
        self.lo = p("min", d.min) if d.min is not None else None
        self.hi = p("max", d.max) if d.max is not None else None
        self.median = p("median", d.median) if d.median is not None else None
        self.mean = p("mean", d.mean) if d.mean is not None else None
        self.sigma = d.sigma
        self.values = [p(f"values[{i}]", v) for i, v in enumerate(d.values or [])]
        self.weights = list(d.weights) if d.weights else None
        if self.kind == "uniform" and _given(self.hi) < _given(self.lo):
            raise ValueError("max: must be >= min")
        if self.kind == "lognormal" and _given(self.median) <= 0:
            raise ValueError("median: must be > 0")
        if self.kind == "exponential" and _given(self.mean) <= 0:
            raise ValueError("mean: must be > 0")

    def draw(self, rng: random.Random) -> float:
        x: float
        if self.kind == "fixed":
            x = _given(self.value)
        elif self.kind == "uniform":
            x = rng.uniform(_given(self.lo), _given(self.hi))
        elif self.kind == "lognormal":
            x = rng.lognormvariate(math.log(_given(self.median)), self.sigma)
        elif self.kind == "exponential":
            x = rng.expovariate(1.0 / _given(self.mean))
        else:
            x = rng.choices(self.values, weights=self.weights)[0]
        if self.lo is not None and self.kind != "uniform":
            x = max(x, self.lo)
        if self.hi is not None and self.kind != "uniform":
            x = min(x, self.hi)
        return x


def replica_count(v: Any) -> float:
    """A replica count (a positive whole number) as a float, as ``Sampler`` draws it."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v != int(v) or v < 1:
        raise ValueError(f"{v!r}: must be a positive integer")
    return float(int(v))


# ----------------------------------------------------------------------------- cluster


class NodeGroup(_Model):
    count: int = Field(default=1, ge=1, le=MAX_NODES)
    cpu: Union[str, float] = 8
    memory: Union[str, float] = "32Gi"
    gpus: int = Field(default=0, ge=0, le=1024)
    pods: int = Field(default=110, ge=1, le=100_000)
    prefix: str = "node"

    @field_validator("cpu", "memory")
    @classmethod
    def _q(cls, v: Any) -> Any:
        _quantity(v)
        return v

    @field_validator("prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if not is_dns_label(v) or len(v) > 50:
            raise ValueError(f"{v!r}: must be a DNS label of at most 50 characters")
        return v


class Cluster(_Model):
    nodes: Union[int, list[NodeGroup]] = 1
    cpu: Union[str, float] = 8
    memory: Union[str, float] = "32Gi"
    gpus: int = Field(default=0, ge=0, le=1024)
    pods: int = Field(default=110, ge=1, le=100_000)
    queues: list[dict[str, Any]] = []

    @field_validator("cpu", "memory")
    @classmethod
    def _q(cls, v: Any) -> Any:
        _quantity(v)
        return v

    @field_validator("nodes")
    @classmethod
    def _nodes(cls, v: Any) -> Any:
        if isinstance(v, int) and not 1 <= v <= MAX_NODES:
            raise ValueError(f"{v}: must be between 1 and {MAX_NODES}")
        if isinstance(v, list) and not v:
            raise ValueError("must not be empty")
        return v

    @field_validator("queues")
    @classmethod
    def _queues(cls, v: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, q in enumerate(v):
            if q.get("kind", "Queue") != "Queue":
                raise ValueError(f"[{i}].kind: must be Queue")
            name = (q.get("metadata") or {}).get("name") if isinstance(q.get("metadata"), dict) else None
            if not isinstance(name, str) or not is_dns_label(name):
                raise ValueError(f"[{i}].metadata.name: Required value: a DNS label")
        return v

    def groups(self) -> list[NodeGroup]:
        if isinstance(self.nodes, int):
            return [NodeGroup(count=self.nodes, cpu=self.cpu, memory=self.memory, gpus=self.gpus, pods=self.pods)]
        return list(self.nodes)

    def node_specs(self) -> list[tuple[str, dict[str, str]]]:
        """(name, capacity) of every node, names ``<prefix>-<n>`` numbered per prefix."""
        out: list[tuple[str, dict[str, str]]] = []
        seen: dict[str, int] = {}
        for g in self.groups():
            cap = {"cpu": _fmt(_quantity(g.cpu)), "memory": str(int(_quantity(g.memory))), "pods": str(g.pods)}
            if g.gpus:
                cap["nvidia.com/gpu"] = str(g.gpus)
            for _ in range(g.count):
                n = seen.get(g.prefix, 0)
                seen[g.prefix] = n + 1
                out.append((f"{g.prefix}-{n:05d}", cap))
        if len(out) > MAX_NODES:
            raise ValueError(f"at most {MAX_NODES} nodes")
        return out


def _fmt(cpu: float) -> str:
    return str(int(cpu)) if float(cpu).is_integer() else f"{int(round(cpu * 1000))}m"


# ----------------------------------------------------------------------------- settings


class SimSettings(_Model):
    backoff_base: Any = "10s"
    backoff_cap: Any = "300s"
    default_backoff_limit: int = Field(default=0, ge=0, le=1_000_000)
    startup: Any = "0s"
    stop_time: Any = "0s"  # SIGTERM to exit of a killed container (at most its grace period)
    scheduler_period: Any = "10m"
    until: Any = None
    drain: Any = "1d"
    events: bool = True
    event_ttl: Any = "1h"

    @field_validator("backoff_base", "backoff_cap", "startup", "stop_time", "until", "drain", "event_ttl")
    @classmethod
    def _d(cls, v: Any) -> Any:
        if v is not None:
            duration_seconds(v)
        return v

    @field_validator("scheduler_period")
    @classmethod
    def _positive(cls, v: Any) -> Any:
        if duration_seconds(v) <= 0:
            raise ValueError(f"{v!r}: must be > 0")
        return v

    def seconds(self, name: str) -> float | None:
        v = getattr(self, name)
        return None if v is None else duration_seconds(v)


# ----------------------------------------------------------------------------- jobs


class BehaviourSpec(_Model):
    duration: Any = None
    exit_code: int | None = Field(default=None, ge=0, le=255)
    fail_after: Any = None
    failures: int | None = Field(default=None, ge=0)
    startup: Any = None

    @field_validator("duration")
    @classmethod
    def _dur(cls, v: Any) -> Any:
        if v is not None and str(v).strip() not in ("inf", "infinity"):
            duration_seconds(v)
        return v

    @field_validator("fail_after", "startup")
    @classmethod
    def _d(cls, v: Any) -> Any:
        if v is not None:
            duration_seconds(v)
        return v

    def pairs(self) -> dict[str, str]:
        out = {}
        for key, v in (("duration", self.duration), ("exit-code", self.exit_code), ("fail-after", self.fail_after),
                       ("failures", self.failures), ("startup", self.startup)):
            if v is not None:
                out[key] = str(v)
        return out


class JobEntry(_Model):
    at: Any = 0
    manifest: dict[str, Any] | None = None
    file: str | None = None
    namespace: str | None = None
    behaviour: dict[str, BehaviourSpec] = {}
    count: int = Field(default=1, ge=1, le=1_000_000)
    every: Any = 0

    @field_validator("at", "every")
    @classmethod
    def _d(cls, v: Any) -> Any:
        duration_seconds(v)
        return v

    @field_validator("namespace")
    @classmethod
    def _ns(cls, v: str | None) -> str | None:
        if v is not None and not is_dns_label(v):
            raise ValueError(f"{v!r}: must be a DNS label")
        return v

    @field_validator("behaviour")
    @classmethod
    def _keys(cls, v: dict[str, BehaviourSpec]) -> dict[str, BehaviourSpec]:
        for k in v:
            if not BEHAVIOUR_KEY.match(k):
                raise ValueError(f"{k!r}: must be a replica type (Worker) or a replica (Worker[0])")
        return v

    @model_validator(mode="after")
    def _one_source(self) -> "JobEntry":
        if (self.manifest is None) == (self.file is None):
            raise ValueError("exactly one of manifest and file is required")
        return self


class Generator(_Model):
    seed: int = 0
    horizon: Any
    arrival_rate: float = Field(gt=0, le=1_000_000)
    replicas: Dist = Dist(dist="fixed", value=4)
    duration: Dist = Dist(dist="lognormal", median="30m", sigma=1.0)
    failure_probability: float = Field(default=0.0, ge=0, le=1)
    kinds: dict[str, float] = {"PyTorchJob": 1.0}
    queues: dict[str, float] = {"default": 1.0}
    cpu: Union[str, float] = 1
    memory: Union[str, float] = "1Gi"
    gpus: int = Field(default=0, ge=0, le=1024)
    namespaces: int = Field(default=1, ge=1, le=10_000)
    backoff_limit: int = Field(default=3, ge=0, le=1000)
    clean_pod_policy: Literal["None", "Running", "All"] = "All"
    ttl_seconds_after_finished: int | None = Field(default=3600, ge=0)
    name_prefix: str = "job"
    max_jobs: int = Field(default=10_000_000, ge=1)

    @field_validator("horizon")
    @classmethod
    def _h(cls, v: Any) -> Any:
        if duration_seconds(v) <= 0:
            raise ValueError("must be > 0")
        return v

    @field_validator("cpu", "memory")
    @classmethod
    def _q(cls, v: Any) -> Any:
        _quantity(v)
        return v

    @field_validator("kinds")
    @classmethod
    def _kinds(cls, v: dict[str, float]) -> dict[str, float]:
        bad = [k for k in v if k not in GENERATED_KINDS]
        if bad:
            raise ValueError(f"{bad[0]!r}: Unsupported value: supported values: {', '.join(GENERATED_KINDS)}")
        _weights(v)
        return v

    @field_validator("queues")
    @classmethod
    def _queues(cls, v: dict[str, float]) -> dict[str, float]:
        for k in v:
            if not is_dns_label(k):
                raise ValueError(f"{k!r}: must be a DNS label")
        _weights(v)
        return v

    @field_validator("name_prefix")
    @classmethod
    def _prefix(cls, v: str) -> str:
        if not is_dns_label(v) or len(v) > 30:
            raise ValueError(f"{v!r}: must be a DNS label of at most 30 characters")
        return v

    @model_validator(mode="after")
    def _samplers(self) -> "Generator":
        for name, d, parse in (("replicas", self.replicas, replica_count), ("duration", self.duration, duration_seconds)):
            try:
                d.sampler(parse)
            except ValueError as e:
                raise ValueError(f"{name}.{e}") from None
        return self


def _weights(v: dict[str, float]) -> None:
    if not v:
        raise ValueError("must not be empty")
    if any(w < 0 or not math.isfinite(w) for w in v.values()) or sum(v.values()) <= 0:
        raise ValueError("weights must be non-negative with a positive sum")


class Workload(_Model):
    cluster: Cluster = Cluster()
    sim: SimSettings = SimSettings()
    jobs: list[JobEntry] = []
    generator: Generator | None = None

    @model_validator(mode="after")
    def _something(self) -> "Workload":
        if not self.jobs and self.generator is None:
            raise ValueError("jobs or generator: Required value: a workload needs jobs to simulate")
        if self.generator is not None:
            known = {"default"} | {q["metadata"]["name"] for q in self.cluster.queues}
            missing = sorted(set(self.generator.queues) - known)
            if missing:
                raise ValueError(f"generator.queues: {missing[0]!r}: no such queue in cluster.queues")
        return self


# ----------------------------------------------------------------------------- loading


def _errors(e: ValidationError) -> list[str]:
    out = []
    for err in e.errors():
        loc = ".".join(str(x) if not isinstance(x, int) else f"[{x}]" for x in err["loc"]).replace(".[", "[")
        msg = err["msg"].removeprefix("Value error, ")
        out.append(f"{loc}: {msg}" if loc else msg)
    return out


def parse_workload(data: Any, source: str = "workload") -> Workload:
    if not isinstance(data, dict):
        raise WorkloadError(["(top level): must be a mapping with cluster, sim, jobs and/or generator"], source)
    try:
        return Workload.model_validate(data)
    except ValidationError as e:
        raise WorkloadError(_errors(e), source) from None
