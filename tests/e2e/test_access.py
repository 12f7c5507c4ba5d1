"""Access (issue 6, item 6) on real processes: a pod's command and args reach
exec as argv, shell metacharacters and all, literally; and a pod gets nothing
of the control plane's credentials (no token, no kubeconfig, no variable of
the process that serves the API), so it cannot call the API as the user.
(It runs as the same user, so it could still read $PHALANX_HOME/api.json from
disk: README, "Security and threat model".)"""
from __future__ import annotations

import asyncio
import json
import os
import sys
import time

import pytest

from phalanx.cluster import EmbeddedCluster
from phalanx.config import AgentSettings, ClusterConfig, NodeConfig
from phalanx.server.app import make_app, serve

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

TOKEN = "token-that-pods-must-not-see-0123456789"
# Each is an argument a shell would expand, split, glob or redirect.
HOSTILE_ARGS = ["$(touch pwned-subst)", "`touch pwned-backtick`", "a; touch pwned-semicolon", "a | cat",
                "a && touch pwned-and", "*", "$HOME", "${PATH}", "'single'", '"double"', "back\\slash",
                "two words", "> pwned-redirect", "new\nline", "$$", "$(PHALANX_UNDEFINED)", ""]
# Kubernetes' $(VAR) expansion applies (it is not a shell): $$ -> $, an undefined $(X) stays as written.
EXPECTED = [a if a != "$$" else "$" for a in HOSTILE_ARGS]
DUMP = "import json, os, sys; print(json.dumps({'argv': sys.argv[1:], 'env': dict(os.environ), 'cwd': os.getcwd()}))"


@pytest.fixture
async def served(tmp_path, monkeypatch):
    # What the user's shell and the control plane hold must not reach pods.
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "home" / "kubeconfig"))
    monkeypatch.setenv("PHALANX_TOKEN", TOKEN)
    monkeypatch.setenv("PHALANX_HOME", str(tmp_path / "home"))
    config = ClusterConfig(nodes=[NodeConfig("n1", 4, 8 * 2**30)], agent=AgentSettings(0.1, 0.5))
    cluster = EmbeddedCluster(tmp_path / "home", config, persist=False)
    await cluster.start()
    runner, _ = await serve(make_app(cluster.client, TOKEN, log_provider=cluster.log_provider))
    try:
        yield cluster
    finally:
        await runner.cleanup()
        await cluster.stop()


async def wait_phase(cluster: EmbeddedCluster, name: str, timeout: float = 30.0) -> dict:
    deadline = time.monotonic() + timeout
    pod: dict = {}
    while time.monotonic() < deadline:
        pod = await cluster.client.get("Pod", name, "default")
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            return pod
        await asyncio.sleep(0.05)
    raise AssertionError(f"pod {name} did not finish: {json.dumps(pod.get('status'))[:800]}")


async def test_args_are_argv_and_the_pod_gets_no_credentials(served, tmp_path):
    cluster = served
    await cluster.client.create({
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "argv", "namespace": "default"},
        "spec": {"nodeName": "n1", "restartPolicy": "Never", "containers": [{
            "name": "main", "image": "python", "command": [sys.executable, "-c", DUMP], "args": HOSTILE_ARGS}]}})
    pod = await wait_phase(cluster, "argv")
    assert pod["status"]["phase"] == "Succeeded", pod["status"]
    out = json.loads(await cluster.log_provider.read("default", "argv"))

    assert out["argv"] == EXPECTED  # one argv entry each, byte for byte: no shell in between
    for home in (tmp_path, tmp_path / "home", out["cwd"]):
        assert not [p for p in os.listdir(home) if p.startswith("pwned")]

    env = out["env"]
    assert "KUBECONFIG" not in env and "PHALANX_TOKEN" not in env and "PHALANX_HOME" not in env
    assert not [k for k, v in env.items() if TOKEN in v or TOKEN in k]
    assert not [k for k, v in env.items() if "api.json" in v or "kubeconfig" in v]
