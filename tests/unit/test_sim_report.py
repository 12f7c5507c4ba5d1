"""Simulation outputs: statistics, determinism (same workload and seed -> identical
files, whatever the hash seed), the scheduler's tick not changing decisions, and
the `phalanx simulate` command."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from phalanx.sim.arrivals import resolve
from phalanx.sim.report import percentile, summarize, time_weighted, write_outputs
from phalanx.sim.runner import Simulation
from phalanx.sim.workload import parse_workload

WORKLOAD = {
    "cluster": {"nodes": 3, "cpu": 16, "memory": "64Gi", "gpus": 2,
                "queues": [{"metadata": {"name": "research"}, "spec": {"weight": 1, "capability": {"cpu": 24}}}]},
    "sim": {"backoffBase": "10s", "backoffCap": "2m"},
    "generator": {"seed": 11, "horizon": "90m", "arrivalRate": 24,
                  "replicas": {"dist": "choice", "values": [1, 2, 4], "weights": [2, 2, 1]},
                  "duration": {"dist": "lognormal", "median": "8m", "sigma": 0.8, "max": "40m"},
                  "failureProbability": 0.25, "kinds": {"PyTorchJob": 2, "TFJob": 1},
                  "queues": {"default": 2, "research": 1}, "cpu": 4, "memory": "4Gi", "gpus": 1},
}


def run(data: dict, seed: int | None = None):
    return Simulation(resolve(parse_workload(data), Path("."))).run() if seed is None else \
        Simulation(resolve(parse_workload(data), Path(".")), seed).run()


def files(d: Path) -> dict[str, bytes]:
    """The output files (the CLI also keeps the jobs' state histories, in ``history/``)."""
    return {p.name: p.read_bytes() for p in sorted(d.iterdir()) if p.is_file()}


def test_percentiles_and_time_weighted_means():
    assert percentile([], 50) is None
    assert percentile([3, 1, 2], 50) == 2
    assert percentile([1, 2, 3, 4], 90) == pytest.approx(3.7)
    assert percentile([5], 99) == 5
    # 0 for 10 s, 4 for 30 s, 2 for the last 60 s.
    assert time_weighted([0, 10, 40], [0, 4, 2], 100) == (pytest.approx((4 * 30 + 2 * 60) / 100), 4.0)


def test_downsampling_keeps_the_time_weighted_mean_and_the_peaks():
    from phalanx.sim.report import downsample
    t = [i * 0.5 for i in range(10_000)]
    v = [float(i % 7) for i in range(10_000)]
    q = [1.0 if i == 4321 else 0.0 for i in range(10_000)]
    xs, ys = downsample(t, {"v": v, "q": q}, 5000.0, 100, {"q": "max"})
    assert len(xs) == 101 and xs[0] == 0 and xs[-1] == 5000.0
    mean, _ = time_weighted(t, v, 5000.0)
    assert sum(ys["v"][:100]) / 100 == pytest.approx(mean)
    assert max(ys["q"]) == 1.0 and sum(ys["q"][:100]) == 1.0  # a one-sample peak survives, in one bin
    short_x, short_y = downsample([0.0, 1.0], {"v": [1.0, 2.0]}, 3.0, 100, {})
    assert short_x == [0.0, 1.0, 3.0] and short_y["v"] == [1.0, 2.0, 2.0]


@pytest.fixture(scope="module")
def outputs(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim")
    result = run(WORKLOAD)
    write_outputs(result, summarize(result, "w.yaml"), out / "a")
    again = run(WORKLOAD)
    write_outputs(again, summarize(again, "w.yaml"), out / "b")
    return out, result


def test_a_generated_workload_simulated_twice_gives_identical_files(outputs):
    out, result = outputs
    a, b = files(out / "a"), files(out / "b")
    assert sorted(a) == ["jobs.csv", "jobs.json", "summary.json", "timeline.csv", "utilisation.png",
                         "utilisation.svg"]
    assert a == b
    summary = json.loads(a["summary.json"])
    # The workload really exercised the system: jobs finished both ways, queues formed.
    assert summary["jobs"]["Succeeded"] > 5 and summary["jobs"]["Failed"] >= 1
    assert summary["jobs"]["total"] == len(result.records) > 20
    assert summary["restarts"] > 0
    assert summary["queues"]["default"]["peakWaiting"] >= 1
    assert 0 < summary["utilisation"]["cpu"]["mean"] <= summary["utilisation"]["cpu"]["peak"] <= 1
    assert 0 < summary["utilisation"]["gpu"]["mean"] <= 1
    assert b"<svg" in a["utilisation.svg"] and a["utilisation.png"][:4] == b"\x89PNG"


def test_job_rows_are_consistent(outputs):
    out, result = outputs
    rows = json.loads((out / "a" / "jobs.json").read_text())
    for r in rows:
        if r["final_state"] in ("Succeeded", "Failed"):
            assert r["turnaround"] == pytest.approx(r["finished"] - r["submitted"], abs=0.002)
            assert r["wait"] is None or r["wait"] >= 0
        if r["running"] is not None and r["finished"] is not None:
            assert r["run"] == pytest.approx(r["finished"] - r["running"], abs=0.002)
    assert any(r["reason"] == "BackoffLimitExceeded" for r in rows)
    assert {r["queue"] for r in rows} == {"default", "research"}
    # The research queue's capability (24 cpu) is never exceeded by what it runs.
    lines = (out / "a" / "timeline.csv").read_text().splitlines()
    assert lines[0].startswith("t,cpu,memory,gpu,cpu_util")


def test_same_files_from_the_command_line_with_another_hash_seed(outputs, tmp_path):
    out, _ = outputs
    wl = tmp_path / "w.yaml"
    wl.write_text(yaml.safe_dump(WORKLOAD))
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    proc = subprocess.run([sys.executable, "-m", "phalanx.cli.main", "simulate", str(wl), "--out", str(tmp_path / "c")],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "Succeeded" in proc.stdout and "wait (to Running)" in proc.stdout
    assert files(tmp_path / "c") == files(out / "a")


def test_the_schedulers_safety_tick_does_not_change_decisions():
    # The scheduler wakes on every change that can alter a decision; its periodic
    # tick re-runs an identical session. So the simulation's default 10 min tick
    # gives exactly what the real control plane's 1 s tick gives.
    small = json.loads(json.dumps(WORKLOAD))
    small["generator"].update(horizon="25m", arrivalRate=40)
    small["generator"]["duration"].update(median="3m", max="10m")
    default = run(small)
    small["sim"]["schedulerPeriod"] = "1s"
    ticked = run(small)
    assert ticked.stats.scheduler_sessions > 3 * default.stats.scheduler_sessions
    key = lambda r: (r.name, r.state, r.submitted, r.running, r.all_running, r.finished, r.restarts)
    assert len(default.records) > 10
    assert [key(r) for r in ticked.records] == [key(r) for r in default.records]
    assert ticked.timeline == default.timeline


def test_another_seed_gives_another_workload(outputs):
    _, base = outputs
    other = run(WORKLOAD, seed=12)
    assert [r.submitted for r in other.records] != [r.submitted for r in base.records]


def test_command_refuses_a_bad_workload_naming_the_field(tmp_path):
    wl = tmp_path / "bad.yaml"
    wl.write_text("cluster: {nodes: -1}\njobs: [{at: soon, file: x.yaml}]\n")
    proc = subprocess.run([sys.executable, "-m", "phalanx.cli.main", "simulate", str(wl)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "cluster.nodes" in proc.stderr and "jobs[0].at" in proc.stderr


def test_rejected_and_unfinished_jobs_are_reported(tmp_path):
    seeds = Path(__file__).resolve().parents[2] / "examples" / "seeds"
    bad = yaml.safe_load((seeds / "p5-worker-fails.yaml").read_text())
    bad["metadata"]["name"] = "two-masters"
    bad["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    data = {"cluster": {"nodes": 1, "cpu": 16, "memory": "64Gi"}, "sim": {"until": "2h"},
            "jobs": [{"file": str(seeds / "p2-queue-capability.yaml")}, {"at": "1m", "manifest": bad}]}
    result = Simulation(resolve(parse_workload(data), tmp_path)).run()
    assert result.stopped_by == "until" and result.end == 7200
    summary = summarize(result, "w.yaml").data
    assert summary["jobs"] == {"total": 2, "Succeeded": 0, "Failed": 0, "Unfinished": 1, "Rejected": 1}
    rejected = next(r for r in result.records if r.state == "Rejected")
    assert "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1" in rejected.reason
    assert any("two-masters" in p for p in summary["problems"])
    assert summary["queues"]["default"]["peakWaiting"] == 1 and summary["utilisation"]["cpu"]["peak"] == 0
    write_outputs(result, summarize(result, "w.yaml"), tmp_path / "out", png=False, svg=False)
    rows = (tmp_path / "out" / "jobs.csv").read_text().splitlines()
    assert rows[1].endswith(",Unfinished,") and ",Rejected," in rows[2]


def test_metrics_of_one_seed_job_follow_its_pods():
    examples = Path(__file__).resolve().parents[2] / "examples"
    data = {"cluster": {"nodes": 1, "cpu": 16, "memory": "64Gi"},
            "jobs": [{"file": str(examples / "pytorchjob.yaml")}]}
    result = Simulation(resolve(parse_workload(data), Path("."))).run()
    (rec,) = result.records
    assert (rec.kind, rec.replicas, rec.cpu, rec.memory, rec.queue) == ("PyTorchJob", 4, 4.0, 400 * 2**20, "default")
    # Bound after the scheduler's 5 ms debounce twice (PodGroup Inqueue, then the pods); no process start.
    assert rec.wait == pytest.approx(0.01) and rec.wait_all == pytest.approx(0.01)
    assert rec.run == pytest.approx(30.0) and rec.final_state == "Succeeded" and rec.restarts == 0
    tl = result.timeline
    steps = [(round(t, 3), c, p) for t, c, p in zip(tl.t, tl.cpu, tl.running_pods)]
    assert steps[0] == (0.0, 0.0, 0) and (0.01, 4.0, 4) in steps and steps[-1] == (30.01, 0.0, 0)
    assert tl.waiting["default"][0] == 1 and tl.waiting["default"][-1] == 0
    summary = summarize(result, "p1").data
    assert summary["utilisation"]["cpu"]["peak"] == 0.25
    assert summary["utilisation"]["cpu"]["mean"] == pytest.approx(0.25 * 30 / 30.01, abs=1e-4)
