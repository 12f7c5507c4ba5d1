"""Issue 5: a TFJob whose replicas really connect through TF_CONFIG.

examples/tf-config/tfjob.yaml (1 PS + 2 Workers, plain sockets): every worker
reaches the PS at the address TF_CONFIG names, from the address TF_CONFIG
gives the worker itself; the PS heard from each of them; all exit 0 and the
job Succeeds. Run with names (nss_wrapper) and, when nss_wrapper is here, also
with the loopback addresses the operator uses without it.
"""
from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest
import yaml

from phalanx.cluster import EmbeddedCluster
from phalanx.config import AgentSettings, ClusterConfig, NodeConfig, OperatorSettings
from phalanx.node.nsswrapper import nss_wrapper_available
from tests.scenarios.conftest import job_state, wait_until

ROOT = Path(__file__).resolve().parents[2]
TF = ROOT / "examples" / "tf-config"
_spec = importlib.util.spec_from_file_location("examples_embed", ROOT / "examples" / "ddp" / "embed.py")
embed = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(embed)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

PS = "tf-config-ps-0"
WORKERS = ["tf-config-worker-0", "tf-config-worker-1"]


def test_manifest_embeds_the_script_verbatim():
    text = (TF / "tfjob.yaml").read_text()
    assert embed.render(text, TF) == text, "tfjob.yaml is stale: run python3 examples/ddp/embed.py"
    script = (TF / "peers.py").read_text()
    for rtype, spec in yaml.safe_load(text)["spec"]["tfReplicaSpecs"].items():
        assert spec["template"]["spec"]["containers"][0]["args"] == [script], rtype


@pytest.fixture(params=["names", "addresses"])
async def cluster(request, tmp_path, monkeypatch):
    """The embedded cluster, with names resolved by nss_wrapper or, as without
    it, addresses in TF_CONFIG (PHALANX_NSS_WRAPPER="" turns it off)."""
    if request.param == "names" and not nss_wrapper_available():
        pytest.skip("libnss-wrapper is not installed: names do not resolve in pods")
    if request.param == "addresses":
        monkeypatch.setenv("PHALANX_NSS_WRAPPER", "")
    cfg = ClusterConfig(nodes=[NodeConfig("las1", 16, 64 * 1024**3)],
                        agent=AgentSettings(backoff_base=0.2, backoff_cap=2.0),
                        operator=OperatorSettings(default_backoff_limit=0))
    c = EmbeddedCluster(tmp_path / "home", cfg, persist=False)
    await c.start()
    try:
        yield c
    finally:
        await c.stop(kill_pods=True)


def tf_config(pod: dict) -> dict:
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0].get("env") or []}
    return json.loads(env["TF_CONFIG"])


async def test_tf_config_peers_connect_and_job_succeeds(cluster):
    c = cluster.client
    await c.create(yaml.safe_load((TF / "tfjob.yaml").read_text()))

    async def finished():
        job = await c.get("TFJob", "tf-config", "default")
        if job_state(job) == "Failed":
            return job
        pods = (await c.list("Pod", "default")).items
        done = len(pods) == 3 and all(p["status"].get("phase") in ("Succeeded", "Failed") for p in pods)
        return job if done and job_state(job) == "Succeeded" else None

    job = await wait_until(finished, 40, "TFJob Succeeded and its 3 pods finished")
    logs = {n: await cluster.log_provider.read("default", n) for n in [PS, *WORKERS]}
    dump = "\n".join(f"--- {n}\n{t}" for n, t in logs.items())
    assert job_state(job) == "Succeeded", f"{job['status'].get('conditions')}\n{dump}"
    pods = {n: await c.get("Pod", n, "default") for n in [PS, *WORKERS]}
    for n, p in pods.items():
        term = p["status"]["containerStatuses"][0]["state"]["terminated"]
        assert (p["status"]["phase"], term["exitCode"]) == ("Succeeded", 0), f"{n}\n{dump}"

    cluster_spec = tf_config(pods[PS])["cluster"]
    assert set(cluster_spec) == {"ps", "worker"} and len(cluster_spec["worker"]) == 2
    ps_address = cluster_spec["ps"][0]
    # Every peer connection, as each side saw it: worker i connected from its
    # own pod IP to the PS address of TF_CONFIG, and the PS heard worker i from
    # the address TF_CONFIG gives worker i.
    for i, w in enumerate(WORKERS):
        cfg = tf_config(pods[w])
        assert cfg["task"] == {"type": "worker", "index": i} and cfg["cluster"] == cluster_spec
        ip = pods[w]["status"]["podIP"]
        assert cluster_spec["worker"][i].split(":")[0] in (ip, f"{w}.default.svc")
        assert (f"worker {i}: connected from {ip} to ps 0 at {ps_address}; it says: ps 0 heard 2 workers"
                in logs[w]), dump
        assert f"ps 0: heard from worker {i} at {ip} ({cluster_spec['worker'][i]})" in logs[PS], dump
    assert tf_config(pods[PS])["task"] == {"type": "ps", "index": 0}
    assert "ps 0: heard from every worker [0, 1]" in logs[PS], dump
    assert len(re.findall(r"^ps 0: heard from worker \d", logs[PS], re.M)) == 2, dump
    # The PS listened on the port TF_CONFIG names for it: its Service's host port.
    svc = await c.get("Service", PS, "default")
    port = json.loads(svc["metadata"]["annotations"]["phalanx.dev/host-ports"])["tfjob-port"]
    assert ps_address.endswith(f":{port}") and f"ps 0: listening at {ps_address}" in logs[PS]
