"""The simulator records the jobs' state histories on its virtual clock (the recorder as the
embedded cluster runs it, writing inline)."""
from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import yaml

from phalanx.sim.arrivals import resolve
from phalanx.sim.loop import SIM_EPOCH
from phalanx.sim.runner import Simulation
from phalanx.sim.workload import parse_workload

SEED = Path(__file__).resolve().parents[2] / "examples" / "pytorchjob.yaml"


def workload() -> dict:
    job = yaml.safe_load(SEED.read_text())
    return {"cluster": {"nodes": 1, "cpu": 8, "memory": "8Gi"},
            "jobs": [{"at": "5s", "manifest": copy.deepcopy(job), "behaviour": {"Master": {"duration": "30s"},
                                                                               "Worker": {"duration": "30s"}}}]}


def test_the_seed_jobs_history_on_virtual_time(tmp_path):
    sim = Simulation(resolve(parse_workload(workload()), Path(".")), history_dir=tmp_path)
    sim.run()
    assert sim.histories is not None and sim.histories.root == tmp_path
    (key,) = sim.histories.keys()
    assert (key.namespace, key.kind, key.name) == ("default", "PyTorchJob", "pytest")
    recs = sim.histories.read(key)
    assert [r.state for r in recs if r.kind == "Job"] == ["Created", "Running", "Succeeded"]
    start = SIM_EPOCH.timestamp()
    created = next(r for r in recs if r.kind == "Job")
    succeeded = [r for r in recs if r.kind == "Job"][-1]
    assert created.t - start == 5.0  # virtual seconds, submitted at 5 s
    assert 35.0 <= succeeded.t - start < 60.0
    pods = {r.name for r in recs if r.kind == "Pod"}
    assert pods == {"pytest-master-0", "pytest-worker-0", "pytest-worker-1", "pytest-worker-2"}
    for name in pods:
        states = [r.state for r in recs if r.kind == "Pod" and r.name == name]
        assert states[0] == "Pending" and "Running" in states and states[-1] == "Completed", (name, states)
    assert sorted(r.detail["object"] for r in recs if r.kind == "Event" and r.state == "Scheduled") == [
        "Pod/" + p for p in sorted(pods)] + ["PodGroup/pytest"]


def test_without_a_folder_the_histories_live_in_a_temporary_one():
    sim = Simulation(resolve(parse_workload(workload()), Path(".")))
    sim.run()
    assert sim.histories is not None
    root = sim.histories.root
    assert len(sim.histories.keys()) == 1
    sim.close()
    assert not root.exists()
    off = Simulation(resolve(parse_workload(workload()), Path(".")), record_history=False)
    off.run()
    assert off.histories is None


def test_the_components_share_one_watch_per_kind(tmp_path):
    """Job controller, scheduler, kubelet, garbage collector and history recorder read one
    Pod informer; the metrics' slimmed one is the only other Pod watch."""
    watches: dict[str, int] = {}

    async def count(sim: Simulation) -> None:
        await sim.jobs.pods.wait_synced()
        await asyncio.sleep(1.0)  # virtual: every component is up
        for kind in ("Pod", "PodGroup", "PyTorchJob"):
            watches[kind] = sum(1 for w in sim.store._watchers[kind] if not w.closed)

    def started(sim: Simulation) -> None:
        sim.spawn(count(sim))

    sim = Simulation(resolve(parse_workload(workload()), Path(".")), history_dir=tmp_path, on_started=started)
    sim.run()
    assert watches == {"Pod": 2, "PodGroup": 2, "PyTorchJob": 1}
