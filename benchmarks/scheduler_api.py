"""Benchmark (issue 17, points 7 and 10): `phalanx scheduler` through an API server, and
kube-scheduler through the same one. Prints pods/s end to end and ADDED→bound latencies.

Each round: N fake Nodes (no kubelet: pods are only bound, never run) and, for Phalanx,
M/G PodGroups of minMember G are created first; the scheduler process is started and
connected; then M pods are created as fast as the API server takes them, and a watch
records when each pod was first seen (ADDED) and when it was first seen bound.
Figures per round: pods/s = M / (last bound - first ADDED); ADDED→bound p50/p99; the
longest stretch with pods waiting and no binding; whole seconds without a binding.
With --backlog the pods are all created before the scheduler starts, and pods/s runs from
the first binding to the last: the scheduler's own rate, which the driver's create rate
(the bound of the default mode when a scheduler keeps up) does not cap.

    .venv/bin/python benchmarks/scheduler_api.py                      # embedded API server
    .venv/bin/python benchmarks/scheduler_api.py --kubeconfig K       # any API server
    .venv/bin/python benchmarks/scheduler_api.py --kubeconfig K --peer "$KUBEBUILDER_ASSETS/kube-scheduler"
    .venv/bin/python benchmarks/scheduler_api.py --envtest            # kube-apiserver + etcd (`make envtest`),
                                                                      # phalanx vs its kube-scheduler
    .venv/bin/python benchmarks/scheduler_api.py --profile /tmp/sched.prof   # cProfile of the scheduler

Rounds alternate schedulers (phalanx, peer, phalanx, peer...) so drift on the machine
hits both. Medians over rounds and the ratio are printed at the end. Asserts nothing.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))  # tests.envtest.controlplane starts kube-apiserver for --envtest

from phalanx.client.kube import KubeClient
from phalanx.client.kubeconfig import from_kubeconfig
from phalanx.objects.errors import AlreadyExists, NotFound

PHALANX = [sys.executable, "-m", "phalanx.cli.main"]
CREATE_CONCURRENCY = 64


@dataclass
class Round:
    scheduler: str
    added: dict[str, float] = field(default_factory=dict)
    bound: dict[str, float] = field(default_factory=dict)

    def figures(self, pods: int, backlog: bool = False) -> dict[str, float]:
        """``backlog``: every pod existed before the scheduler started; the figures run from
        the first binding."""
        if not self.bound:
            return {"pods_per_s": 0.0, "p50": float("nan"), "p99": float("nan"), "gap": float("nan"),
                    "idle_s": float("nan"), "bound": 0}
        start = min(self.bound.values()) if backlog else min(self.added.values())
        end = max(self.bound.values())
        lat = sorted(self.bound[n] - self.added[n] for n in self.bound if n in self.added)
        events = sorted(self.bound.values())
        # While pods wait: from the first ADDED to the last binding.
        marks = [start, *events]
        gap = max(b - a for a, b in zip(marks, marks[1:])) if len(marks) > 1 else 0.0
        seconds = {int(t - start) for t in events}
        idle = sum(1 for s in range(int(end - start)) if s not in seconds)
        return {"pods_per_s": len(self.bound) / max(end - start, 1e-9), "p50": pct(lat, 50), "p99": pct(lat, 99),
                "gap": gap, "idle_s": idle, "bound": len(self.bound)}


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    k = max(0, min(len(values) - 1, round(p / 100 * len(values) + 0.5) - 1))
    return values[k]


def node(name: str) -> dict:
    res = {"cpu": "32", "memory": "256Gi", "pods": "110"}
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"bench": "scheduler-api"}},
            "status": {"capacity": res, "allocatable": res,
                       "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                                       "message": "fake node", "lastHeartbeatTime": None,
                                       "lastTransitionTime": None}]}}


def pod(ns: str, name: str, group: str | None, scheduler: str) -> dict:
    meta: dict = {"name": name, "namespace": ns, "labels": {"bench": "scheduler-api"}}
    if group:
        meta["annotations"] = {"scheduling.k8s.io/group-name": group}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"schedulerName": scheduler, "restartPolicy": "Never",
                     "containers": [{"name": "main", "image": "busybox", "command": ["sleep", "3600"],
                                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}


def podgroup(ns: str, name: str, size: int) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"minMember": size, "queue": "default",
                     "minResources": {"cpu": str(size), "memory": f"{size}Gi"}}}


async def bounded(n: int, coros) -> None:
    sem = asyncio.Semaphore(n)

    async def one(c):
        async with sem:
            await c

    await asyncio.gather(*(one(c) for c in coros))


async def create(c: KubeClient, obj: dict) -> None:
    with contextlib.suppress(AlreadyExists):
        created = await c.create(obj)
        if obj["kind"] != "Node":
            return
        if (created.get("spec") or {}).get("taints"):
            # kube-apiserver's admission taints a new Node not-ready; no node controller runs to lift it.
            created["spec"]["taints"] = []
            created = await c.update(created)
        if not (created.get("status") or {}).get("allocatable"):
            created["status"] = obj["status"]  # a server that drops status on create
            await c.update_status(created)


class Envtest:
    """kube-apiserver, etcd and kube-controller-manager of `make envtest` (tests/envtest's
    ControlPlane), with `phalanx install --no-webhooks` applied."""

    def __init__(self) -> None:
        from tests.envtest.controlplane import ControlPlane, find_assets  # only for --envtest: a test helper

        self.dir = tempfile.TemporaryDirectory(prefix="sched-api-envtest-")
        self.assets = find_assets()
        self.plane = ControlPlane(Path(self.dir.name), self.assets)

    def start(self) -> Path:
        self.plane.start()
        r = subprocess.run([*PHALANX, "install", "--no-webhooks", "--apply", "--kubeconfig",
                            str(self.plane.kubeconfig)], capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise SystemExit(f"phalanx install --apply failed:\n{r.stdout}{r.stderr}")
        return self.plane.kubeconfig

    def stop(self) -> None:
        self.plane.stop()
        self.dir.cleanup()


class Embedded:
    """`phalanx up --no-controllers --no-scheduler` in a home of its own."""

    def __init__(self) -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="sched-api-")
        self.home = Path(self.dir.name)
        self.env = dict(os.environ, PHALANX_HOME=str(self.home))
        # The node agent's own node is too small for any benchmark pod.
        (self.home / "cluster.yaml").write_text(yaml.safe_dump({"nodes": [{"name": "agent", "cpu": 0.1,
                                                                            "memory": "64Mi"}]}))

    def start(self) -> Path:
        r = subprocess.run([*PHALANX, "up", "--no-controllers", "--no-scheduler"], env=self.env,
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            raise SystemExit(f"phalanx up failed:\n{r.stdout}{r.stderr}")
        return self.home / "kubeconfig"

    def stop(self) -> None:
        subprocess.run([*PHALANX, "down"], env=self.env, capture_output=True, timeout=120)
        self.dir.cleanup()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_phalanx(kubeconfig: Path, log: Path, qps: float, profile: str | None, healthz: int) -> subprocess.Popen:
    cmd = [*PHALANX, "scheduler", "--kubeconfig", str(kubeconfig), "-v",
           "--kube-api-qps", str(qps), "--kube-api-burst", str(int(qps)), "--listen-address", "0",
           "--healthz-address", f"127.0.0.1:{healthz}"]
    if profile:
        cmd = [sys.executable, "-m", "cProfile", "-o", profile, "-m", "phalanx.cli.main", *cmd[len(PHALANX):]]
    return subprocess.Popen(cmd, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)


def start_kube_scheduler(binary: str, kubeconfig: Path, log: Path, qps: float, tmp: Path) -> subprocess.Popen:
    config = tmp / "kube-scheduler.yaml"
    config.write_text(yaml.safe_dump({
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), "qps": qps, "burst": int(qps)},
        "leaderElection": {"leaderElect": False}}))
    return subprocess.Popen([binary, f"--config={config}", "--secure-port=0", "-v=1"],
                            stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)


def ready(port: int) -> bool:
    """`phalanx scheduler`'s /readyz answers 200 once its informers have listed."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


async def wait_connected(c: KubeClient, proc: subprocess.Popen, log: Path, marker: str, timeout: float,
                         readyz: int | None = None) -> None:
    deadline = time.monotonic() + timeout
    while marker not in log.read_text(errors="replace") or (readyz is not None and not ready(readyz)):
        if proc.poll() is not None:
            raise SystemExit(f"the scheduler exited with {proc.returncode}:\n{log.read_text()[-4000:]}")
        if time.monotonic() > deadline:
            raise SystemExit(f"the scheduler did not start:\n{log.read_text()[-4000:]}")
        await asyncio.sleep(0.05)


async def one_round(kubeconfig: Path, which: str, k: int, args, tmp: Path) -> Round:
    c = KubeClient(from_kubeconfig(kubeconfig), qps=0)
    ns = f"bench-{k}"
    nodes = [f"bench-{k}-n{i:04d}" for i in range(args.nodes)]
    rnd = Round(which)
    log = tmp / f"round-{k}-{which}.log"
    log.write_text("")
    proc = None
    try:
        await create(c, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        await bounded(CREATE_CONCURRENCY, (create(c, node(n)) for n in nodes))
        groups = args.pods // args.gang
        scheduler_name = "volcano" if which == "phalanx" else "default-scheduler"
        if which == "phalanx":
            await bounded(CREATE_CONCURRENCY, (create(c, podgroup(ns, f"g{g:05d}", args.gang))
                                               for g in range(groups)))

        async def start_scheduler() -> subprocess.Popen:
            if which == "phalanx":
                healthz = free_port()
                p = start_phalanx(kubeconfig, log, args.qps, args.profile if k == 0 else None, healthz)
                await wait_connected(c, p, log, "phalanx scheduler: ", 60, readyz=healthz)
            else:
                p = start_kube_scheduler(args.peer, kubeconfig, log, args.qps, tmp)
                await wait_connected(c, p, log, "Starting Kubernetes Scheduler", 60)
            return p

        if not args.backlog:
            proc = await start_scheduler()
            # The scheduler lists before it watches: give its informers a moment to sync on an empty namespace.
            await asyncio.sleep(1.0)
        start_rv = (await c.list("Pod", ns)).resource_version
        all_bound = asyncio.Event()

        async def watch() -> None:
            async for ev in c.watch("Pod", ns, resource_version=start_rv):
                if ev.type == "BOOKMARK":
                    continue
                name = ev.object["metadata"]["name"]
                now = time.monotonic()
                rnd.added.setdefault(name, now)
                if (ev.object.get("spec") or {}).get("nodeName") and name not in rnd.bound:
                    rnd.bound[name] = now
                    if len(rnd.bound) == args.pods:
                        all_bound.set()

        watcher = asyncio.create_task(watch())
        await asyncio.sleep(0.2)
        names = [f"p{i:05d}" for i in range(args.pods)]
        created_at = time.monotonic()
        await bounded(CREATE_CONCURRENCY, (
            create(c, pod(ns, n, f"g{i // args.gang:05d}" if which == "phalanx" else None, scheduler_name))
            for i, n in enumerate(names)))
        create_s = time.monotonic() - created_at
        if args.backlog:
            while len(rnd.added) < args.pods:
                await asyncio.sleep(0.05)
            proc = await start_scheduler()
        try:
            await asyncio.wait_for(all_bound.wait(), args.timeout)
        except asyncio.TimeoutError:
            print(f"  round {k} ({which}): only {len(rnd.bound)}/{args.pods} bound after {args.timeout:.0f} s",
                  flush=True)
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await watcher
        print(f"  round {k} ({which}): {args.pods} pods created in {create_s:.1f} s "
              f"({args.pods / create_s:.0f}/s)", flush=True)
    finally:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT if args.profile and which == "phalanx" else signal.SIGTERM)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        # Next round's scheduler must see nothing of this round: its pods (at once: no kubelet
        # confirms a graceful deletion), PodGroups and nodes go.
        pods = [p["metadata"]["name"] for p in (await c.list("Pod", ns)).items]
        await bounded(CREATE_CONCURRENCY, (_delete(c, "Pod", n, ns, grace=0) for n in pods))
        if which == "phalanx":
            await bounded(CREATE_CONCURRENCY, (_delete(c, "PodGroup", f"g{g:05d}", ns)
                                               for g in range(args.pods // args.gang)))
        await bounded(CREATE_CONCURRENCY, (_delete(c, "Node", n) for n in nodes))
        await c.close()
    return rnd


async def _delete(c: KubeClient, kind: str, name: str, ns: str | None = None, grace: int | None = None) -> None:
    with contextlib.suppress(NotFound):
        await c.delete(kind, name, ns, grace_period_seconds=grace)


def show(rnd: Round, k: int, pods: int, backlog: bool) -> dict[str, float]:
    f = rnd.figures(pods, backlog)
    rate = "from the first binding" if backlog else "end to end"
    print(f"round {k} {rnd.scheduler:>14}: {f['pods_per_s']:7.0f} pods/s {rate}, bound {f['bound']}/{pods}, "
          f"ADDED→bound p50 {f['p50']:.2f} s p99 {f['p99']:.2f} s, longest gap {f['gap']:.2f} s, "
          f"{f['idle_s']} s without a binding", flush=True)
    return f


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kubeconfig", help="API server to use (default: an embedded one, started here)")
    ap.add_argument("--envtest", action="store_true",
                    help="start kube-apiserver from $KUBEBUILDER_ASSETS (or `make envtest`'s folder) and run its "
                         "kube-scheduler as the peer")
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--pods", type=int, default=4000)
    ap.add_argument("--gang", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2, help="rounds per scheduler")
    ap.add_argument("--qps", type=float, default=5000, help="client QPS and burst of both schedulers")
    ap.add_argument("--peer", help="a kube-scheduler binary to run the same workload with (pods only, "
                                   "schedulerName default-scheduler)")
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--backlog", action="store_true",
                    help="create every pod first, then start the scheduler: pods/s from the first binding to the "
                         "last, which the arrival rate does not bound (ADDED→bound then counts the wait)")
    ap.add_argument("--profile", help="write a cProfile of the first phalanx round's scheduler here")
    ap.add_argument("--logs", help="keep the schedulers' logs in this folder")
    args = ap.parse_args()
    if args.pods % args.gang:
        ap.error("--pods must be a multiple of --gang")
    embedded: Embedded | Envtest | None = None
    with tempfile.TemporaryDirectory(prefix="sched-api-logs-") as t:
        tmp = Path(args.logs or t)
        tmp.mkdir(parents=True, exist_ok=True)
        if args.kubeconfig:
            kubeconfig = Path(args.kubeconfig)
        else:
            embedded = Envtest() if args.envtest else Embedded()
            kubeconfig = embedded.start()
            if isinstance(embedded, Envtest) and not args.peer:
                args.peer = str(embedded.assets / "kube-scheduler")
        try:
            order = ["phalanx", "kube-scheduler"] if args.peer else ["phalanx"]
            print(f"scheduler_api: {args.nodes} nodes, {args.pods} pods in gangs of {args.gang}, "
                  f"client qps/burst {args.qps:.0f}, API server "
                  f"{'embedded (phalanx up)' if isinstance(embedded, Embedded) else kubeconfig}", flush=True)
            results: dict[str, list[dict[str, float]]] = {w: [] for w in order}
            k = 0
            for _ in range(args.rounds):
                for which in order:
                    rnd = await one_round(kubeconfig, which, k, args, tmp)
                    results[which].append(show(rnd, k, args.pods, args.backlog))
                    k += 1
        finally:
            if embedded is not None:
                embedded.stop()
    med = {w: {key: statistics.median(r[key] for r in rs) for key in ("pods_per_s", "p50", "p99", "idle_s")}
           for w, rs in results.items()}
    for w, m in med.items():
        print(f"median {w:>14}: {m['pods_per_s']:7.0f} pods/s, p50 {m['p50']:.2f} s, p99 {m['p99']:.2f} s, "
              f"{m['idle_s']:.0f} s without a binding")
    if args.peer:
        print(f"ratio phalanx / kube-scheduler (pods/s {'from the first binding' if args.backlog else 'end to end'}): "
              f"{med['phalanx']['pods_per_s'] / max(med['kube-scheduler']['pods_per_s'], 1e-9):.2f}")


if __name__ == "__main__":
    asyncio.run(main())
