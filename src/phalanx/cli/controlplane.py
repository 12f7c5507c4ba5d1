"""Finding, starting and stopping the control plane the CLI talks to.

A running control plane (``phalanx up``, or the one ``phalanx run`` starts
in-process) serves the object API on 127.0.0.1 with a bearer token and records
its address in ``$PHALANX_HOME/api.json`` (mode 0600). Every CLI command talks
to it over HTTP, so a second terminal can ``get`` / ``logs`` / ``describe``
what the first one runs.
"""
from __future__ import annotations

import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil

from ..cluster import EmbeddedCluster
from ..config import ClusterConfig, load_config, phalanx_home

API_FILE = "api.json"


@dataclass
class Endpoint:
    url: str
    token: str
    pid: int


def read_endpoint(home: Path) -> Endpoint | None:
    path = home / API_FILE
    try:
        data = json.loads(path.read_text())
        ep = Endpoint(str(data["url"]), str(data["token"]), int(data["pid"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not psutil.pid_exists(ep.pid):
        return None
    return ep


def write_endpoint(home: Path, ep: Endpoint) -> None:
    path = home / API_FILE
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"url": ep.url, "token": ep.token, "pid": ep.pid}, f)
    os.replace(tmp, path)


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

    def __init__(self, home: Path, config: ClusterConfig | None = None, port: int = 0) -> None:
        self.home = home
        self.cluster = EmbeddedCluster(home, config)
        self.port = port
        self.token = secrets.token_urlsafe(32)
        self._runner = None
        self.endpoint: Endpoint | None = None

    async def start(self) -> Endpoint:
        from ..server.app import make_app, serve

        await self.cluster.start()
        app = make_app(self.cluster.client, self.token, log_provider=self.cluster.log_provider)
        self._runner, url = await serve(app, host="127.0.0.1", port=self.port)
        self.endpoint = Endpoint(url, self.token, os.getpid())
        write_endpoint(self.home, self.endpoint)
        return self.endpoint

    async def stop(self, kill_pods: bool = True) -> None:
        remove_endpoint(self.home, os.getpid())
        if self._runner is not None:
            await self._runner.cleanup()
        await self.cluster.stop(kill_pods=kill_pods)


def start_daemon(home: Path, port: int = 0, timeout: float = 20.0) -> Endpoint:
    """Start ``phalanx serve`` in the background and wait until it answers."""
    home.mkdir(parents=True, exist_ok=True)
    log = open(home / "controlplane.log", "ab")
    env = dict(os.environ, PHALANX_HOME=str(home))
    proc = subprocess.Popen(
        [sys.executable, "-m", "phalanx.cli.main", "serve", "--port", str(port)],
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


async def serve_forever(home: Path, port: int = 0) -> None:
    """Foreground control plane until SIGTERM/SIGINT (what ``up`` runs)."""
    served = ServedCluster(home, load_config(home=home), port=port)
    await served.start()
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
