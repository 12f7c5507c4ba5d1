"""`phalanx install`, `phalanx operator` and `phalanx scheduler` run against the envtest cluster:
the install arguments, the ServiceAccounts' tokens, and the two controllers as processes."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import yaml

from tests.envtest.controlplane import ControlPlane, free_port
from tests.scenarios.conftest import load_example

PHALANX = [sys.executable, "-m", "phalanx.cli.main"]
NAMESPACE = "phalanx-system"

# The operator runs on this machine, outside the cluster: the webhooks are registered by URL
# (`phalanx install --webhook-url`), its certificate made by the operator's rotator.
WEBHOOK_PORT = free_port()
INSTALL = ("install", f"--webhook-url=https://127.0.0.1:{WEBHOOK_PORT}")


def phalanx(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    r = subprocess.run([*PHALANX, *args], capture_output=True, text=True, timeout=timeout,
                       env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"})
    assert r.returncode == 0, f"phalanx {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def sa_token(envtest: ControlPlane, name: str) -> str:
    """A TokenRequest token of the generated ServiceAccount (`kubectl create token`)."""
    return envtest.kubectl("create", "token", name, "-n", NAMESPACE, "--duration=1h").stdout.strip()


class Controllers:
    """`phalanx operator` and `phalanx scheduler` as processes with the ServiceAccounts' tokens."""

    def __init__(self, envtest: ControlPlane) -> None:
        self.envtest = envtest
        self.procs: dict[str, subprocess.Popen] = {}

    def start(self, what: str, *flags: str) -> None:
        sa = f"phalanx-{what}"
        log = self.envtest.log(what)
        with open(log, "ab") as out:
            self.procs[what] = subprocess.Popen(
                [*PHALANX, what, "--server", self.envtest.url, "--token", sa_token(self.envtest, sa),
                 "--certificate-authority", str(self.envtest.ca), "-v", *flags],
                stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True,
                env={k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")})
        deadline = time.monotonic() + 30
        while f"phalanx {what}: " not in log.read_text():
            proc = self.procs[what]
            assert proc.poll() is None, f"{what} exited with {proc.returncode}:\n{log.read_text()}"
            assert time.monotonic() < deadline, f"{what} did not connect:\n{log.read_text()}"
            time.sleep(0.05)

    def start_both(self) -> None:
        """The scheduler, then the operator; returns once its webhooks answer (the rotator has
        injected its CA and the server listens)."""
        envtest = self.envtest
        self.start("scheduler", "--schedule-period", "0.2", "--listen-address=0", "--healthz-address=0")
        self.start("operator", "--local-runtime=false", f"--webhook-server-port={WEBHOOK_PORT}",
                   f"--webhook-cert-dir={envtest.root / 'webhook-certs'}",
                   "--metrics-bind-address=0", "--health-probe-bind-address=0")
        job = yaml.safe_dump(load_example("pytorchjob.yaml")[0])
        deadline = time.monotonic() + 30
        while envtest.kubectl("create", "--dry-run=server", "-f", "-", input=job, check=False).returncode != 0:
            assert time.monotonic() < deadline, f"the webhooks never answered:\n{envtest.log('operator').read_text()}"
            time.sleep(0.1)

    def stop(self) -> None:
        for proc in self.procs.values():
            proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
