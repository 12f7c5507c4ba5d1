"""`phalanx run` with its in-process control plane stops its pods when it ends.

Containers run under shims that outlive the control plane (for crashes), so
stopping them is the job of every ordinary exit: SIGTERM (`kill`) and SIGHUP
(a closed terminal) end `phalanx run` as Ctrl-C does, pods stopped.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest
import yaml

from phalanx.node import instancefiles as files

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_phalanx_run_stops_its_pods_when_it_is_ended(tmp_path, sig):
    home = tmp_path / "home"
    home.mkdir()
    (home / "cluster.yaml").write_text("nodes:\n  - {name: run-a, cpu: 4, memory: 8Gi}\n")
    started = tmp_path / "started"
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "endless"},
           "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": {
               "spec": {"containers": [{"name": "pytorch", "image": "busybox", "command": [
                   "sh", "-c", f"echo $$$$ > {started}; exec sleep 60"]}]}}}}}}
    manifest = tmp_path / "job.yaml"
    manifest.write_text(yaml.safe_dump(job))
    env = dict(os.environ, PHALANX_HOME=str(home))
    proc = subprocess.Popen([sys.executable, "-m", "phalanx.cli.main", "run", str(manifest)], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    pid = None
    try:
        deadline = time.monotonic() + 30
        while not (started.exists() and started.read_text().strip()):
            assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
            assert time.monotonic() < deadline, "the pod never started"
            time.sleep(0.05)
        pid = int(started.read_text())
        assert psutil.pid_exists(pid)
        proc.send_signal(sig)
        assert proc.wait(30) != 0  # interrupted, like Ctrl-C
        assert not [f for f in files.scan(home, "run-a") if files.shim_alive(f.path)], "a shim outlived `run`"
        try:
            assert psutil.Process(pid).status() == psutil.STATUS_ZOMBIE, "the container outlived `run`"
        except psutil.NoSuchProcess:
            pass
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if pid is not None:
            try:
                os.killpg(pid, signal.SIGKILL)
            except OSError:
                pass
