"""Load benchmark (issue 6, item 5): 500 small PyTorchJobs submitted at once.

The control plane runs as its own process (``phalanx serve``: the embedded
cluster with SQLite persistence, the HTTPS API with a token), with 8 virtual
nodes of 8 cpu / 32Gi and the ``default`` queue capped at ``--capability`` cpu,
so queue admission is what paces the run. This process is only the client:
it creates every job at once through the HTTP API, watches Pods, PodGroups
and jobs, runs a concurrent stream of GET/LIST requests, and samples the
control plane's RSS (that process alone; the pods are its children).

Reports: time until every job finished, scheduling throughput (pods bound
per second), API latency p50/p99 (creates; concurrent GET/LIST), peak RSS.
Asserts: every job Succeeded, no PodGroup left Pending/Inqueue, and the sum
of cpu requests of the queue's pods holding resources (bound, not finished,
not being deleted: Volcano's allocated set) never above the capability at
any resourceVersion the Pod watch showed. Exit 0 when every assertion holds.

    .venv/bin/python benchmarks/load_500.py [--jobs 500] [--capability 32] [--timeout 1800]
"""
from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from phalanx.cli.controlplane import Endpoint, read_endpoint, stop_daemon
from phalanx.client.http import HttpClient
from phalanx.objects.errors import ApiError, NotFound
from phalanx.objects.quantity import parse_quantity

NS = "default"
QUEUE = "default"
JOB_LABEL = "training.kubeflow.org/job-name"
FINISHED = ("Succeeded", "Failed")


def cluster_yaml(nodes: int, cpu: int, memory: str) -> str:
    lines = ["cpuOvercommit: 1", "nodes:"]
    lines += [f"  - {{name: node-{i}, cpu: {cpu}, memory: {memory}}}" for i in range(nodes)]
    lines += ["agent: {backoffBase: 1, backoffCap: 5}"]
    return "\n".join(lines) + "\n"


def job(name: str, cpu: str, master_cmd: str, worker_cmd: str) -> dict[str, Any]:
    def replica(cmd: str) -> dict[str, Any]:
        return {"replicas": 1, "restartPolicy": "OnFailure", "template": {"spec": {"containers": [{
            "name": "pytorch", "image": "busybox", "command": ["sh", "-c", cmd],
            "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}, "limits": {"cpu": cpu, "memory": "64Mi"}},
        }]}}}
    # cleanPodPolicy Running: a worker still waiting for its (finished) master is
    # removed when the job succeeds, instead of holding its cpu until it times out.
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": NS},
            "spec": {"runPolicy": {"cleanPodPolicy": "Running", "backoffLimit": 3},
                     "pytorchReplicaSpecs": {"Master": replica(master_cmd), "Worker": replica(worker_cmd)}}}


def pod_cpu(pod: dict[str, Any]) -> float:
    """What the pod holds while it runs: the sum of its app containers' cpu requests."""
    total = 0.0
    for c in (pod.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        v = (res.get("requests") or {}).get("cpu", (res.get("limits") or {}).get("cpu"))
        total += parse_quantity(v) if v is not None else 0.0
    return total


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


@dataclass
class Observed:
    """What the watches saw: binds, the queue's held cpu at every Pod event, PodGroup phases, job states."""

    capability: float
    pods: dict[str, dict[str, Any]] = field(default_factory=dict)  # uid -> {cpu, held, releasing}
    bound_at: dict[str, float] = field(default_factory=dict)      # uid -> monotonic time first seen bound
    held: float = 0.0          # Volcano's allocated: bound, not finished, not being deleted
    held_or_releasing: float = 0.0
    max_held: float = 0.0
    max_held_or_releasing: float = 0.0
    violations: list[str] = field(default_factory=list)
    pod_events: int = 0
    podgroups: dict[str, str] = field(default_factory=dict)       # name -> phase (deleted: removed)
    podgroup_phases_seen: dict[str, set[str]] = field(default_factory=dict)
    job_state: dict[str, str] = field(default_factory=dict)       # name -> last condition type
    finished_at: dict[str, float] = field(default_factory=dict)

    def on_pod(self, type_: str, pod: dict[str, Any]) -> None:
        meta = pod.get("metadata") or {}
        uid = meta.get("uid") or ""
        self.pod_events += 1
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        bound = bool(spec.get("nodeName"))
        if bound and uid not in self.bound_at:
            self.bound_at[uid] = time.monotonic()
        live = type_ != "DELETED" and bound and status.get("phase") not in FINISHED
        held = live and not meta.get("deletionTimestamp")
        old = self.pods.get(uid, {"cpu": 0.0, "held": False, "live": False})
        cpu = pod_cpu(pod)
        self.held += (cpu if held else 0.0) - (old["cpu"] if old["held"] else 0.0)
        self.held_or_releasing += (cpu if live else 0.0) - (old["cpu"] if old["live"] else 0.0)
        if type_ == "DELETED":
            self.pods.pop(uid, None)
        else:
            self.pods[uid] = {"cpu": cpu, "held": held, "live": live}
        self.max_held = max(self.max_held, self.held)
        self.max_held_or_releasing = max(self.max_held_or_releasing, self.held_or_releasing)
        if self.held > self.capability + 1e-9:
            self.violations.append(f"rv {meta.get('resourceVersion')}: {self.held:g} cpu held > "
                                   f"capability {self.capability:g}")

    def on_podgroup(self, type_: str, pg: dict[str, Any]) -> None:
        name = (pg.get("metadata") or {}).get("name") or ""
        phase = (pg.get("status") or {}).get("phase") or "Pending"
        self.podgroup_phases_seen.setdefault(name, set()).add(phase)
        if type_ == "DELETED":
            self.podgroups.pop(name, None)
        else:
            self.podgroups[name] = phase

    def on_job(self, type_: str, job: dict[str, Any]) -> None:
        name = (job.get("metadata") or {}).get("name") or ""
        conds = (job.get("status") or {}).get("conditions") or []
        true = [c.get("type") for c in conds if isinstance(c, dict) and c.get("status") == "True"]
        state = true[-1] if true else "Created"
        self.job_state[name] = state
        if state in FINISHED and name not in self.finished_at:
            self.finished_at[name] = time.monotonic()


async def watch_into(client: HttpClient, kind: str, rv: str, handler: Any) -> None:
    async for ev in client.watch(kind, NS, resource_version=rv):
        if ev.type in ("ADDED", "MODIFIED", "DELETED"):
            handler(ev.type, ev.object)


async def sample_rss(pid: int, out: list[int], stop: asyncio.Event) -> None:
    proc = psutil.Process(pid)
    while not stop.is_set():
        try:
            out.append(proc.memory_info().rss)
        except psutil.Error:
            return
        try:
            await asyncio.wait_for(stop.wait(), 0.2)
        except asyncio.TimeoutError:
            pass


def peak_rss_kernel(pid: int) -> int | None:
    """VmHWM: the kernel's high-water mark of the process's RSS (Linux)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


async def read_stream(client: HttpClient, names: list[str], lat: dict[str, list[float]], stop: asyncio.Event,
                      pause: float) -> None:
    """A steady client: LIST pods, LIST jobs, GET a job, as fast as ``pause`` allows."""
    i = 0
    while not stop.is_set():
        for what in ("list_pods", "list_jobs", "get_job"):
            t0 = time.perf_counter()
            try:
                if what == "list_pods":
                    await client.list("Pod", NS)
                elif what == "list_jobs":
                    await client.list("PyTorchJob", NS)
                else:
                    await client.get("PyTorchJob", names[i % len(names)], NS)
            except NotFound:
                pass
            lat[what].append(time.perf_counter() - t0)
        i += 1
        try:
            await asyncio.wait_for(stop.wait(), pause)
        except asyncio.TimeoutError:
            pass


async def wait_for_queue(client: HttpClient, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            await client.get("Queue", QUEUE)
            return
        except NotFound:
            await asyncio.sleep(0.1)
    raise RuntimeError(f"queue {QUEUE} not created within {timeout:g}s")


async def run(args: argparse.Namespace, ep: Endpoint) -> int:
    client = HttpClient(ep.url, ep.token, ca_cert=ep.ca)
    readers = HttpClient(ep.url, ep.token, ca_cert=ep.ca)
    watcher = HttpClient(ep.url, ep.token, ca_cert=ep.ca)
    try:
        await wait_for_queue(client, 30)
        await client.patch("Queue", QUEUE, None, {"spec": {"capability": {"cpu": str(args.capability)}}})
        obs = Observed(float(args.capability))
        names = [f"load-{i:04d}" for i in range(args.jobs)]
        rv = (await client.list("Pod", NS)).resource_version
        watches = [asyncio.create_task(watch_into(watcher, "Pod", rv, obs.on_pod)),
                   asyncio.create_task(watch_into(watcher, "PodGroup", rv, obs.on_podgroup)),
                   asyncio.create_task(watch_into(watcher, "PyTorchJob", rv, obs.on_job))]
        stop = asyncio.Event()
        rss: list[int] = []
        read_lat: dict[str, list[float]] = {"list_pods": [], "list_jobs": [], "get_job": []}
        background = [asyncio.create_task(sample_rss(ep.pid, rss, stop)),
                      asyncio.create_task(read_stream(readers, names, read_lat, stop, args.read_pause))]

        create_lat: list[float] = []
        create_errors: list[str] = []

        async def create(name: str) -> None:
            t0 = time.perf_counter()
            try:
                await client.create(job(name, args.cpu, args.master_cmd, args.worker_cmd))
            except ApiError as e:
                create_errors.append(f"{name}: {e.code} {e}")
            create_lat.append(time.perf_counter() - t0)

        t_start = time.monotonic()
        await asyncio.gather(*(create(n) for n in names))
        t_submitted = time.monotonic()
        print(f"submitted {args.jobs} jobs in {t_submitted - t_start:.1f}s ({len(create_errors)} errors)",
              flush=True)
        deadline = t_start + args.timeout
        last_print = 0.0
        t_end = None
        while time.monotonic() < deadline:
            # Completion is read from the stored state (a LIST), not from the watch, which may lag.
            stored = (await client.list("PyTorchJob", NS)).items
            done = sum(1 for j in stored if _state(j) in FINISHED)
            if done == len(names):
                t_end = time.monotonic()
                break
            if time.monotonic() - last_print > 10:
                last_print = time.monotonic()
                print(f"  t={last_print - t_start:6.1f}s finished {done}/{len(names)} (watch: "
                      f"{len(obs.finished_at)}), pods bound (watch) {len(obs.bound_at)}, cpu held "
                      f"{obs.held:g}/{args.capability}, rss {rss[-1] / 2**20 if rss else 0:.0f} MiB", flush=True)
            await asyncio.sleep(1.0)
        if t_end is None:
            t_end = time.monotonic()
        # The watches must have seen everything before the capability check means anything.
        while len(obs.finished_at) < len(names) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        watch_lag = time.monotonic() - t_end
        # Let the PodGroup watch see the last cleanups, then look at the stored state.
        await asyncio.sleep(args.settle)
        stop.set()
        for t in background:
            await t
        for t in watches:
            t.cancel()
        await asyncio.gather(*watches, return_exceptions=True)
        peak_kernel = peak_rss_kernel(ep.pid)

        jobs_now = {j["metadata"]["name"]: j for j in (await client.list("PyTorchJob", NS)).items}
        pgs_now = (await client.list("PodGroup", NS)).items
        failures: list[str] = []
        not_ok = [n for n in names if obs.job_state.get(n) != "Succeeded"]
        if create_errors:
            failures.append(f"{len(create_errors)} creates failed, e.g. {create_errors[:3]}")
        if not_ok:
            failures.append(f"{len(not_ok)} jobs not Succeeded, e.g. "
                            f"{[(n, obs.job_state.get(n)) for n in not_ok[:5]]}")
        stored_not_ok = [n for n in names if _state(jobs_now.get(n)) != "Succeeded"]
        if stored_not_ok:
            failures.append(f"{len(stored_not_ok)} stored jobs not Succeeded, e.g. {stored_not_ok[:5]}")
        stuck = [(p["metadata"]["name"], (p.get("status") or {}).get("phase") or "Pending") for p in pgs_now
                 if ((p.get("status") or {}).get("phase") or "Pending") in ("Pending", "Inqueue")]
        if stuck:
            failures.append(f"{len(stuck)} PodGroups stuck, e.g. {stuck[:5]}")
        if obs.violations:
            failures.append(f"queue capability exceeded {len(obs.violations)} times, e.g. {obs.violations[:3]}")

        span = t_end - t_start
        binds = sorted(obs.bound_at.values())
        bind_span = (binds[-1] - t_start) if binds else float("nan")
        print()
        print(f"jobs                      {args.jobs} x (1 Master + 1 Worker), {args.cpu} cpu per pod, "
              f"queue capability {args.capability} cpu, 8 nodes x {args.node_cpu} cpu")
        print(f"time until all finished   {span:.1f} s (creates took {t_submitted - t_start:.1f} s)")
        print(f"scheduling throughput     {len(binds)} pods bound in {bind_span:.1f} s = "
              f"{len(binds) / bind_span:.1f} pods/s")
        print(f"API create latency        p50 {percentile(create_lat, 50) * 1000:.0f} ms, "
              f"p99 {percentile(create_lat, 99) * 1000:.0f} ms (n={len(create_lat)}, all at once)")
        for what, values in read_lat.items():
            print(f"API {what:<10} latency   p50 {percentile(values, 50) * 1000:.0f} ms, "
                  f"p99 {percentile(values, 99) * 1000:.0f} ms (n={len(values)}, during the run)")
        peak_sampled = max(rss) if rss else 0
        print(f"control plane peak RSS    {(peak_kernel or peak_sampled) / 2**20:.0f} MiB (VmHWM; sampled max "
              f"{peak_sampled / 2**20:.0f} MiB, at start {rss[0] / 2**20 if rss else 0:.0f} MiB)")
        print(f"queue cpu held            max {obs.max_held:g} of {args.capability} (incl. pods being deleted: "
              f"max {obs.max_held_or_releasing:g}); {obs.pod_events} pod events checked")
        print(f"watch lag at the end      {watch_lag:.1f} s (the Pod/PodGroup/job watches seeing the last finish "
              f"after a LIST did)")
        print(f"PodGroups at the end      {len(pgs_now)} stored, {len(stuck)} Pending/Inqueue")
        if failures:
            print("\nFAILED:\n  " + "\n  ".join(failures))
            return 1
        print("\nOK: every job Succeeded, no PodGroup stuck, capability never exceeded")
        return 0
    finally:
        for c in (client, readers, watcher):
            await c.close()


def _state(job: dict[str, Any] | None) -> str | None:
    if job is None:
        return None
    conds = (job.get("status") or {}).get("conditions") or []
    true = [c.get("type") for c in conds if isinstance(c, dict) and c.get("status") == "True"]
    return true[-1] if true else "Created"


_PROFILED = """
import asyncio, cProfile, sys
from pathlib import Path
from phalanx.cli.controlplane import serve_forever
prof = cProfile.Profile()
prof.enable()
try:
    asyncio.run(serve_forever(Path(sys.argv[1])))
finally:
    prof.disable()
    prof.dump_stats(sys.argv[2])
"""


def start_control_plane(home: Path, profile: Path | None, timeout: float = 30.0) -> Endpoint:
    """``phalanx serve`` in the background (what ``phalanx up`` starts), or the
    same under cProfile; returns once its API answers."""
    env = dict(os.environ, PHALANX_HOME=str(home))
    cmd = ([sys.executable, "-c", _PROFILED, str(home), str(profile.resolve())] if profile
           else [sys.executable, "-m", "phalanx.cli.main", "serve"])
    log = open(home / "controlplane.log", "ab")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                            start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ep = read_endpoint(home)
        if ep is not None and ep.pid == proc.pid:
            return ep
        if proc.poll() is not None:
            raise RuntimeError(f"control plane exited with code {proc.returncode}; see {home}/controlplane.log")
        time.sleep(0.05)
    proc.terminate()
    raise RuntimeError(f"control plane did not start within {timeout:g}s")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", type=int, default=500)
    p.add_argument("--capability", type=int, default=32, help="cpu capability of the default queue")
    p.add_argument("--cpu", default="1", help="cpu request of each pod")
    p.add_argument("--node-cpu", type=int, default=8)
    p.add_argument("--master-cmd", default="sleep 1")
    p.add_argument("--worker-cmd", default="sleep 0.2")
    p.add_argument("--read-pause", type=float, default=0.1, help="seconds between rounds of the GET/LIST stream")
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--settle", type=float, default=3.0, help="seconds to wait after the last job finished")
    p.add_argument("--home", help="state directory (default: a fresh temporary one, removed at the end)")
    p.add_argument("--profile", help="run the control plane under cProfile and write its stats to this file")
    args = p.parse_args()

    home = Path(args.home) if args.home else Path(tempfile.mkdtemp(prefix="phalanx-load-"))
    home.mkdir(parents=True, exist_ok=True)
    (home / "cluster.yaml").write_text(cluster_yaml(8, args.node_cpu, "32Gi"))
    ep = start_control_plane(home, Path(args.profile) if args.profile else None)
    print(f"control plane pid {ep.pid} at {ep.url}, state in {home}", flush=True)
    try:
        return asyncio.run(run(args, ep))
    finally:
        stop_daemon(home)
        if not args.home:
            shutil.rmtree(home, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
