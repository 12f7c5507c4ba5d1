"""`phalanx simulate --out DIR` draws the first jobs' timelines into DIR/timelines/ from the histories
the simulator's recorder kept on its virtual clock."""
from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from phalanx.cli.main import app

NS = "{http://www.w3.org/2000/svg}"
SEED = Path(__file__).resolve().parents[2] / "examples" / "pytorchjob.yaml"


def workload(tmp_path: Path, jobs: int) -> Path:
    job = yaml.safe_load(SEED.read_text())
    entries = []
    for i in range(jobs):
        manifest = copy.deepcopy(job)
        manifest["metadata"]["name"] = f"pytest-{i}"
        entries.append({"at": f"{5 + i}s", "manifest": manifest,
                        "behaviour": {"Master": {"duration": "30s"}, "Worker": {"duration": "30s"}}})
    path = tmp_path / "w.yaml"
    path.write_text(yaml.safe_dump({"cluster": {"nodes": 1, "cpu": 64, "memory": "64Gi"}, "jobs": entries}))
    return path


def test_simulate_writes_a_timeline_per_job_the_first_twenty(tmp_path):
    out = tmp_path / "out"
    r = CliRunner().invoke(app, ["simulate", str(workload(tmp_path, 22)), "--out", str(out), "--no-pictures"])
    assert r.exit_code == 0, r.output
    assert not (out / "timelines").exists()  # --no-pictures: none
    r = CliRunner().invoke(app, ["simulate", str(workload(tmp_path, 22)), "--out", str(out)])
    assert r.exit_code == 0, r.output
    names = sorted(p.name for p in (out / "timelines").iterdir())
    assert names == sorted(f"default_PyTorchJob_pytest-{i}.svg" for i in range(20))
    root = ET.fromstring((out / "timelines" / "default_PyTorchJob_pytest-0.svg").read_text())
    assert root.get("data-state") == "Succeeded"
    pods = [g for g in root.iter(NS + "g") if "pod" in (g.get("class") or "").split()]
    assert sorted(g.get("data-pod") for g in pods) == [
        "pytest-0-master-0", "pytest-0-worker-0", "pytest-0-worker-1", "pytest-0-worker-2"]
    for g in pods:
        (run,) = [s for s in g.iter(NS + "rect") if s.get("data-state") == "Running"]
        assert float(run.get("data-end")) - float(run.get("data-start")) == pytest.approx(30, abs=1)  # virtual s
