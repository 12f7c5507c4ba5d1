"""Finding, starting and stopping the control plane the CLI talks to.

A running control plane (``phalanx up``, or the one ``phalanx run`` starts
in-process) serves the Kubernetes-shaped object API over HTTPS on 127.0.0.1
with a bearer token. The certificate is signed by a CA made at first start
under ``$PHALANX_HOME/tls``. It records its address, token and CA in
``$PHALANX_HOME/api.json`` and writes ``$PHALANX_HOME/kubeconfig`` (both mode
0600), so the ``phalanx`` CLI and ``kubectl`` use the same API: a second
terminal can ``get`` / ``logs`` / ``describe`` what the first one runs. Every
request is logged to ``$PHALANX_HOME/api-access.log``.
"""
from __future__ import annotations

import fcntl
import http.client
import json
import os
import secrets
import shlex
import signal
import ssl
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import psutil

from phalanx.cli.lazy import lazy_module
from phalanx.config import ClusterConfig, load_config, make_private_dir
from phalanx.node.home import phalanx_home
from phalanx.runtime.gcpolicy import tune_for_long_running

if TYPE_CHECKING:
    import asyncio
    import logging

    from aiohttp.web import AppRunner

    from phalanx.client.http import HttpClient
    from phalanx.client.rest import RestClient
    from phalanx.cluster import EmbeddedCluster
    from phalanx.scheduler.config import SchedulerConfig
else:
    # Used by the control plane only, not by the commands that merely find it.
    asyncio = lazy_module("asyncio")
    logging = lazy_module("logging")

API_FILE = "api.json"
KUBECONFIG_FILE = "kubeconfig"
TLS_DIR = "tls"
SA_KEY_FILE = "service-account.key"  # signs ServiceAccount tokens (server.tokens); made once, mode 0600
ACCESS_LOG_FILE = "api-access.log"
ACCESS_LOG_BYTES = 5 * 1024 * 1024  # rotated once, so at most twice this on disk
HANGUP_GRACE = 3.0  # seconds after SIGTERM/SIGHUP for the orderly clean-up to begin
LOCK_FILE = "controlplane.lock"
LOCK_WAIT = 15.0  # seconds a new control plane waits for a dying one to release the home


@dataclass
class Endpoint:
    url: str
    token: str
    pid: int
    ca: str | None = None  # the CA certificate an https URL is verified against

    def client(self) -> "HttpClient":
        """An HttpClient for this endpoint (verifying the server with its CA)."""
        from phalanx.client.http import HttpClient  # lazy for start-up speed: aiohttp is for `run` only

        return HttpClient(self.url, self.token, ca_cert=self.ca)

    def rest(self) -> "RestClient":
        """A blocking RestClient for this endpoint (what the CLI's object commands use)."""
        from phalanx.client.rest import RestClient  # lazy for start-up speed: commands that connect only

        return RestClient(self.url, self.token, ca_cert=self.ca)


def recorded_endpoint(home: Path) -> Endpoint | None:
    """What api.json says, whether or not that control plane still lives."""
    path = home / API_FILE
    try:
        data = json.loads(path.read_text())
        ca = data.get("ca")
        return Endpoint(str(data["url"]), str(data["token"]), int(data["pid"]), str(ca) if ca else None)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def alive(pid: int) -> bool:
    """The process exists and is not a zombie (a killed control plane not reaped yet)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def read_endpoint(home: Path) -> Endpoint | None:
    ep = recorded_endpoint(home)
    if ep is None or not alive(ep.pid):
        return None
    return ep


def answers(ep: Endpoint, timeout: float = 2.0) -> bool:
    """Whether the control plane at ``ep`` serves its API (``/version`` with the token)."""
    try:
        url = ep.url.split("://", 1)[-1].rstrip("/")
        host, _, port = url.rpartition(":")
        ctx = ssl.create_default_context(cafile=ep.ca) if ep.ca else ssl.create_default_context()
        conn = http.client.HTTPSConnection(host, int(port), timeout=timeout, context=ctx)
        try:
            conn.request("GET", "/version", headers={"Authorization": f"Bearer {ep.token}"})
            return conn.getresponse().status == 200
        finally:
            conn.close()
    except (OSError, ValueError, ssl.SSLError, http.client.HTTPException):
        return False


def running_endpoint(home: Path, wait: float = LOCK_WAIT) -> Endpoint | None:
    """The control plane serving ``home``, asked through its API. One that
    exists but does not answer (dying, or killed and not reaped) is waited
    for, up to ``wait`` seconds, until it answers or exits; None: none serves."""
    deadline = time.monotonic() + wait
    while True:
        ep = recorded_endpoint(home)
        if ep is None or not alive(ep.pid):
            return None
        if answers(ep):
            return ep
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.1)


class HomeLock:
    """The one control plane serving a PHALANX_HOME holds this exclusive lock
    (``controlplane.lock``) while it lives; the kernel releases it when the
    process dies, however it dies."""

    def __init__(self, home: Path) -> None:
        self.path = home / LOCK_FILE
        self.fd: int | None = None

    def try_acquire(self) -> bool:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self.fd = fd
        return True

    async def acquire(self, timeout: float = LOCK_WAIT) -> bool:
        deadline = time.monotonic() + timeout
        while not self.try_acquire():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    def holder(self) -> int | None:
        try:
            return int(self.path.read_text().strip() or 0) or None
        except (OSError, ValueError):
            return None

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class RunLease:
    """A ``phalanx run`` using the control plane of a home: ``runs/<pid>.lease``,
    flock-held while the run lives (the kernel drops it when it dies), holding
    the job's ``kind/name``. A run hosting the control plane keeps serving while
    another run's lease is held."""

    def __init__(self, home: Path, job: str) -> None:
        self.dir = home / "runs"
        make_private_dir(home)
        self.dir.mkdir(mode=0o700, exist_ok=True)
        self.path = self.dir / f"{os.getpid()}.lease"
        tmp = self.dir / f"{os.getpid()}.new"  # locked before it is visible under its name
        fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        os.write(fd, job.encode())
        os.replace(tmp, self.path)
        self.fd: int | None = fd

    def others(self) -> list[str]:
        """The jobs of the other live runs (stale leases are removed)."""
        out = []
        for p in sorted(self.dir.glob("*.lease")):
            if p == self.path:
                continue
            try:
                fd = os.open(p, os.O_RDONLY)
            except OSError:
                continue
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
                except BlockingIOError:
                    out.append(os.read(fd, 600).decode("utf-8", "replace") or p.stem)
                    continue
                p.unlink(missing_ok=True)  # its run is gone
            finally:
                os.close(fd)
        return out

    def release(self) -> None:
        if self.fd is not None:
            self.path.unlink(missing_ok=True)
            os.close(self.fd)
            self.fd = None


class AlreadyServed(RuntimeError):
    """Another live control plane serves this PHALANX_HOME."""


def write_endpoint(home: Path, ep: Endpoint) -> None:
    path = home / API_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"url": ep.url, "token": ep.token, "pid": ep.pid, "ca": ep.ca}, f)
    os.replace(tmp, path)


def kubeconfig_path(home: Path) -> Path:
    return home / KUBECONFIG_FILE


def export_line(home: Path) -> str:
    """The one line a user runs so kubectl talks to this control plane."""
    return f"export KUBECONFIG={shlex.quote(str(kubeconfig_path(home)))}"


def _access_logger(home: Path) -> logging.Logger:
    """A logger writing one line per API request to ``api-access.log`` (rotated)."""
    import logging.handlers  # lazy for start-up speed, as `logging` itself

    logger = logging.getLogger(f"phalanx.server.access.{os.getpid()}.{id(home)}")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    if not logger.handlers:
        handler = logging.handlers.RotatingFileHandler(home / ACCESS_LOG_FILE, maxBytes=ACCESS_LOG_BYTES,
                                                       backupCount=1, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(message)s"))
        logger.addHandler(handler)
    return logger


def _close_logger(logger: logging.Logger) -> None:
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
        handler.close()


def remove_endpoint(home: Path, pid: int) -> None:
    ep_path = home / API_FILE
    try:
        data = json.loads(ep_path.read_text())
        if int(data.get("pid", -1)) == pid:
            ep_path.unlink()
    except (OSError, ValueError):
        pass


class ServedCluster:
    """An EmbeddedCluster plus its HTTP API, recorded in api.json while alive."""

    def __init__(self, home: Path, config: ClusterConfig | None = None, port: int = 0, *,
                 controllers: bool = True, scheduler: bool = True, lock_wait: float = LOCK_WAIT,
                 plain_kubernetes: bool = False) -> None:
        self.home = home
        self._lock = HomeLock(home)
        self.lock_wait = lock_wait
        self._cluster_args = (config, controllers, scheduler)
        self.plain_kubernetes = plain_kubernetes
        self.cluster: EmbeddedCluster | None = None  # made once the home is locked: one opens the state
        self.port = port
        self.token = secrets.token_urlsafe(32)
        self._runner: AppRunner | None = None
        self._access_log: logging.Logger | None = None
        self.endpoint: Endpoint | None = None
        self._signals: list[int] = []
        self._hung_up = False
        self._stopping = False

    async def start(self) -> Endpoint:
        """Start the cluster, serve HTTPS on 127.0.0.1, write api.json and the kubeconfig."""
        # Lazy for start-up speed: the server, TLS and the cluster load for the commands that host one only.
        from phalanx.server.app import make_app, serve
        from phalanx.server.tls import ensure_tls, ssl_context, write_kubeconfig

        make_private_dir(self.home)
        if not await self._lock.acquire(self.lock_wait):
            raise AlreadyServed(f"another control plane (pid {self._lock.holder()}) serves {self.home}")
        from phalanx.cluster import EmbeddedCluster  # lazy for start-up speed, as above

        config, controllers, scheduler = self._cluster_args
        self.cluster = EmbeddedCluster(self.home, config, controllers=controllers, scheduler=scheduler,
                                       plain_kubernetes=self.plain_kubernetes)
        tls = ensure_tls(self.home / TLS_DIR)
        await self.cluster.start()
        self._stop_pods_on_hangup()
        self._access_log = _access_logger(self.home)
        app = make_app(self.cluster.client, self.token, log_provider=self.cluster.log_provider,
                       clock=self.cluster.clock, access_log=self._access_log,
                       exec_provider=self.cluster.exec_provider, signing_key=self.home / SA_KEY_FILE,
                       metrics_registry=self.cluster.metrics_registry, histories=self.cluster.histories)
        if self.plain_kubernetes:
            from phalanx.server import webhooks  # lazy for start-up speed, as above

            webhooks.enable(app, self.cluster.admission)
        self._runner, url = await serve(app, host="127.0.0.1", port=self.port, ssl_context=ssl_context(tls))
        self.endpoint = Endpoint(url, self.token, os.getpid(), str(tls.ca_cert))
        write_endpoint(self.home, self.endpoint)
        write_kubeconfig(kubeconfig_path(self.home), url, tls.ca_cert, self.token)
        return self.endpoint

    def _stop_pods_on_hangup(self) -> None:
        """Pods run under shims that outlive this process, so a SIGKILL (or a
        crash) leaves them running for the next control plane to adopt. A
        closed terminal (SIGHUP) or a ``kill`` (SIGTERM) is an ordinary exit:
        treated as Ctrl-C, so the owner's clean-up (``stop(kill_pods=True)``)
        runs. ``serve_forever`` installs its own SIGTERM handler over this one."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGHUP, signal.SIGTERM):
            try:
                if signal.getsignal(sig) is signal.SIG_DFL:
                    loop.add_signal_handler(sig, self._hangup)
                    self._signals.append(sig)
            except (ValueError, RuntimeError):  # not the main thread: the embedder's business
                pass

    def _hangup(self) -> None:
        if self._hung_up:
            return
        self._hung_up = True
        signal.raise_signal(signal.SIGINT)  # as Ctrl-C: the main task is cancelled; its clean-up calls stop()
        asyncio.get_running_loop().call_later(HANGUP_GRACE, self._ensure_stopped)

    def _ensure_stopped(self) -> None:
        """The clean-up has not begun: a cancellation can be lost (asyncio.wait_for
        before Python 3.12 may swallow one). Stop here, pods included, and exit."""
        if self._stopping:
            return

        async def stop_and_exit() -> None:
            try:
                await self.stop(kill_pods=True)
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(130)

        asyncio.ensure_future(stop_and_exit())

    async def stop(self, kill_pods: bool = True) -> None:
        """Stop serving (once); ``kill_pods=False`` leaves the pods to their
        shims (the next control plane adopts them)."""
        if self._stopping:
            return
        self._stopping = True
        loop = asyncio.get_running_loop()
        for sig in self._signals:
            loop.remove_signal_handler(sig)
        self._signals.clear()
        remove_endpoint(self.home, os.getpid())
        if self._runner is not None:
            await self._runner.cleanup()
        if self._access_log is not None:
            _close_logger(self._access_log)
        if self.cluster is not None:
            await self.cluster.stop(kill_pods=kill_pods)
        self._lock.release()


def start_daemon(home: Path, port: int = 0, timeout: float = 20.0 + LOCK_WAIT, *,
                 controllers: bool = True, scheduler: bool = True, plain_kubernetes: bool = False,
                 scheduler_conf: str | None = None) -> Endpoint:
    """Start ``phalanx serve`` in the background and wait until it answers.
    ``controllers``/``scheduler`` False leave the job controller / the gang
    scheduler out (``phalanx operator`` / ``phalanx scheduler`` run them);
    ``plain_kubernetes``: see ``EmbeddedCluster``; ``scheduler_conf``: the
    embedded scheduler's volcano-scheduler.conf (an absolute path)."""
    make_private_dir(home)
    log = open(home / "controlplane.log", "ab")
    env = dict(os.environ, PHALANX_HOME=str(home))
    flags = [*([] if controllers else ["--no-controllers"]), *([] if scheduler else ["--no-scheduler"]),
             *(["--plain-kubernetes"] if plain_kubernetes else []),
             *(["--scheduler-conf", scheduler_conf] if scheduler_conf else [])]
    proc = subprocess.Popen(
        [sys.executable, "-m", "phalanx.cli.main", "serve", "--port", str(port), *flags],
        stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, start_new_session=True,
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ep = read_endpoint(home)
        if ep is not None and ep.pid == proc.pid:
            return ep
        if proc.poll() is not None:
            raise RuntimeError(f"control plane exited with code {proc.returncode}; see {home / 'controlplane.log'}")
        time.sleep(0.05)
    proc.terminate()
    raise RuntimeError(f"control plane did not start within {timeout:.0f}s; see {home / 'controlplane.log'}")


def stop_daemon(home: Path, timeout: float = 60.0) -> bool:
    ep = read_endpoint(home)
    if ep is None:
        return False
    try:
        os.kill(ep.pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and psutil.pid_exists(ep.pid):
        try:
            if psutil.Process(ep.pid).status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        time.sleep(0.05)
    return True


async def serve_forever(home: Path, port: int = 0, *, controllers: bool = True, scheduler: bool = True,
                        plain_kubernetes: bool = False, scheduler_config: SchedulerConfig | None = None) -> None:
    """Foreground control plane until SIGTERM/SIGINT (what ``up`` runs)."""
    tune_for_long_running()
    config = load_config(home=home)
    if scheduler_config is not None:
        config.scheduler = scheduler_config
    served = ServedCluster(home, config, port=port, controllers=controllers, scheduler=scheduler,
                           plain_kubernetes=plain_kubernetes)
    try:
        await served.start()
    except AlreadyServed as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(1) from None
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await served.stop(kill_pods=True)


def home() -> Path:
    return phalanx_home()


def mode_line(controllers: bool, scheduler: bool, plain_kubernetes: bool) -> str:
    """What a started control plane serves, for its start-up line."""
    api = ("plain Kubernetes API (no Kubeflow defaults or webhook rules; admission webhooks called)"
           if plain_kubernetes else "Phalanx API (Kubeflow defaults and validation)")
    left_out = [name for name, on in (("job controller", controllers), ("scheduler", scheduler)) if not on]
    return api + (f"; without {' and '.join(left_out)}" if left_out else "")
