"""A real Kubernetes control plane on loopback for the envtest suite: etcd, kube-apiserver and
kube-controller-manager from KUBEBUILDER_ASSETS (`make envtest` builds them), started and stopped.

controller-runtime's envtest convention: KUBEBUILDER_ASSETS names the folder of the binaries; without
it, the folder `make envtest` fills. Missing binaries fail the tests (never skip) naming `make envtest`.
"""
from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import yaml

from tests.envtest.pki import write_pki

K8S_VERSION = "v1.36.3"
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")
SERVICE_CIDR = "10.0.0.0/24"
ISSUER = "https://kubernetes.default.svc.cluster.local"
ADMIN = "envtest-admin"
# kube-controller-manager's controllers the tests rely on (names as `--help` lists them in v1.36).
CONTROLLERS = ("garbage-collector-controller", "serviceaccount-controller", "serviceaccount-token-controller",
               "namespace-controller", "root-ca-certificate-publisher-controller",
               "horizontal-pod-autoscaler-controller")
HPA_SYNC_PERIOD = "1s"  # --horizontal-pod-autoscaler-sync-period: the HPA tests wait for its conditions
START_TIMEOUT = 60.0
STOP_TIMEOUT = 10.0


class EnvtestError(AssertionError):
    """The control plane is missing or did not come up; the message says what and shows the logs."""


def assets_dir() -> Path:
    """KUBEBUILDER_ASSETS, else `make envtest`'s folder ($XDG_CACHE_HOME or ~/.cache)."""
    given = os.environ.get("KUBEBUILDER_ASSETS")
    if given:
        return Path(given).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "phalanx" / "envtest" / K8S_VERSION / "bin"


def find_assets(needed: tuple[str, ...] = BINARIES) -> Path:
    """The assets folder, or EnvtestError naming the missing binaries and `make envtest`."""
    folder = assets_dir()
    missing = [b for b in needed if not os.access(folder / b, os.X_OK)]
    if missing:
        where = "KUBEBUILDER_ASSETS" if os.environ.get("KUBEBUILDER_ASSETS") else "the default folder"
        raise EnvtestError(
            f"envtest binaries missing in {folder} ({where}): {', '.join(missing)}. Run `make envtest` to build "
            f"them (Kubernetes {K8S_VERSION} from Go modules), or set KUBEBUILDER_ASSETS to a folder holding "
            f"{', '.join(needed)}.")
    return folder


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager in ``root`` (certs, data, logs, kubeconfigs)."""

    def __init__(self, root: Path, assets: Path) -> None:
        self.root = root
        self.assets = assets
        self.procs: dict[str, subprocess.Popen] = {}
        self.pki = write_pki(root / "pki")
        self.ca = self.pki["ca.crt"]
        self.admin_token = secrets.token_hex(16)
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.kubeconfig = root / "admin.kubeconfig"
        self.write_kubeconfig(self.kubeconfig, ADMIN, self.admin_token)

    # ------------------------------------------------------------------ files

    def log(self, what: str) -> Path:
        return self.root / f"{what}.log"

    def logs(self, lines: int = 40) -> str:
        """The tail of every component's log (shown when a test fails)."""
        return "\n".join(f"----- {p.name} (last {lines} lines)\n{_tail(p, lines)}"
                         for p in sorted(self.root.glob("*.log")))

    def write_kubeconfig(self, path: Path, user: str, token: str) -> Path:
        path.write_text(yaml.safe_dump({
            "apiVersion": "v1", "kind": "Config", "current-context": "envtest",
            "clusters": [{"name": "envtest", "cluster": {"server": self.url, "certificate-authority": str(self.ca)}}],
            "users": [{"name": user, "user": {"token": token}}],
            "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": user,
                                                         "namespace": "default"}}]}))
        path.chmod(0o600)
        return path

    # ------------------------------------------------------------------ processes

    def _spawn(self, what: str, args: list[str]) -> subprocess.Popen:
        out = open(self.log(what), "ab")
        try:
            proc = subprocess.Popen([str(self.assets / what), *args], stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        finally:
            out.close()
        self.procs[what] = proc
        return proc

    def _wait(self, what: str, ready, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        proc = self.procs[what]
        while not ready():
            if proc.poll() is not None:
                raise EnvtestError(f"{what} exited with {proc.returncode} while starting\n{self.logs()}")
            if time.monotonic() > deadline:
                raise EnvtestError(f"{what} not ready within {timeout:.0f}s\n{self.logs()}")
            time.sleep(0.1)

    def _get(self, url: str, token: str | None = None, context: ssl.SSLContext | None = None) -> tuple[int, str]:
        req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
        try:
            with urllib.request.urlopen(req, timeout=5, context=context) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode(errors="replace")
        except (OSError, ValueError):
            return 0, ""

    def start(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        etcd_port, peer_port = free_port(), free_port()
        etcd_url = f"http://127.0.0.1:{etcd_port}"
        self._spawn("etcd", [f"--data-dir={self.root / 'etcd'}", f"--listen-client-urls={etcd_url}",
                             f"--advertise-client-urls={etcd_url}",
                             f"--listen-peer-urls=http://127.0.0.1:{peer_port}", "--unsafe-no-fsync",
                             "--log-level=error"])
        self._wait("etcd", lambda: self._get(f"{etcd_url}/health")[0] == 200)

        tokens = self.root / "tokens.csv"
        tokens.write_text(f'{self.admin_token},{ADMIN},{ADMIN}-uid,"system:masters"\n')
        tokens.chmod(0o600)
        self._spawn("kube-apiserver", [
            f"--etcd-servers={etcd_url}", "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            f"--secure-port={self.port}", f"--cert-dir={self.root / 'apiserver-certs'}",
            f"--tls-cert-file={self.pki['serving.crt']}", f"--tls-private-key-file={self.pki['serving.key']}",
            f"--client-ca-file={self.ca}", f"--token-auth-file={tokens}",
            f"--service-account-key-file={self.pki['sa.pub']}",
            f"--service-account-signing-key-file={self.pki['sa.key']}", f"--service-account-issuer={ISSUER}",
            "--authorization-mode=Node,RBAC", f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true", "--profiling=false",
            # Endpoints may not name a loopback address: no endpoints for the kubernetes Service.
            "--endpoint-reconciler-type=none"])
        tls = ssl.create_default_context(cafile=str(self.ca))
        self._wait("kube-apiserver", lambda: self._get(f"{self.url}/readyz", self.admin_token, tls) == (200, "ok"))

        self._start_controller_manager()
        # Ready when its ServiceAccount controller has made the default namespace's account
        # (pods need it: the ServiceAccount admission plugin refuses a pod without it).
        self._wait("kube-controller-manager", lambda: self._get(
            f"{self.url}/api/v1/namespaces/default/serviceaccounts/default", self.admin_token, tls)[0] == 200)

    def _start_controller_manager(self) -> None:
        self._spawn("kube-controller-manager", [
            f"--kubeconfig={self.kubeconfig}", f"--controllers={','.join(CONTROLLERS)}",
            f"--service-account-private-key-file={self.pki['sa.key']}", f"--root-ca-file={self.ca}",
            "--leader-elect=false", "--use-service-account-credentials=false", "--secure-port=0",
            "--concurrent-gc-syncs=5", f"--horizontal-pod-autoscaler-sync-period={HPA_SYNC_PERIOD}"])

    def restart_controller_manager(self) -> None:
        """Stop and start kube-controller-manager; returns once its garbage collector watches every
        resource served now (a running one learns of new CRDs' kinds at its next discovery, <= 30 s)."""
        log = self.log("kube-controller-manager")
        synced = "all resource monitors have synced"
        before = log.read_text(errors="replace").count(synced)
        proc = self.procs.pop("kube-controller-manager")
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=STOP_TIMEOUT)
        self._start_controller_manager()
        self._wait("kube-controller-manager", lambda: log.read_text(errors="replace").count(synced) > before)

    def stop(self) -> None:
        """SIGTERM in reverse start order; SIGKILL what has not exited after STOP_TIMEOUT."""
        for what in reversed(list(self.procs)):
            proc = self.procs.pop(what)
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=STOP_TIMEOUT)

    # ------------------------------------------------------------------ kubectl

    def kubectl(self, *args: str, input: str | None = None, kubeconfig: Path | None = None,
                timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess:
        """Run the envtest kubectl against this control plane (the admin kubeconfig by default)."""
        env = dict(os.environ, KUBECONFIG=str(kubeconfig or self.kubeconfig))
        env.pop("KUBERNETES_SERVICE_HOST", None)
        r = subprocess.run([str(self.assets / "kubectl"), *args], input=input, env=env, capture_output=True,
                           text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} -> {r.returncode}\n{r.stdout}\n{r.stderr}")
        return r

    def kubectl_json(self, *args: str, **kw) -> dict:
        return json.loads(self.kubectl(*args, "-o", "json", **kw).stdout)
