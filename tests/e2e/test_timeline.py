"""Timelines of real runs on the embedded cluster (real processes, back-off base 0.2 s), drawn by
`phalanx timeline` from the recorded history and checked on the SVG's structure:
seed P5 (worker-0 crash-looping with growing back-off, the job Succeeded meanwhile) and D2 (deadline)."""
from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from datetime import datetime

import pytest
from typer.testing import CliRunner

from phalanx.cli.describe import describe
from phalanx.cli.main import app
from phalanx.cli.objects import job_history
from phalanx.store.history import JobHistories, JobKey
from tests.scenarios.conftest import job_state, load_example, scaled, wait_until

pytestmark = pytest.mark.e2e

NS = "{http://www.w3.org/2000/svg}"
BACKOFF_BASE = 0.2  # the `cluster` fixture's AgentSettings.backoff_base
PODS = ["pytest-master-0", "pytest-worker-0", "pytest-worker-1", "pytest-worker-2"]


def by_class(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(NS + tag) if cls in (e.get("class") or "").split()]


def draw(cluster, monkeypatch, tmp_path, target: str) -> tuple[ET.Element, str]:
    """The SVG and the text `phalanx timeline` prints, read from the cluster's home."""
    monkeypatch.setenv("PHALANX_HOME", str(cluster.home))
    out = tmp_path / "timeline.svg"
    r = CliRunner().invoke(app, ["timeline", target, "-o", str(out)])
    assert r.exit_code == 0, r.output
    t = CliRunner().invoke(app, ["timeline", target])
    assert t.exit_code == 0, t.output
    return ET.fromstring(out.read_text()), t.stdout


async def recorded(cluster, job: dict, state: str) -> JobKey:
    """Wait until the job reached ``state``, its history says so and every pod instance's last state is final."""
    key = JobKey("default", job["kind"], job["metadata"]["name"], job["metadata"]["uid"])
    histories = JobHistories(cluster.home / "history")

    async def done() -> bool:
        j = await cluster.client.get(job["kind"], key.name, "default")
        recs = histories.read(key)
        jobs = [r.state for r in recs if r.kind == "Job"]
        return job_state(j) == state and jobs[-1:] == [state] and _settled(recs)

    await wait_until(done, 60, f"{key.kind}/{key.name} {state} in its history")
    return key


def _settled(recs) -> bool:
    """Every pod instance's last recorded state is final (Completed, Error or gone)."""
    last: dict[str, str] = {}
    for r in recs:
        if r.kind == "Pod":
            last[r.uid] = r.state
    return bool(last) and all(s in ("Completed", "Error", "<deleted>") for s in last.values())


def p5_scaled(run_worker: float, run_others: float) -> dict:
    doc = scaled(load_example("seeds/p5-worker-fails.yaml")[0], run_others)
    doc = copy.deepcopy(doc)
    for spec in doc["spec"]["pytorchReplicaSpecs"].values():
        for c in spec["template"]["spec"]["containers"]:
            c["command"] = [part.replace("sleep 10s", f"sleep {run_worker}") for part in c["command"]]
    return doc


async def test_p5_worker_crash_loops_with_growing_backoff_while_the_job_succeeds(cluster, monkeypatch, tmp_path):
    # Seed P5 (docs/REFERENCE.md, seed 000): 10 s / 30 s scaled to 1 s / 4 s.
    job = await cluster.client.create(p5_scaled(1, 4))
    await recorded(cluster, job, "Succeeded")
    root, text = draw(cluster, monkeypatch, tmp_path, "pytorchjob/pytest")
    print(text)
    assert root.get("data-state") == "Succeeded" and root.get("data-finished") == "true"
    (band,) = by_class(root, "g", "job")
    assert [s.get("data-state") for s in by_class(band, "rect", "span")][-2:] == ["Running", "Succeeded"]
    pods = {g.get("data-pod"): g for g in by_class(root, "g", "pod")}
    assert sorted(pods) == PODS  # restarts in place: one instance per pod
    w0 = pods["pytest-worker-0"]
    states = [s.get("data-state") for s in by_class(w0, "rect", "seg")]
    runs = [s for s in by_class(w0, "rect", "seg") if s.get("data-state") == "Running"]
    assert len(runs) >= 3 and [r.get("data-restarts") for r in runs][:3] == ["0", "1", "2"], states
    assert "Error" in states and "CrashLoopBackOff" in states, states
    gaps = [(float(g.get("data-end")) - float(g.get("data-start")), int(g.get("data-restart")))
            for g in by_class(w0, "path", "gap")]
    assert [n for _, n in gaps][:3] == [1, 2, 3], gaps
    # As the kubelet: the first restart is immediate, then back-off b, 2b, ... (10 s, 20 s unscaled),
    # plus the time a process takes to start.
    assert gaps[0][0] < BACKOFF_BASE, gaps
    for gap, n in gaps[1:3]:
        assert BACKOFF_BASE * 2 ** (n - 2) * 0.9 <= gap <= BACKOFF_BASE * 2 ** (n - 2) + 1.0, gaps
    assert gaps[2][0] > gaps[1][0] > gaps[0][0], gaps
    backoff = [m for m in by_class(root, "path", "mark") if m.get("data-reason") == "BackOff"]
    assert backoff and all(m.get("data-pod-uid") == w0.get("data-uid") for m in backoff)
    for name in ("pytest-master-0", "pytest-worker-1", "pytest-worker-2"):
        segs = [s.get("data-state") for s in by_class(pods[name], "rect", "seg")]
        assert "Running" in segs and segs[-1] in ("Completed", "Terminating") or "Completed" in segs, (name, segs)
    succeeded = float([s for s in by_class(band, "rect", "span") if s.get("data-state") == "Succeeded"][0]
                      .get("data-start"))
    assert float(runs[0].get("data-start")) < succeeded
    assert "pytest-worker-0" in text and "(restart 1)" in text and "Succeeded" in text.splitlines()[0]


async def test_d2_deadline_is_marked_where_the_job_failed(cluster, monkeypatch, tmp_path):
    # Seed D2 (docs/REFERENCE.md, seed 004): activeDeadlineSeconds 15 of 30 s, scaled to 3 of 10 s.
    doc = scaled(load_example("seeds/d2-deadline-15s.yaml")[0], 10)
    doc["spec"]["runPolicy"]["activeDeadlineSeconds"] = 3
    job = await cluster.client.create(doc)
    await recorded(cluster, job, "Failed")
    root, text = draw(cluster, monkeypatch, tmp_path, "pytest")
    print(text)
    assert root.get("data-state") == "Failed"
    (mark,) = by_class(root, "path", "deadline")
    t = float(mark.get("data-t"))
    obj = await cluster.client.get("PyTorchJob", "pytest", "default")
    started = datetime.fromisoformat(obj["status"]["startTime"].replace("Z", "+00:00")).timestamp()
    late = float(root.get("data-t0")) + t - (started + 3)
    assert 0 <= late <= 1.0, late  # within a second of the deadline (SEMANTICS S4), counted from startTime
    (band,) = by_class(root, "g", "job")
    failed = [s for s in by_class(band, "rect", "span") if s.get("data-state") == "Failed"]
    assert failed and failed[0].get("data-reason") == "DeadlineExceeded"
    assert float(failed[0].get("data-start")) == pytest.approx(t)
    pods = by_class(root, "g", "pod")
    assert sorted(g.get("data-pod") for g in pods) == PODS
    for g in pods:
        runs = [s for s in by_class(g, "rect", "seg") if s.get("data-state") == "Running"]
        assert runs and float(runs[-1].get("data-end")) >= t - 0.05, g.get("data-pod")  # ran until the deadline
        assert all(float(s.get("data-end")) < t + 10 for s in by_class(g, "rect", "seg"))  # stopped then, not at 10 s
    assert "DeadlineExceeded" in text.splitlines()[0]
    # describe's Timeline section: the same lines, from the history the CLI finds in $PHALANX_HOME.
    described = describe(obj, {"events": [], "history": job_history(obj)})
    section = described[described.index("Timeline:\n"):described.index("Events:")].splitlines()
    assert [line.split(":", 1)[0].strip() for line in section[1:]] == ["job", "podgroup", *PODS, "deadline"]
    assert section[1].split(None, 1)[1] == text.splitlines()[0].split(None, 1)[1]
