"""The local runtime's Python environment per container (pyenv) and its
admission rule that every container has something to run (commandcheck)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from phalanx.config import ConfigError, parse_config
from phalanx.node import commandcheck
from phalanx.node.pyenv import PythonEnvironment, environment_for, environment_vars, own_bin_dir
from phalanx.objects.errors import Invalid


def make_venv(root: Path, conda: bool = False) -> Path:
    (root / "bin").mkdir(parents=True)
    if conda:
        (root / "conda-meta").mkdir()
    else:
        (root / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return root


def test_own_environment_bin_goes_first_once():
    own = str(own_bin_dir())
    assert Path(own, "python").exists() or Path(own, "python3").exists()
    out = environment_vars("anything:latest", [], f"/usr/bin:{own}:/bin")
    assert out["PATH"].split(os.pathsep) == [own, "/usr/bin", "/bin"]
    if sys.prefix != sys.base_prefix:  # running from a venv (make test does)
        assert out["VIRTUAL_ENV"] == sys.prefix


def test_first_matching_image_pattern_wins(tmp_path):
    torch_env = make_venv(tmp_path / "torch")
    conda_env = make_venv(tmp_path / "conda", conda=True)
    envs = [PythonEnvironment("pytorch/*", torch_env), PythonEnvironment("*", conda_env)]
    assert environment_for("pytorch/pytorch:2.4", envs) == envs[0]
    assert environment_for("busybox", envs) == envs[1]
    assert environment_for(None, envs[:1]) is None
    out = environment_vars("pytorch/pytorch:2.4", envs, "/usr/bin")
    assert out == {"PATH": f"{torch_env}/bin:/usr/bin", "VIRTUAL_ENV": str(torch_env)}
    assert environment_vars("busybox", envs, "/usr/bin") == {"PATH": f"{conda_env}/bin:/usr/bin",
                                                            "CONDA_PREFIX": str(conda_env)}


def test_cluster_yaml_environments_are_checked(tmp_path):
    env = make_venv(tmp_path / "v")
    cfg = parse_config({"environments": [{"image": "jax*", "prefix": str(env)}]})
    assert cfg.environments == [PythonEnvironment("jax*", env)]
    with pytest.raises(ConfigError, match=r"environments\[0\].prefix: .*is not a directory"):
        parse_config({"environments": [{"image": "x", "prefix": str(tmp_path / "nope")}]})
    with pytest.raises(ConfigError, match=r"environments\[0\].image: must be a non-empty"):
        parse_config({"environments": [{"prefix": str(env)}]})
    with pytest.raises(ConfigError, match=r"environments\[0\]: unknown field\(s\) \['python'\]"):
        parse_config({"environments": [{"image": "x", "prefix": str(env), "python": "3"}]})
    with pytest.raises(ConfigError, match="environments: must be a list"):
        parse_config({"environments": {"image": "x"}})


def job(containers: list[dict], kind: str = "PyTorchJob", rtype: str = "Worker") -> dict:
    field = {"PyTorchJob": "pytorchReplicaSpecs", "MPIJob": "mpiReplicaSpecs"}[kind]
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": "j"},
            "spec": {field: {rtype: {"replicas": 1, "template": {"spec": {"containers": containers}}}}}}


def test_a_container_without_command_or_args_is_refused_naming_the_field():
    with pytest.raises(Invalid) as e:
        commandcheck.admission_plugin("create", job([{"name": "pytorch", "image": "pytorch/pytorch"}]), None)
    msg = str(e.value)
    assert msg.startswith('PyTorchJob.kubeflow.org "j" is invalid: '
                          "spec.pytorchReplicaSpecs[Worker].template.spec.containers[0].command: Required value")
    assert "runs the container's command on this machine, not an image" in msg and '"pytorch/pytorch"' in msg
    pod = {"kind": "Pod", "metadata": {"name": "p"},
           "spec": {"initContainers": [{"name": "i", "image": "x"}], "containers": [{"name": "c", "args": ["y"]}]}}
    with pytest.raises(Invalid, match=r'^Pod "p" is invalid: spec.initContainers\[0\].command: Required'):
        commandcheck.admission_plugin("create", pod, None)


def test_what_can_run_passes_and_unchanged_specs_are_not_rechecked():
    ok = job([{"name": "pytorch", "command": ["python3"]}, {"name": "side", "args": ["sh", "-c", "true"]}])
    assert commandcheck.admission_plugin("create", ok, None) is ok
    # The MPI operator gives workers without a command `sleep 365d`.
    mpi = job([{"name": "mpi", "image": "mpi"}], kind="MPIJob")
    assert commandcheck.admission_plugin("create", mpi, None) is mpi
    with pytest.raises(Invalid):
        commandcheck.admission_plugin("create", job([{"name": "mpi"}], kind="MPIJob", rtype="Launcher"), None)
    old = job([{"name": "pytorch"}])  # stored before the rule: its status writes still pass
    assert commandcheck.admission_plugin("update", dict(old, status={"x": 1}), old) is not None
    assert commandcheck.admission_plugin("delete", None, old) is None
    assert commandcheck.admission_plugin("create", {"kind": "Service", "spec": {}}, None) is not None
