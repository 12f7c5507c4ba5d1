"""What a workload submits, in time order: its explicit jobs resolved (manifest files,
behaviour overrides as annotations) and its generated Poisson arrivals.
"""
from __future__ import annotations

import copy
import heapq
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import yaml

from phalanx.api.registry import JOB_KINDS
from phalanx.sim.behaviour import DURATION, EXIT_CODE, FAIL_AFTER, FAILURES, REPLICA, STARTUP
from phalanx.sim.workload import (
    BEHAVIOUR_KEY,
    BehaviourSpec,
    Generator,
    Workload,
    WorkloadError,
    duration_seconds,
    parse_workload,
    replica_count,
)


def load_workload(path: str | Path) -> LoadedWorkload:
    """Read, validate and resolve (manifest files, behaviours) a workload file."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as e:
        raise WorkloadError([f"{path}: cannot read: {e.strerror or e}"], str(path)) from None
    except yaml.YAMLError as e:
        raise WorkloadError([f"{path}: not YAML: {e}"], str(path)) from None
    return resolve(parse_workload(data, str(path)), path.parent, str(path))


@dataclass(frozen=True)
class Arrival:
    """Objects to create at virtual time ``at`` (seconds)."""

    at: float
    seq: int
    objects: tuple[dict[str, Any], ...]

    def __lt__(self, other: "Arrival") -> bool:
        return (self.at, self.seq) < (other.at, other.seq)


@dataclass
class LoadedWorkload:
    """A validated workload with its explicit arrivals resolved."""

    spec: Workload
    explicit: list[Arrival]
    source: str = "workload"

    def arrivals(self, seed: int | None = None) -> Iterator[Arrival]:
        """Every arrival in time order (explicit ones first at equal times)."""
        gen = self.spec.generator
        streams: list[Iterator[Arrival]] = [iter(self.explicit)]
        if gen is not None:
            streams.append(generate(gen, seed if seed is not None else gen.seed, start_seq=len(self.explicit)))
        return heapq.merge(*streams)

    def last_explicit(self) -> float:
        return max((a.at for a in self.explicit), default=0.0)

    def horizon(self) -> float:
        gen = self.spec.generator
        return max(self.last_explicit(), duration_seconds(gen.horizon) if gen is not None else 0.0)


def resolve(w: Workload, base: Path, source: str = "workload") -> LoadedWorkload:
    problems: list[str] = []
    entries: list[tuple[float, int, list[dict[str, Any]]]] = []
    for i, entry in enumerate(w.jobs):
        where = f"jobs[{i}]"
        if entry.file is not None:
            p = (base / entry.file) if not Path(entry.file).is_absolute() else Path(entry.file)
            try:
                docs = [d for d in yaml.safe_load_all(p.read_text()) if d is not None]
            except OSError as e:
                problems.append(f"{where}.file: cannot read {entry.file}: {e.strerror or e}")
                continue
            except yaml.YAMLError as e:
                problems.append(f"{where}.file: {entry.file} is not YAML: {e}")
                continue
        else:
            docs = [copy.deepcopy(entry.manifest)]
        bad = [j for j, d in enumerate(docs) if not isinstance(d, dict)]
        if bad:
            problems.append(f"{where}: document {bad[0]} is not a mapping")
            continue
        jobs = [d for d in docs if d.get("kind") in JOB_KINDS]
        if entry.behaviour and not jobs:
            problems.append(f"{where}.behaviour: no training job ({', '.join(JOB_KINDS)}) to apply it to")
        try:
            for d in jobs:
                apply_behaviour(d, entry.behaviour, f"{where}.behaviour")
                if entry.namespace:
                    d.setdefault("metadata", {})["namespace"] = entry.namespace
        except ValueError as e:
            problems.append(str(e))
            continue
        at, every = duration_seconds(entry.at), duration_seconds(entry.every)
        for n in range(entry.count):
            copies = [copy.deepcopy(d) for d in docs]
            if entry.count > 1:
                for d in copies:
                    if d.get("kind") in JOB_KINDS:
                        meta = d.setdefault("metadata", {})
                        meta["name"] = f"{meta.get('name', 'job')}-{n}"
            entries.append((at + n * every, len(entries), copies))
    if problems:
        raise WorkloadError(problems, source)
    entries.sort(key=lambda e: (e[0], e[1]))
    return LoadedWorkload(w, [Arrival(at, seq, tuple(objs)) for seq, (at, _, objs) in enumerate(entries)], source)


def replica_specs(job: dict[str, Any]) -> dict[str, Any]:
    """The job's ``<kind>ReplicaSpecs`` mapping (replica type -> spec), or {}."""
    given = job.get("spec")
    spec: dict[str, Any] = given if isinstance(given, dict) else {}
    for k, v in spec.items():
        if k.endswith("ReplicaSpecs") and isinstance(v, dict):
            return v
    return {}


def apply_behaviour(job: dict[str, Any], behaviour: dict[str, BehaviourSpec], where: str) -> None:
    """Write behaviour overrides as ``sim.phalanx.dev/*`` template annotations."""
    specs = replica_specs(job)
    for key, b in behaviour.items():
        m = BEHAVIOUR_KEY.match(key)
        assert m is not None
        rtype, index = m.group(1), m.group(2)
        match = next((t for t in specs if t.lower() == rtype.lower()), None)
        if match is None:
            raise ValueError(f"{where}.{key}: no replica type {rtype!r} in the job (has: {', '.join(specs) or 'none'})")
        rspec = specs[match]
        if not isinstance(rspec, dict):
            raise ValueError(f"{where}.{key}: the replica spec is not a mapping")
        tmpl = rspec.setdefault("template", {})
        meta = tmpl.setdefault("metadata", {})
        anns = meta.setdefault("annotations", {})
        pairs = b.pairs()
        if index is None:
            keys = {"duration": DURATION, "exit-code": EXIT_CODE, "fail-after": FAIL_AFTER, "failures": FAILURES,
                    "startup": STARTUP}
            for k, v in pairs.items():
                anns[keys[k]] = v
        else:
            anns[REPLICA + index] = " ".join(f"{k}={v}" for k, v in pairs.items())


# ----------------------------------------------------------------------------- generation


def generate(gen: Generator, seed: int, start_seq: int = 0) -> Iterator[Arrival]:
    """Poisson arrivals over [0, horizon), each a generated job; deterministic in ``seed``."""
    rng = random.Random(seed)
    horizon = duration_seconds(gen.horizon)
    rate = gen.arrival_rate / 3600.0
    replicas = gen.replicas.sampler(replica_count)
    durations = gen.duration.sampler(duration_seconds)
    kinds = sorted(gen.kinds)
    kind_w = [gen.kinds[k] for k in kinds]
    queues = sorted(gen.queues)
    queue_w = [gen.queues[q] for q in queues]
    t = 0.0
    n = 0
    while n < gen.max_jobs:
        t += rng.expovariate(rate)
        if t >= horizon:
            return
        kind = rng.choices(kinds, weights=kind_w)[0]
        queue = rng.choices(queues, weights=queue_w)[0]
        size = int(replicas.draw(rng))
        duration = max(1.0, round(durations.draw(rng), 3))
        failing = rng.random() < gen.failure_probability
        fail_index = rng.randrange(size)
        fail_at = round(max(0.001, rng.uniform(0.05, 0.95) * duration), 3)
        n += 1
        name = f"{gen.name_prefix}-{n:07d}"
        ns = "default" if gen.namespaces == 1 else f"ns-{(n - 1) % gen.namespaces:04d}"
        job = generated_job(gen, kind, name, ns, queue, size, duration, fail_index if failing else None, fail_at)
        yield Arrival(round(t, 6), start_seq + n, (job,))


def generated_job(gen: Generator, kind: str, name: str, namespace: str, queue: str, size: int, duration: float,
                  fail_index: int | None, fail_at: float) -> dict[str, Any]:
    """A PyTorchJob (Master + size-1 Workers) or TFJob (size Workers) whose
    containers sleep ``duration``; with ``fail_index``, that pod exits 1 after
    ``fail_at`` on every run."""
    limits: dict[str, Any] = {"cpu": str(gen.cpu), "memory": str(gen.memory)}
    if gen.gpus:
        limits["nvidia.com/gpu"] = str(gen.gpus)
    container_name = "pytorch" if kind == "PyTorchJob" else "tensorflow"

    def template(annotations: dict[str, str]) -> dict[str, Any]:
        t: dict[str, Any] = {"spec": {"containers": [{
            "name": container_name, "image": "busybox:1.37.0-glibc",
            "command": ["sh", "-c", f"trap exit INT TERM; sleep {duration:g}s & wait"],
            "resources": {"limits": dict(limits)}}]}}
        if annotations:
            t["metadata"] = {"annotations": annotations}
        return t

    types = [("Master", 1), ("Worker", size - 1)] if kind == "PyTorchJob" else [("Worker", size)]
    specs: dict[str, Any] = {}
    first = 0
    for rtype, count in types:
        if count <= 0:
            continue
        anns = {}
        if fail_index is not None and first <= fail_index < first + count:
            anns[REPLICA + str(fail_index - first)] = f"fail-after={fail_at:g}s exit-code=1"
        specs[rtype] = {"replicas": count, "restartPolicy": "OnFailure", "template": template(anns)}
        first += count
    run_policy: dict[str, Any] = {"backoffLimit": gen.backoff_limit, "cleanPodPolicy": gen.clean_pod_policy,
                                  "schedulingPolicy": {"queue": queue}}
    if gen.ttl_seconds_after_finished is not None:
        run_policy["ttlSecondsAfterFinished"] = gen.ttl_seconds_after_finished
    key = "pytorchReplicaSpecs" if kind == "PyTorchJob" else "tfReplicaSpecs"
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace},
            "spec": {"runPolicy": run_policy, key: specs}}
