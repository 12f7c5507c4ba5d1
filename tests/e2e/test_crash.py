"""Crash test: SIGKILL the control plane at random moments; every job ends as it would have.

A real control plane (``phalanx serve``, a separate process, SQLite store) runs
a mix of seed jobs with scaled durations; it is SIGKILLed at random moments
(seeded RNG) at least 5 times and restarted each time. The containers run on
under their shims meanwhile. At the end every job must be in the state the
seed semantics give without crashes, with the same restart counts, and every
replica slot must have been started exactly as often as those restarts say:
each container appends its pod name to a marker file when it starts, so a
pod started twice for one slot (or an extra restart) shows as an extra line.

Expected end states (docs/SEMANTICS.md S2-S6; the same as a crash-free run):

- ``crash-normal`` (PyTorchJob, master + worker sleep 5 s): Succeeded, no restart;
  one start per pod.
- ``crash-failing`` (PyTorchJob, backoffLimit 3, the worker exits 1 after 1 s,
  OnFailure): 3 in-place restarts, the 4th failure fails it -> Failed,
  BackoffLimitExceeded, restartCount 4; worker started 4 times, in one pod.
- ``crash-exitcode`` (TFJob seed 001, backoffLimit 3, worker-0 exits 138 after
  1 s, ExitCode): each failure recreates the pod; the 4th fails the job ->
  Failed, BackoffLimitExceeded, restartCount 4; 4 worker-0 pods, one start each.
- ``crash-deadline`` (PyTorchJob, activeDeadlineSeconds 6, master sleeps 60 s):
  Failed, DeadlineExceeded, no restart; one start.
"""
from __future__ import annotations

import asyncio
import collections
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from phalanx.cli.controlplane import read_endpoint
from phalanx.node import instancefiles as files
from phalanx.objects.errors import ApiError

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(150)]

SEED = int(os.environ.get("PHALANX_CRASH_SEED", "20240611"))  # fixed in CI; set it to explore others
KILLS = 6
NS = "default"

CLUSTER_YAML = """\
cpuOvercommit: 1
nodes:
  - {name: crash-a, cpu: 16, memory: 32Gi}
agent: {backoffBase: 0.2, backoffCap: 1}
operator: {defaultBackoffLimit: 0}
"""


def _container(name: str, script: str, *, pod_name_env: bool = False) -> dict:
    c = {"name": name, "image": "busybox:1.37.0-glibc", "command": ["sh", "-c", script],
         "resources": {"limits": {"cpu": "1", "memory": "100Mi"}}}
    if pod_name_env:
        c["env"] = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    return c


def _replica(container: dict, policy: str, replicas: int = 1) -> dict:
    return {"replicas": replicas, "restartPolicy": policy, "template": {"spec": {"containers": [container]}}}


def jobs(marks: Path) -> list[dict]:
    mark = f'echo "$HOSTNAME" >> {marks}; trap exit INT TERM; '

    def pytorch(name: str, master: str, worker: str | None, **run_policy) -> dict:
        specs = {"Master": _replica(_container("pytorch", mark + master), "OnFailure")}
        if worker is not None:
            specs["Worker"] = _replica(_container("pytorch", mark + worker), "OnFailure")
        return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": NS},
                "spec": {"runPolicy": run_policy, "pytorchReplicaSpecs": specs}}

    tf_worker = mark + ('if [ "$POD_NAME" = crash-exitcode-worker-0 ]; then sleep 1 & wait; exit 138; '
                        'else sleep 60 & wait; fi')
    tfjob = {"apiVersion": "kubeflow.org/v1", "kind": "TFJob", "metadata": {"name": "crash-exitcode", "namespace": NS},
             "spec": {"runPolicy": {"backoffLimit": 3}, "tfReplicaSpecs": {
                 "PS": _replica(_container("tensorflow", mark + "sleep 60 & wait"), "Always"),
                 "Worker": _replica(_container("tensorflow", tf_worker, pod_name_env=True), "ExitCode", 2)}}}
    return [
        pytorch("crash-normal", "sleep 5 & wait", "sleep 5 & wait"),
        pytorch("crash-failing", "sleep 60 & wait", "sleep 1 & wait; exit 1", backoffLimit=3),
        tfjob,
        pytorch("crash-deadline", "sleep 60 & wait", None, activeDeadlineSeconds=6),
    ]


# job -> (kind, end condition, reason, restartCount, {pod name: starts}, {pod name: pod instances})
EXPECTED = {
    "crash-normal": ("PyTorchJob", "Succeeded", "PyTorchJobSucceeded", 0,
                     {"crash-normal-master-0": 1, "crash-normal-worker-0": 1},
                     {"crash-normal-master-0": 1, "crash-normal-worker-0": 1}),
    "crash-failing": ("PyTorchJob", "Failed", "BackoffLimitExceeded", 4,
                      {"crash-failing-master-0": 1, "crash-failing-worker-0": 4},
                      {"crash-failing-master-0": 1, "crash-failing-worker-0": 1}),
    "crash-exitcode": ("TFJob", "Failed", "BackoffLimitExceeded", 4,
                       {"crash-exitcode-ps-0": 1, "crash-exitcode-worker-0": 4, "crash-exitcode-worker-1": 1},
                       {"crash-exitcode-ps-0": 1, "crash-exitcode-worker-0": 4, "crash-exitcode-worker-1": 1}),
    "crash-deadline": ("PyTorchJob", "Failed", "DeadlineExceeded", 0,
                       {"crash-deadline-master-0": 1}, {"crash-deadline-master-0": 1}),
}


class ControlPlane:
    """``phalanx serve`` as a child process, killed and restarted at will."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        env = dict(os.environ, PHALANX_HOME=str(self.home))
        with open(self.home / "controlplane.log", "ab") as log:
            self.proc = subprocess.Popen([sys.executable, "-m", "phalanx.cli.main", "serve"], env=env,
                                         stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True)
        self.starts += 1

    def up(self) -> bool:
        ep = read_endpoint(self.home)
        return self.proc is not None and ep is not None and ep.pid == self.proc.pid

    async def wait_up(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.up():
            assert self.proc is not None and self.proc.poll() is None, \
                f"the control plane exited: {(self.home / 'controlplane.log').read_text()[-3000:]}"
            assert time.monotonic() < deadline, "the control plane did not come up"
            await asyncio.sleep(0.05)

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 30.0) -> None:
        """SIGTERM (``phalanx down``): stops the pods too."""
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


def live_shims(home: Path) -> list[files.FoundInstance]:
    return [f for f in files.scan(home, "crash-a") if files.shim_alive(f.path)]


def kill_leftovers(home: Path, marks: Path) -> None:
    """Whatever a failed run left behind: the containers of live shims, and
    any process whose command names this test's marker file."""
    groups = set()
    for f in live_shims(home):
        status = files.read_json(files.status_path(f.log_path)) or {}
        if isinstance(status.get("pid"), int):
            groups.add(status["pid"])
    for p in psutil.process_iter(["cmdline"]):
        if str(marks) in " ".join(p.info.get("cmdline") or []):
            groups.add(p.pid)
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass


async def api(cp: ControlPlane):
    """A client for the current control plane, once it is up."""
    await cp.wait_up()
    ep = read_endpoint(cp.home)
    assert ep is not None
    return ep.client()


def finished(job: dict) -> str | None:
    for c in (job.get("status") or {}).get("conditions") or []:
        if c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True":
            return c["type"]
    return None


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    h.mkdir()
    (h / "cluster.yaml").write_text(CLUSTER_YAML)
    yield h
    kill_leftovers(h, tmp_path / "starts")


async def test_sigkilled_control_plane_loses_nothing(home, tmp_path):
    rng = random.Random(SEED)
    marks = tmp_path / "starts"
    cp = ControlPlane(home)
    cp.start()
    try:
        client = await api(cp)
        try:
            for job in jobs(marks):
                await client.create(job)
        finally:
            await client.close()

        # Kill at random moments, counted from the start of each incarnation:
        # a third early, while it starts, adopts and catches up; the rest while jobs run.
        kills = 0
        at_kill: list[tuple[float, bool, int]] = []  # (seconds after start, serving, containers running)
        while kills < KILLS:
            delay = rng.uniform(0.1, 0.8) if rng.random() < 0.3 else rng.uniform(0.8, 3.0)
            await asyncio.sleep(delay)
            serving = cp.up()
            cp.kill()
            kills += 1
            at_kill.append((round(delay, 2), serving, len(live_shims(home))))
            cp.start()

        # The last incarnation finishes the work.
        client = await api(cp)
        try:
            states: dict[str, dict] = {}
            deadline = time.monotonic() + 60
            while True:
                for name, (kind, *_rest) in EXPECTED.items():
                    try:
                        states[name] = await client.get(kind, name, NS)
                    except ApiError:
                        states[name] = {}
                pods = (await client.list("Pod", NS)).items
                groups = {g["metadata"]["name"] for g in (await client.list("PodGroup", NS)).items}
                # Failed jobs lose every pod; every finished job its PodGroup (docs/SEMANTICS.md S5).
                left = [p["metadata"]["name"] for p in pods if _job_of(p) != "crash-normal"]
                if all(finished(j) for j in states.values()) and not left and not groups & set(EXPECTED):
                    break
                assert time.monotonic() < deadline, \
                    f"jobs did not finish: {[(n, finished(j)) for n, j in states.items()]}, " \
                    f"pods left: {left}, PodGroups left: {groups}"
                await asyncio.sleep(0.2)
        finally:
            await client.close()
    finally:
        cp.stop()

    assert kills >= 5 and cp.starts == kills + 1
    assert sum(n for *_, n in at_kill) > 0 and any(up for _, up, _ in at_kill), \
        f"no kill happened while the control plane served and containers ran: {at_kill}"
    starts = collections.Counter(marks.read_text().split())
    pod_dirs = collections.Counter(d.name.rsplit("_", 1)[0].split("_", 1)[1] for d in (home / "pods").iterdir()
                                   if d.is_dir())
    problems = []
    for name, (kind, cond, reason, restarts, want_starts, want_pods) in EXPECTED.items():
        st = states[name].get("status") or {}
        last = next((c for c in st.get("conditions") or [] if c.get("type") == cond and c.get("status") == "True"),
                    {})
        per_type = sum((rs or {}).get("restarts", 0) for rs in (st.get("replicaStatuses") or {}).values())
        got = (finished(states[name]), last.get("reason"), st.get("restartCount", 0), per_type,
               {p: starts[p] for p in want_starts}, {p: pod_dirs[p] for p in want_pods})
        want = (cond, reason, restarts, restarts, want_starts, want_pods)
        if got != want:
            problems.append(f"{name}: got {got}, want {want}")
    assert not problems, "\n".join([*problems, f"kills (after s, serving, running): {at_kill}"])
    assert sum(starts.values()) == sum(sum(e[4].values()) for e in EXPECTED.values()), starts  # nothing else ran
    assert not live_shims(home), "containers outlived `phalanx down`"


def _job_of(pod: dict) -> str | None:
    return ((pod.get("metadata") or {}).get("labels") or {}).get("training.kubeflow.org/job-name")
