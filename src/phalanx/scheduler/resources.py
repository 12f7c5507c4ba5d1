"""Resource vectors in Volcano's units: cpu in millicores, memory in bytes,
scalar (extended) resources in milli-units, compared with Volcano's 0.1 slack.

A session fixes one list of dimensions (``Dims``); every vector is a plain
list of floats in that order, which keeps the hot loops free of dict lookups.
``pods`` is not a dimension: it is the node's task-count cap (MaxTaskNum).
"""
from __future__ import annotations

import math
from typing import Any, Iterable, Mapping, Sequence

from phalanx.objects.quantity import container_requests, format_quantity, parse_resource_list

# Volcano's minResource: two values closer than this are equal.
EPS = 0.1
INF = math.inf

Vec = list[float]

# kube-scheduler's non-zero defaults for containers without requests
# (pkg/scheduler/util: DefaultMilliCPURequest, DefaultMemoryRequest).
DEFAULT_MILLI_CPU_REQUEST = 100.0
DEFAULT_MEMORY_REQUEST = 200.0 * 1024 * 1024


def is_scheduling_resource(name: str) -> bool:
    """Volcano's NewResource keeps cpu, memory and scalar resources (extended
    resources such as nvidia.com/gpu, hugepages-*); ephemeral-storage and the
    like are ignored, and ``pods`` is the task-count cap."""
    if name in ("cpu", "memory"):
        return True
    if name.startswith("hugepages-"):
        return True
    return "/" in name and not name.startswith("kubernetes.io/")


def to_internal(name: str, value: float) -> float:
    """Base units (cores, bytes, counts) -> Volcano's (millicores, bytes, milli)."""
    return value if name == "memory" else value * 1000.0


def from_internal(name: str, value: float) -> float:
    return value if name == "memory" else value / 1000.0


class Dims:
    """The ordered resource dimensions of one snapshot: cpu, memory, then the
    scalar resources seen anywhere in it, sorted by name."""

    __slots__ = ("names", "index", "n")

    def __init__(self, scalars: Iterable[str] = ()) -> None:
        extra = sorted({s for s in scalars if s not in ("cpu", "memory")})
        self.names: tuple[str, ...] = ("cpu", "memory", *extra)
        self.index: dict[str, int] = {n: i for i, n in enumerate(self.names)}
        self.n = len(self.names)

    def zero(self) -> Vec:
        return [0.0] * self.n

    def vec(self, rl: Mapping[str, float], missing: float = 0.0) -> Vec:
        """Internal-unit dict -> vector; unknown names are ignored."""
        out = [missing] * self.n
        for name, v in rl.items():
            i = self.index.get(name)
            if i is not None:
                out[i] = v
        return out

    def from_resource_list(self, rl: Mapping[str, Any] | None, missing: float = 0.0) -> Vec:
        """A Kubernetes ResourceList ({"cpu": "2"}) -> vector (ValueError on a bad quantity)."""
        parsed = parse_resource_list(rl)
        return self.vec({k: to_internal(k, v) for k, v in parsed.items()
                         if is_scheduling_resource(k)}, missing)

    def mask(self, rl: Mapping[str, Any] | None) -> tuple[bool, ...]:
        """Which dimensions a ResourceList names (for "checked on minReq's dimensions")."""
        keys = set((rl or {}).keys())
        return tuple(n in keys for n in self.names)

    def to_resource_list(self, v: Sequence[float], keep_zero: Iterable[str] = ("cpu", "memory")) -> dict[str, str]:
        """Vector -> ResourceList of canonical strings, as Volcano's
        ConvertRes2ResList: cpu and memory always, scalars when non-zero."""
        keep = set(keep_zero)
        out: dict[str, str] = {}
        for i, name in enumerate(self.names):
            x = v[i]
            if x == 0 and name not in keep:
                continue
            out[name] = format_quantity(name, from_internal(name, max(x, 0.0)))
        return out

    def fmt(self, i: int, value: float) -> str:
        """One value as a quantity string ("4", "500m", "400Mi")."""
        if value == INF:
            return "unlimited"
        name = self.names[i]
        return format_quantity(name, from_internal(name, value))


# ---- vector arithmetic (n is 2-4 in practice; plain loops are fastest) ----

def add(a: Vec, b: Sequence[float]) -> Vec:
    """a += b, in place; returns a."""
    for i in range(len(a)):
        a[i] += b[i]
    return a


def sub(a: Vec, b: Sequence[float]) -> Vec:
    """a -= b, in place; returns a."""
    for i in range(len(a)):
        a[i] -= b[i]
    return a


def plus(a: Sequence[float], b: Sequence[float]) -> Vec:
    return [x + y for x, y in zip(a, b)]


def minus(a: Sequence[float], b: Sequence[float]) -> Vec:
    return [x - y for x, y in zip(a, b)]


def clamp0(a: Sequence[float]) -> Vec:
    return [x if x > 0 else 0.0 for x in a]


def exceeded_part(a: Sequence[float], b: Sequence[float]) -> Vec:
    """Per dimension max(0, a - b) (Volcano ExceededPart)."""
    return [x - y if x > y else 0.0 for x, y in zip(a, b)]


def less_equal(a: Sequence[float], b: Sequence[float]) -> bool:
    """a <= b in every dimension, with Volcano's slack."""
    for x, y in zip(a, b):
        if x - y >= EPS:
            return False
    return True


def less_equal_on(a: Sequence[float], b: Sequence[float], req: Sequence[float]) -> bool:
    """a <= b on the dimensions where req is positive (LessEqualWithDimension)."""
    for x, y, r in zip(a, b, req):
        if r > 0 and x - y >= EPS:
            return False
    return True


def failing_dims(a: Sequence[float], b: Sequence[float], req: Sequence[float] | None = None) -> list[int]:
    """Indices where a > b (restricted to req's positive dimensions when given)."""
    out = []
    for i, (x, y) in enumerate(zip(a, b)):
        if req is not None and not req[i] > 0:
            continue
        if x - y >= EPS:
            out.append(i)
    return out


def equal(a: Sequence[float], b: Sequence[float]) -> bool:
    for x, y in zip(a, b):
        if x == y:
            continue
        if abs(x - y) >= EPS:
            return False
    return True


def is_empty(a: Sequence[float]) -> bool:
    """All dimensions below the slack (Volcano IsEmpty): a best-effort request."""
    for x in a:
        if x >= EPS:
            return False
    return True


def share(allocated: float, deserved: float) -> float:
    """Volcano helpers.Share."""
    if deserved == 0:
        return 0.0 if allocated == 0 else 1.0
    return allocated / deserved


# ---- pod requests ----

def pod_resources(pod_spec: Mapping[str, Any]) -> tuple[dict[str, float], dict[str, float], tuple[float, float]]:
    """(Resreq, InitResreq, non-zero cpu/memory) of a pod, internal units.

    Resreq is what the pod holds while running: the sum of app containers
    (plus sidecars and overhead) — Volcano's GetPodResourceWithoutInitContainers.
    InitResreq adds the init-container peak (what must fit to start).
    The non-zero pair is kube-scheduler's NonZeroRequested (100m / 200Mi for
    containers that request nothing), used by the least-requested score.
    Raises ValueError on a malformed quantity.
    """
    containers: dict[str, float] = {}
    nz_cpu = 0.0
    nz_mem = 0.0
    for c in pod_spec.get("containers") or []:
        req = container_requests(c)
        for k, v in req.items():
            containers[k] = containers.get(k, 0.0) + v
        nz_cpu += req["cpu"] * 1000.0 if "cpu" in req else DEFAULT_MILLI_CPU_REQUEST
        nz_mem += req["memory"] if "memory" in req else DEFAULT_MEMORY_REQUEST
    sidecars: dict[str, float] = {}
    init_peak: dict[str, float] = {}
    for c in pod_spec.get("initContainers") or []:
        req = container_requests(c)
        if c.get("restartPolicy") == "Always":
            for k, v in req.items():
                sidecars[k] = sidecars.get(k, 0.0) + v
            cur = sidecars
        else:
            cur = dict(sidecars)
            for k, v in req.items():
                cur[k] = cur.get(k, 0.0) + v
        for k, v in cur.items():
            if v > init_peak.get(k, -1.0):
                init_peak[k] = v
    running = dict(containers)
    for k, v in sidecars.items():
        running[k] = running.get(k, 0.0) + v
    for k, v in parse_resource_list(pod_spec.get("overhead")).items():
        running[k] = running.get(k, 0.0) + v
        init_peak[k] = init_peak.get(k, 0.0) + v
    init = dict(running)
    for k, v in init_peak.items():
        if v > init.get(k, 0.0):
            init[k] = v
    resreq = {k: to_internal(k, v) for k, v in running.items() if is_scheduling_resource(k)}
    init_resreq = {k: to_internal(k, v) for k, v in init.items() if is_scheduling_resource(k)}
    nz = (max(nz_cpu, resreq.get("cpu", 0.0)), max(nz_mem, resreq.get("memory", 0.0)))
    return resreq, init_resreq, nz
