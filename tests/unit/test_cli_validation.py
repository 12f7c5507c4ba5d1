"""CLI refusals (P4 and malformed input): exit non-zero, name the field or the
line, never a traceback, and nothing is sent anywhere."""
from __future__ import annotations

from pathlib import Path

import yaml
from typer.testing import CliRunner

from phalanx.cli.main import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _run(tmp_path, monkeypatch, text: str, *args: str):
    monkeypatch.setenv("PHALANX_HOME", str(tmp_path / "home"))
    f = tmp_path / "job.yaml"
    f.write_text(text)
    return CliRunner().invoke(app, [*args, str(f)] if args[-1] != "-f" else [*args, str(f)])


def test_apply_master_replicas_2_is_forbidden(tmp_path, monkeypatch):
    doc = yaml.safe_load((EXAMPLES / "pytorchjob.yaml").read_text())
    doc["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    r = _run(tmp_path, monkeypatch, yaml.safe_dump(doc), "apply", "-f")
    assert r.exit_code == 2, r.output
    assert "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1" in r.output
    assert "Traceback" not in r.output
    assert not (tmp_path / "home" / "state.db").exists()


def test_apply_unknown_field_names_its_path(tmp_path, monkeypatch):
    doc = yaml.safe_load((EXAMPLES / "pytorchjob.yaml").read_text())
    doc["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["imagee"] = "x"
    r = _run(tmp_path, monkeypatch, yaml.safe_dump(doc), "apply", "-f")
    assert r.exit_code == 2, r.output
    assert 'unknown field "spec.pytorchReplicaSpecs.Worker.template.spec.containers[0].imagee"' in r.output
    assert "Traceback" not in r.output


def test_malformed_yaml_names_the_line(tmp_path, monkeypatch):
    text = (EXAMPLES / "pytorchjob.yaml").read_text().replace("  runPolicy:", "  runPolicy: : bad", 1)
    r = _run(tmp_path, monkeypatch, text, "apply", "-f")
    assert r.exit_code == 2, r.output
    assert "line" in r.output
    assert "Traceback" not in r.output


def test_run_invalid_exits_2(tmp_path, monkeypatch):
    doc = yaml.safe_load((EXAMPLES / "pytorchjob.yaml").read_text())
    doc["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2
    r = _run(tmp_path, monkeypatch, yaml.safe_dump(doc), "run")
    assert r.exit_code == 2, r.output
    assert "Forbidden: must be 1" in r.output
