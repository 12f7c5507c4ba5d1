"""`phalanx logs` argument forms: POD, pod/POD, a job as TYPE/NAME; what cannot
have logs is refused before anything is sent (no control plane is running)."""
from __future__ import annotations

import pytest
from typer.testing import CliRunner

from phalanx.cli.main import app
from phalanx.cli.objects import log_target as _log_target


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("PHALANX_HOME", str(tmp_path / "home"))


def logs(*args: str):
    return CliRunner().invoke(app, ["logs", *args])


def test_targets():
    assert [(rt.kind, n) for rt, n in (_log_target("pytest-worker-0"), _log_target("po/pytest-worker-0"),
                                       _log_target("pytorchjob/pytest"), _log_target("tfjobs/dist"))] == [
        ("Pod", "pytest-worker-0"), ("Pod", "pytest-worker-0"), ("PyTorchJob", "pytest"), ("TFJob", "dist")]
    assert [(rt.kind, n) for rt, n in (_log_target("xgboostjob/x"), _log_target("paddlejobs/p"),
                                       _log_target("JAXJob/j"), _log_target("mpijob/m"))] == [
        ("XGBoostJob", "x"), ("PaddleJob", "p"), ("JAXJob", "j"), ("MPIJob", "m")]


@pytest.mark.parametrize("args, message", [
    (("svc/pytest-master-0",), "error: cannot get logs from service/pytest-master-0: only pods and jobs "
                               "(pytorchjob, tfjob, xgboostjob, paddlejob, jaxjob, mpijob) have logs"),
    (("widgets/x",), 'error: the server doesn\'t have a resource type "widgets"'),
    (("pytorchjob/",), "error: arguments in resource/name form must have a single resource and name"),
    (("pytorchjob/pytest", "--previous"), "error: --previous cannot be used with a job"),
    (("..",), "error: name: Invalid value: '..'"),
    (("pytest-worker-0", "-c", "a/b"), "error: container: Invalid value: 'a/b'"),
])
def test_refusals_are_invalid_input(args, message):
    r = logs(*args)
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output


@pytest.mark.parametrize("target, message", [
    ("pytest-worker-0", 'pods "pytest-worker-0" not found'),
    ("pytorchjob/pytest", '"pytest" not found'),
])
def test_nothing_stored_without_a_control_plane(target, message):
    r = logs(target)
    assert r.exit_code == 1 and message in r.output and "Traceback" not in r.output
