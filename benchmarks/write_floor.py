"""The control plane's floor per one-pod job: its writes alone, with no reconcile, scheduling or node agent.

Run: ``.venv/bin/python benchmarks/write_floor.py [--jobs 1000] [--runs 3] [--dir /dev/shm] [--skip Event]``.

First one real one-pod job (``jobs_1000.one_pod_job``, ``true``) runs through the embedded cluster and every
store write it causes is recorded (verb, object, trusted or not). Then, on a fresh store as ``cluster.py`` builds
it (SQLite, group commit, the same admission and plugins), those writes are replayed for ``--jobs`` jobs (names
renamed) while the informers a cluster holds watch them: Pods, Services, PodGroups and jobs shared by five
components' handlers, a second Pod watch (the node agent's), Events (history). Each handler only adds a key to a
work queue, so what is measured is the plumbing every job pays before any decision: admission, stamping, JSON,
SQLite, the watch fan-out, decoding and caching. Printed: writes per job, CPU per job (median of ``--runs``), and
that figure over issue 21's target of 3 ms per job for the whole control plane, and next to it, in the same
runs, what the whole control plane takes per job in ``jobs_1000.py``'s burst of as many jobs.
"""
from __future__ import annotations

import argparse
import asyncio
import copy
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))  # this checkout's code, also when run from another worktree

import jobs_1000

from phalanx.api.admission import admit
from phalanx.client.local import LocalClient
from phalanx.node import commandcheck
from phalanx.node.network import LocalNetwork
from phalanx.objects.clock import Clock
from phalanx.runtime.informer import SharedInformers
from phalanx.runtime.workqueue import WorkQueue
from phalanx.store.namespaces import NamespaceLifecycle
from phalanx.store.priority import PriorityAdmission
from phalanx.store.store import Store

TARGET_MS = 3.0
NAME = "cap-0"
# Handlers per shared informer in the embedded cluster (job controller, scheduler, podgroup controller,
# garbage collector, history recorder, as they subscribe), and the watches of their own.
SHARED = {"Pod": 5, "Service": 2, "PodGroup": 4, "PyTorchJob": 3, "Event": 1}
OWN = ("Pod",)  # the node agent's (a per-node transform)
Write = tuple[str, str, Any, bool]  # verb, kind, argument, trusted


async def capture(where: str | None) -> list[Write]:
    """The store writes of one one-pod job, from its create to its Succeeded and its PodGroup's deletion."""
    writes: list[Write] = []
    originals = {v: getattr(Store, v) for v in ("create", "update", "update_status", "delete", "bind")}

    def recorder(verb: str):
        def call(self: Store, *args: Any, **kw: Any) -> Any:
            if verb == "bind":
                ns, name, node = args[:3]
                if name.startswith(NAME):
                    writes.append((verb, "Pod", (ns, name, node), True))
            elif verb == "delete":
                kind, name = args[:2]
                if name.startswith(NAME):
                    writes.append((verb, kind, (kind, name, *args[2:3]), bool(kw.get("trusted"))))
            else:
                obj = args[0]
                text = json.dumps(obj)
                if NAME in text:
                    writes.append((verb, obj.get("kind", ""), copy.deepcopy(obj), bool(kw.get("trusted"))))
            return originals[verb](self, *args, **kw)
        return call

    with tempfile.TemporaryDirectory(dir=where) as d:
        cluster = jobs_1000.bench_cluster(Path(d), 1000)
        await cluster.start()
        for verb in originals:
            setattr(Store, verb, recorder(verb))
        try:
            await cluster.client.create(jobs_1000.one_pod_job(NAME, ["true"]))
            for _ in range(600):
                job = await cluster.client.get("PyTorchJob", NAME, "default")
                pgs = [p for p in (await cluster.client.list("PodGroup", "default")).items
                       if p["metadata"]["name"].startswith(NAME)]
                if jobs_1000._state(job) == "Succeeded" and not pgs:
                    break
                await asyncio.sleep(0.05)
            await asyncio.sleep(1)  # the last Events
        finally:
            for verb, fn in originals.items():
                setattr(Store, verb, fn)
            await cluster.stop()
    return writes


def new_store(home: Path) -> Store:
    store = Store(home / "state.db", Clock(), admission=admit, group_commit=True)
    store.add_admission_plugin(NamespaceLifecycle(store), status_writes=False)  # as cluster.py registers them
    store.add_admission_plugin(PriorityAdmission(store), status_writes=False)
    store.add_admission_plugin(LocalNetwork(home).admission_plugin, status_writes=False)
    store.add_admission_plugin(commandcheck.admission_plugin, status_writes=False)
    store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}})
    return store


def renamed(writes: list[Write], i: int) -> list[Write]:
    """Job ``i``'s copy of the writes, made before the measurement (the renaming is not the control plane's)."""
    return [(verb, kind, json.loads(json.dumps(arg).replace(NAME, f"j{i:05d}")), trusted)
            for verb, kind, arg, trusted in writes]


def replay_one(store: Store, writes: list[Write]) -> None:
    held: dict[tuple[str, str], dict] = {}  # each writer's copy: the version and uid it writes over
    for verb, kind, a, trusted in writes:
        if verb == "bind":
            store.bind(*a)
            ns, name, _ = a
            held[(kind, name)] = store.get(kind, name, ns)["metadata"]  # the agent learns it from its watch
        elif verb == "delete":
            store.delete(*a)
        else:
            meta = a["metadata"]
            if verb != "create":
                last = held[(kind, meta["name"])]
                meta["resourceVersion"], meta["uid"] = last["resourceVersion"], last["uid"]
            held[(kind, meta["name"])] = getattr(store, verb)(a, trusted=trusted)["metadata"]


async def run(writes: list[Write], jobs: int, where: str | None) -> float:
    with tempfile.TemporaryDirectory(dir=where) as d:
        store = new_store(Path(d))
        client = LocalClient(store, trusted=True)
        shared = SharedInformers(client)
        queue: WorkQueue[str] = WorkQueue()
        infs = []  # one per component and kind, as each component asks the factory for its own
        for kind, components in SHARED.items():
            for _ in range(components):
                infs.append(shared.informer(kind))
        infs += [shared.informer(kind, transform=lambda o: o) for kind in OWN]
        for inf in infs:
            inf.add_handler(lambda _t, obj, _old: queue.add(obj["metadata"]["name"]))
            await inf.start()
        for inf in infs:
            await inf.wait_synced()
        copies = [renamed(writes, i) for i in range(jobs)]
        last_job = renamed([w for w in writes if w[0] != "delete"], jobs)
        proc = psutil.Process()
        t = proc.cpu_times()
        cpu0 = t.user + t.system
        for i, job_writes in enumerate(copies):
            replay_one(store, job_writes)
            if i % 20 == 19:
                await asyncio.sleep(0)  # the informers take their events as the cluster's loop lets them
        # One more job's writes end with its objects of every watched kind alive: each watch has caught up
        # once its cache holds them at their last version.
        replay_one(store, last_job)
        last = {(k, o["metadata"]["name"]): o["metadata"]["resourceVersion"]
                for k in SHARED for o in store.list(k, "default")[0] if o["metadata"]["name"].startswith(f"j{jobs:05d}")}
        while any((inf.get("default", name) or {}).get("metadata", {}).get("resourceVersion") != rv
                  for inf in infs for (k, name), rv in last.items() if inf.kind == k):
            await asyncio.sleep(0.005)
        await asyncio.to_thread(store.close)  # every write committed
        t = proc.cpu_times()
        cpu = t.user + t.system - cpu0
        for inf in infs:
            await inf.stop()
    return cpu / (jobs + 1)


async def main(jobs: int, runs: int, where: str | None, skip: list[str]) -> None:
    writes = await capture(where)
    if skip:  # what the floor would be without some of the writes (a decision on the objects, not a saving)
        writes = [w for w in writes if w[1] not in skip]
        print(f"left out: every write of {', '.join(skip)}")
    kinds: dict[str, int] = {}
    for verb, kind, _, _ in writes:
        kinds[f"{verb} {kind}"] = kinds.get(f"{verb} {kind}", 0) + 1
    print(f"one one-pod job: {len(writes)} store writes ({', '.join(f'{v} {k}' for k, v in sorted(kinds.items()))})")
    per_job, whole = [], []
    for _ in range(runs):
        per_job.append(await run(writes, jobs, where))
        whole.append(await burst(jobs, where))
    ms, real = statistics.median(per_job) * 1000, statistics.median(whole) * 1000
    print(f"its writes replayed for {jobs} jobs, watched as the embedded cluster watches them (handlers only "
          f"queue keys): {ms:.2f} ms of CPU per job, median of {runs} ({', '.join(f'{x * 1000:.2f}' for x in per_job)})"
          f"; issue 21's target for the whole control plane: {TARGET_MS} ms ({ms / TARGET_MS:.2f} of it)")
    print(f"the whole control plane in the same runs ({jobs} one-pod jobs at once, jobs_1000.py's burst): {real:.2f} ms "
          f"of CPU per job ({', '.join(f'{x * 1000:.2f}' for x in whole)}); the writes' floor is {ms / real:.2f} of it")


async def burst(jobs: int, where: str | None) -> float:
    """jobs_1000.py's burst on a fresh embedded cluster: the control plane's CPU per job."""
    with tempfile.TemporaryDirectory(dir=where) as d:
        cluster = jobs_1000.bench_cluster(Path(d), jobs)
        await cluster.start()
        try:
            _, failed, cpu = await jobs_1000.burst(cluster, jobs)
            assert failed == 0, f"{failed} jobs failed"
        finally:
            await cluster.stop()
    return cpu / jobs


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--dir", default=None, help="where the homes go (default: the temporary directory)")
    ap.add_argument("--skip", action="append", default=[], metavar="KIND",
                    help="replay without this kind's writes (e.g. Event): the floor if the job made none")
    args = ap.parse_args()
    asyncio.run(main(args.jobs, args.runs, args.dir, args.skip))
