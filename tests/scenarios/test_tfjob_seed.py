"""Seed 002 (TFJob), scenarios T1-T2, on real processes with 30 s scaled down."""
from __future__ import annotations

import json

import pytest

from phalanx.objects.errors import NotFound
from tests.scenarios.conftest import job_state, load_example, scaled, wait_until

pytestmark = pytest.mark.e2e

WORKERS = ["tftest-worker-0", "tftest-worker-1", "tftest-worker-2"]


async def _get(client, kind, name, ns="default"):
    try:
        return await client.get(kind, name, ns)
    except NotFound:
        return None


async def test_t1_normal_run(cluster, recorder):
    # docs/REFERENCE.md T1: Created -> Running (workers Running) -> Succeeded (worker-0 Completed);
    # PodGroup minMember 4 in queue default, deleted after success; pods remain.
    c = cluster.client
    await c.create(scaled(load_example("tfjob.yaml")[0], 2))
    pg = await wait_until(lambda: _get(c, "PodGroup", "tftest"), 5, "PodGroup")
    assert (pg["spec"]["minMember"], pg["spec"]["queue"]) == (4, "default")

    async def succeeded():
        return job_state(await c.get("TFJob", "tftest", "default")) == "Succeeded"

    await wait_until(succeeded, 30, "TFJob Succeeded")
    await wait_until(lambda: recorder.states("PodGroup", "tftest")[-1:] == ["<deleted>"], 5, "PodGroup deleted")
    assert recorder.states("TFJob", "tftest") == ["", "Created", "Running", "Succeeded"]
    assert recorder.first_time("TFJob", "tftest", "Succeeded") >= recorder.first_time("Pod", "tftest-worker-0", "Completed")
    j = await c.get("TFJob", "tftest", "default")
    assert j["status"]["conditions"][-1]["message"] == "TFJob default/tftest successfully completed."
    pods = {p["metadata"]["name"] for p in (await c.list("Pod", "default")).items}
    assert pods == {"tftest-ps-0", *WORKERS}


def _tf_config(pod: dict) -> dict:
    for c in pod["spec"]["containers"]:
        if c["name"] == "tensorflow":
            for e in c.get("env", []):
                if e["name"] == "TF_CONFIG":
                    return json.loads(e["value"])
    raise AssertionError("no TF_CONFIG")


async def test_t2_tf_config_and_connectable_addresses(cluster):
    # docs/REFERENCE.md T2: every replica gets TF_CONFIG; on the local runtime the addresses connect.
    c = cluster.client
    job = load_example("tfjob.yaml")[0]
    specs = job["spec"]["tfReplicaSpecs"]
    server = (
        "import json,os,socket\n"
        "cfg=json.loads(os.environ['TF_CONFIG']);host,port=cfg['cluster']['ps'][0].rsplit(':',1)\n"
        "s=socket.socket();s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1);s.bind(('0.0.0.0',int(port)));s.listen(8)\n"
        "seen=set()\n"
        "while len(seen)<3:\n"
        "  conn,_=s.accept();seen.add(conn.recv(16).decode());conn.close()\n"
        "print('heard',sorted(seen))\n"
    )
    client_code = (
        "import json,os,socket,time\n"
        "cfg=json.loads(os.environ['TF_CONFIG']);host,port=cfg['cluster']['ps'][0].rsplit(':',1)\n"
        "for _ in range(200):\n"
        "  try:\n"
        "    s=socket.create_connection((host,int(port)),timeout=1);break\n"
        "  except OSError: time.sleep(0.05)\n"
        "s.sendall(str(cfg['task']['index']).encode());s.close();print('sent',cfg['task']['index'])\n"
    )
    import sys
    specs["PS"]["restartPolicy"] = "OnFailure"
    specs["PS"]["template"]["spec"]["containers"][0]["command"] = [sys.executable, "-c", server]
    specs["Worker"]["template"]["spec"]["containers"][0]["command"] = [sys.executable, "-c", client_code]
    await c.create(job)

    async def ps_done():
        p = await _get(c, "Pod", "tftest-ps-0")
        return p and p.get("status", {}).get("phase") == "Succeeded"

    await wait_until(ps_done, 30, "PS heard every worker and exited 0")
    ps = await c.get("Pod", "tftest-ps-0", "default")
    cfg = _tf_config(ps)
    ps_svc = await c.get("Service", "tftest-ps-0", "default")
    port = json.loads(ps_svc["metadata"]["annotations"]["phalanx.dev/host-ports"])["tfjob-port"]
    if cluster.network.nss_wrapper_available():
        host = lambda n: f"{n}.default.svc"
    else:
        async def _addr(n):
            return (await c.get("Service", n, "default"))["metadata"]["annotations"]["phalanx.dev/address"]
        addrs = {n: await _addr(n) for n in ["tftest-ps-0", *WORKERS]}
        host = lambda n: addrs[n]
    wports = {}
    for n in WORKERS:
        svc = await c.get("Service", n, "default")
        wports[n] = json.loads(svc["metadata"]["annotations"]["phalanx.dev/host-ports"])["tfjob-port"]
    expected = {
        "cluster": {"ps": [f"{host('tftest-ps-0')}:{port}"],
                    "worker": [f"{host(n)}:{wports[n]}" for n in WORKERS]},
        "task": {"type": "ps", "index": 0},
        "environment": "cloud",
    }
    assert cfg == expected
    # Exact compact JSON shape, key order cluster/task/environment.
    raw = next(e["value"] for e in ps["spec"]["containers"][0]["env"] if e["name"] == "TF_CONFIG")
    assert raw == json.dumps(expected, separators=(",", ":"))
    for i, n in enumerate(WORKERS):
        assert _tf_config(await c.get("Pod", n, "default"))["task"] == {"type": "worker", "index": i}
    text = await cluster.log_provider.read("default", "tftest-ps-0")
    assert "heard ['0', '1', '2']" in text
