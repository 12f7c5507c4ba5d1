"""Scenario fixtures: a real embedded cluster (real processes) per test, with
seed durations scaled down and a fast back-off, plus a recorder of the state
sequences a `kubectl get -w` would show."""
from __future__ import annotations

import asyncio
import copy
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from phalanx.cli import printers
from phalanx.cluster import EmbeddedCluster
from phalanx.config import AgentSettings, ClusterConfig, NodeConfig, OperatorSettings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def load_example(name: str) -> list[dict]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def scaled(doc: dict, seconds: float) -> dict:
    """The seed job with `sleep 30s` replaced by `sleep <seconds>`."""
    doc = copy.deepcopy(doc)
    specs = doc["spec"].get("pytorchReplicaSpecs") or doc["spec"].get("tfReplicaSpecs")
    for spec in specs.values():
        for c in spec["template"]["spec"]["containers"]:
            c["command"] = [part.replace("sleep 30s", f"sleep {seconds}") for part in c["command"]]
    return doc


@dataclass
class Recorder:
    """Ordered, de-duplicated state sequences per object, as watch rows show them."""

    rows: list[tuple[float, str, str, str]] = field(default_factory=list)
    _last: dict[tuple[str, str], str] = field(default_factory=dict)
    # Pods: the highest container restartCount seen, and every uid seen, in order.
    restarts: dict[str, int] = field(default_factory=dict)
    uids: dict[str, list[str]] = field(default_factory=dict)
    # time.monotonic() and wall-clock time (UTC epoch seconds) at the same instant.
    epoch: tuple[float, float] = field(default_factory=lambda: (time.monotonic(), time.time()))

    def add(self, kind: str, obj: dict, deleted: bool) -> None:
        name = obj["metadata"]["name"]
        if kind == "Pod":
            uid = obj["metadata"].get("uid")
            seen = self.uids.setdefault(name, [])
            if uid and uid not in seen:
                seen.append(uid)
            status = obj.get("status") or {}
            counts = [c.get("restartCount") or 0 for c in
                      (status.get("containerStatuses") or []) + (status.get("initContainerStatuses") or [])]
            self.restarts[name] = max([self.restarts.get(name, 0), *counts])
        if deleted:
            state = "<deleted>"
        elif kind == "Pod":
            state = printers.row(obj, "Pod", False, _utcnow())[2]
        elif kind == "PodGroup":
            state = (obj.get("status") or {}).get("phase") or ""
        else:
            conds = (obj.get("status") or {}).get("conditions") or []
            state = conds[-1]["type"] if conds else ""
        if self._last.get((kind, name)) != state:
            self._last[(kind, name)] = state
            self.rows.append((time.monotonic(), kind, name, state))

    def states(self, kind: str, name: str) -> list[str]:
        return [s for _, k, n, s in self.rows if k == kind and n == name]

    def wall(self, mono: float) -> float:
        """A ``rows`` timestamp as wall-clock epoch seconds."""
        return self.epoch[1] + (mono - self.epoch[0])

    def first_time(self, kind: str, name: str, state: str) -> float:
        for t, k, n, s in self.rows:
            if (k, n, s) == (kind, name, state):
                return t
        raise AssertionError(f"{kind}/{name} never reached {state}: {self.states(kind, name)}")


def _utcnow():
    from datetime import datetime, timezone
    return datetime.now(timezone.utc)


@pytest.fixture
async def cluster(tmp_path):
    cfg = ClusterConfig(
        nodes=[NodeConfig("las1", 16, 64 * 1024**3)],
        agent=AgentSettings(backoff_base=0.2, backoff_cap=2.0),
        operator=OperatorSettings(default_backoff_limit=0),
    )
    c = EmbeddedCluster(tmp_path / "home", cfg, persist=False)
    await c.start()
    try:
        yield c
    finally:
        await c.stop(kill_pods=True)


@pytest.fixture
async def recorder(cluster):
    rec = Recorder()

    rv = (await cluster.client.list("Pod", "default")).resource_version

    async def pump(kind: str) -> None:
        async for ev in cluster.client.watch(kind, "default", resource_version=rv):
            if ev.type != "BOOKMARK":
                rec.add(kind, ev.object, ev.type == "DELETED")

    tasks = [asyncio.create_task(pump(k)) for k in ("PyTorchJob", "TFJob", "PodGroup", "Pod")]
    await asyncio.sleep(0)
    yield rec
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def wait_until(predicate, timeout: float = 30.0, what: str = "condition", interval: float = 0.02):
    """Poll an async or sync predicate until truthy; fail naming what was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if asyncio.iscoroutine(v):
            v = await v
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


def job_state(job: dict) -> str:
    conds = (job.get("status") or {}).get("conditions") or []
    return conds[-1]["type"] if conds else ""
