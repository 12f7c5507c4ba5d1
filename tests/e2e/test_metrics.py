"""Metrics scraped over HTTP and parsed as Prometheus does, while and after the seed PyTorchJob ran:
from the embedded control plane's API server (behind its token; its operator, scheduler and node
agents' series), and from `phalanx operator` and `phalanx scheduler` run apart against it (their
/metrics, /healthz, /readyz)."""
from __future__ import annotations

import json
import os
import re
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.test_cli_controlplane import PHALANX, cli, job_file, wait_cli

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

JOB = {"job_namespace": "default", "framework": "pytorch"}


def parse(text: str) -> dict[tuple[str, tuple], float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(text) for s in fam.samples}


def value(samples: dict, name: str, **labels: str) -> float | None:
    return samples.get((name, tuple(sorted(labels.items()))))


def fetch(url: str, token: str | None = None, ca: str | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    ctx = ssl.create_default_context(cafile=ca) if ca else None
    try:
        with urllib.request.urlopen(req, timeout=5, context=ctx) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def wait_samples(get, predicate, timeout: float = 30, what: str = "metrics") -> dict:
    deadline = time.monotonic() + timeout
    while True:
        status, text = get()
        samples = parse(text) if status == 200 else {}
        if samples and predicate(samples):
            return samples
        assert time.monotonic() < deadline, f"timed out waiting for {what}; last scrape ({status}):\n{text}"
        time.sleep(0.1)


def finished(s: dict) -> bool:
    return value(s, "deleted_pod_groups_total") == 1


def check_operator(s: dict) -> None:
    assert [value(s, f"training_operator_jobs_{n}_total", **JOB)
            for n in ("created", "successful")] == [1, 1]
    for n in ("failed", "restarted", "deleted"):
        assert value(s, f"training_operator_jobs_{n}_total", **JOB) in (None, 0)
    assert [value(s, n) for n in ("created_pods_total", "deleted_pods_total", "failed_pods_total",
                                  "created_pod_groups_total", "deleted_pod_groups_total")] == [4, 0, 0, 1, 1]


def check_scheduler(s: dict) -> None:
    assert value(s, "volcano_schedule_attempts_total", result="scheduled") == 4
    assert value(s, "volcano_task_scheduling_latency_milliseconds_count", stage="Bound") == 4
    assert value(s, "volcano_scheduling_stage_duration_milliseconds_count", stage="Bind") == 4
    sessions = value(s, "volcano_e2e_scheduling_latency_milliseconds_count")
    assert sessions is not None and sessions >= 1
    assert value(s, "volcano_open_session_duration_milliseconds_count") == sessions
    assert value(s, "volcano_action_scheduling_latency_milliseconds_count", action="allocate") == sessions
    assert value(s, "volcano_plugin_scheduling_latency_milliseconds_count", plugin="gang",
                 OnSession="OnSessionClose") == sessions
    assert 1 <= (value(s, "volcano_e2e_job_scheduling_latency_milliseconds_count") or 0) <= 4
    assert value(s, "volcano_queue_pod_group_running_count", queue_name="default") is not None


def families(text: str) -> dict[str, str]:
    return {fam.name: fam.type for fam in text_string_to_metric_families(text)}


def running(s: dict) -> bool:
    return value(s, "phalanx_jobs", **JOB, state="Running") == 1 and \
        value(s, "volcano_queue_allocated_milli_cpu", queue_name="default") == 4000


def check_cluster(s: dict, text: str) -> None:
    """The embedded control plane's own series: jobs by state, restarts, pod starts, the queue let go."""
    assert {st: value(s, "phalanx_jobs", **JOB, state=st) for st in
            ("Created", "Running", "Restarting", "Suspended", "Succeeded", "Failed")} == {
        "Created": 0, "Running": 0, "Restarting": 0, "Suspended": 0, "Succeeded": 1, "Failed": 0}
    assert value(s, "phalanx_job_restarts_total", **JOB) in (None, 0)  # the seed job restarts nothing
    for name in ("kubelet_pod_start_duration_seconds", "kubelet_pod_start_total_duration_seconds"):
        assert value(s, f"{name}_count") == 4, name  # the four pods, once each
        mean = (value(s, f"{name}_sum") or 0) / 4
        assert 0 < mean < 30, (name, mean)
        assert value(s, f"{name}_bucket", le="+Inf") == 4
    # creation to running includes the wait for the gang; first sight to running does not
    assert (value(s, "kubelet_pod_start_total_duration_seconds_sum") or 0) + 4 >= \
        (value(s, "kubelet_pod_start_duration_seconds_sum") or 0)
    for r in ("cpu", "memory"):
        unit = "milli_cpu" if r == "cpu" else "memory_bytes"
        assert value(s, f"volcano_queue_allocated_{unit}", queue_name="default") == 0, r
        assert value(s, f"volcano_queue_deserved_{unit}", queue_name="default") is not None, r
    assert families(text) | {"phalanx_jobs": "gauge", "phalanx_job_restarts": "counter",
                             "kubelet_pod_start_duration_seconds": "histogram",
                             "volcano_queue_deserved_milli_cpu": "gauge"} == families(text)


def test_the_control_planes_api_server_serves_the_clusters_metrics(env, tmp_path):
    api = json.loads((Path(env["PHALANX_HOME"]) / "api.json").read_text())
    assert fetch(api["url"] + "/metrics", ca=api["ca"])[0] == 403  # behind the token: anonymous is refused
    assert fetch(api["url"] + "/metrics", "not-the-token", ca=api["ca"])[0] == 401  # another token: unauthorized
    scrape = lambda: fetch(api["url"] + "/metrics", api["token"], api["ca"])
    cli(env, "apply", "-f", str(job_file(tmp_path, 3)))
    during = wait_samples(scrape, running, what="the job Running, its four pods' CPU allocated to the queue")
    assert value(during, "volcano_queue_deserved_milli_cpu", queue_name="default") == 4000
    wait_cli(env, ["get", "pytorchjob", "pytest"], lambda out: "Succeeded" in out, 60, "job Succeeded")
    s = wait_samples(scrape, lambda s: finished(s) and
                     value(s, "volcano_queue_allocated_milli_cpu", queue_name="default") == 0,
                     what="the PodGroup deleted and the queue's allocation released")
    check_operator(s)
    check_scheduler(s)
    check_cluster(s, scrape()[1])
    assert (value(s, "apiserver_request_total", verb="POST", group="kubeflow.org", version="v1",
                  resource="pytorchjobs", subresource="", code="201")) == 1


def _url(log: Path, what: str) -> str:
    deadline = time.monotonic() + 20
    pattern = re.compile(rf"serving {what} on (http://\S+?)(?:/metrics| and|/healthz)")
    while True:
        m = pattern.search(log.read_text() if log.exists() else "")
        if m:
            return m.group(1)
        assert time.monotonic() < deadline, f"no {what} address in:\n{log.read_text() if log.exists() else ''}"
        time.sleep(0.05)


def test_operator_and_scheduler_serve_metrics_and_probes(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "cluster.yaml").write_text(yaml.safe_dump({
        "nodes": [{"name": "las1", "cpu": 16, "memory": "64Gi"}], "agent": {"backoffBase": 0.2, "backoffCap": 2}}))
    env = {**os.environ, "PHALANX_HOME": str(home)}
    cli(env, "up", "--no-controllers", "--no-scheduler")
    procs: list[subprocess.Popen] = []
    try:
        urls = {}
        for what, flags in (("scheduler", ["--listen-address", "127.0.0.1:0", "--healthz-address", "127.0.0.1:0"]),
                            ("operator", ["--metrics-bind-address", "127.0.0.1:0",
                                          "--health-probe-bind-address", "127.0.0.1:0"])):
            log = home / f"{what}.log"
            with open(log, "wb") as out:
                procs.append(subprocess.Popen([*PHALANX, what, "--kubeconfig", str(home / "kubeconfig"), *flags],
                                              env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out))
            urls[what] = (_url(log, "metrics"), _url(log, "probes"))
        for what, (_, probes) in urls.items():
            assert fetch(probes + "/healthz") == (200, "ok")
            deadline = time.monotonic() + 20
            while (ready := fetch(probes + "/readyz")) != (200, "ok"):  # informers syncing: 500, the check named
                assert ready[1] == "[-]informer-sync failed: reason withheld\nreadyz check failed\n", ready
                assert time.monotonic() < deadline, f"{what} never ready"
                time.sleep(0.05)
        cli(env, "apply", "-f", str(job_file(tmp_path, 0.5)))
        wait_cli(env, ["get", "pytorchjob", "pytest"], lambda out: "Succeeded" in out, 60, "job Succeeded")
        op = wait_samples(lambda: fetch(urls["operator"][0] + "/metrics"), finished, what="the PodGroup deleted")
        check_operator(op)
        assert value(op, "process_cpu_seconds_total") is not None  # the process' own series
        assert not [k for k in op if k[0].startswith("volcano_")]  # each program exposes its own
        sched = wait_samples(lambda: fetch(urls["scheduler"][0] + "/metrics"),
                             lambda s: value(s, "volcano_schedule_attempts_total", result="scheduled") == 4,
                             what="the bindings counted")
        check_scheduler(sched)
        assert not [k for k in sched if k[0].startswith("training_operator_")]
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            p.wait(timeout=20)
        subprocess.run([*PHALANX, "down"], env=env, capture_output=True, timeout=60)
