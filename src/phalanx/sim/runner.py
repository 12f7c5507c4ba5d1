"""A simulation: the real control plane on a virtual clock, simulated node agents.

The real job controller (with its pure core), the real scheduler shell and the
real garbage collector run over an in-memory Store exactly as the embedded
cluster wires them (``phalanx.cluster``), except that:

- the event loop is a ``VirtualEventLoop`` and every component gets a
  ``VirtualClock``: time jumps to the next timer whenever nothing is ready;
- pods are run by one ``SimAgent`` playing the agents of every declared node;
- uids are deterministic (a counter), so equal inputs give equal objects;
- the state-history recorder writes inline (a virtual-time loop has no threads to wait for), to
  ``history_dir`` or, when none is given, a temporary folder kept until ``Simulation.close``
  (``Simulation.histories``);
- the job controller is configured as in cluster mode (``local_runtime`` off:
  DNS names and declared ports; there is no local network to allocate
  addresses, and the workers' init containers are the original nslookup loop).

``Simulation(workload).run()`` returns a ``SimResult``; nothing here touches
the wall clock except for reporting how long the run took.
"""
from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import resource
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from phalanx.api.admission import admit
from phalanx.api.registry import JOB_KINDS
from phalanx.api.scheduling import system_priority_classes
from phalanx.client.interface import Obj
from phalanx.client.local import LocalClient
from phalanx.controller.gc import GarbageCollector
from phalanx.controller.history import HistoryRecorder
from phalanx.controller.job.controller import JobController
from phalanx.controller.job.plan import ReconcileOptions
from phalanx.gctune import tune_gc
from phalanx.node.agent import ensure_node
from phalanx.objects.clock import parse_time
from phalanx.objects.errors import AlreadyExists, ApiError
from phalanx.objects.quantity import parse_quantity
from phalanx.runtime.informer import SharedInformers
from phalanx.scheduler.scheduler import Scheduler
from phalanx.sim.agent import SimAgent, SimAgentConfig, SimNode
from phalanx.sim.arrivals import LoadedWorkload
from phalanx.sim.loop import VirtualClock, VirtualEventLoop
from phalanx.sim.metrics import JobRecord, Metrics, Timeline
from phalanx.store.compact import Packer
from phalanx.store.decode import Interner
from phalanx.store.history import JobHistories
from phalanx.store.priority import PriorityAdmission
from phalanx.store.store import Store

log = logging.getLogger(__name__)

# Events a watch may fall behind before writers let its consumer run (Store's watch_backlog):
# bursts (a wave of pods created or finishing at one virtual instant) stay bounded in memory.
SIM_WATCH_BACKLOG = 1000


def counter_uids() -> Callable[[], str]:
    """uuid-shaped, deterministic uids: 00000000-0000-4000-8000-000000000001, ..."""
    n = 0

    def next_uid() -> str:
        nonlocal n
        n += 1
        return f"00000000-0000-4000-8000-{n:012x}"
    return next_uid


class QuietEventsClient(LocalClient):
    """A LocalClient that accepts Events without storing them (``sim.events: false``):
    the components record as usual, the store does not grow with them."""

    async def create(self, obj: Obj) -> Obj:
        if obj.get("kind") == "Event":
            return obj
        return await super().create(obj)

    async def patch(self, kind: str, name: str, namespace: str | None, patch: Any,
                    patch_type: str = "merge", subresource: str | None = None) -> Obj:
        if kind == "Event":
            return {"kind": "Event", "metadata": {"name": name, "namespace": namespace}}
        return await super().patch(kind, name, namespace, patch, patch_type, subresource)


@dataclass
class SimStats:
    wall_seconds: float = 0.0
    virtual_seconds: float = 0.0
    loop_callbacks: int = 0
    clock_jumps: int = 0
    store_writes: int = 0
    pods_created: int = 0
    containers_started: int = 0
    scheduler_sessions: int = 0
    peak_rss_mb: float = 0.0
    nodes: int = 0

    @property
    def speedup(self) -> float:
        return self.virtual_seconds / self.wall_seconds if self.wall_seconds > 0 else float("inf")


@dataclass
class SimResult:
    records: list[JobRecord]
    timeline: Timeline
    capacity: tuple[float, float, float]
    end: float
    stats: SimStats
    stopped_by: str  # "done" | "until"
    seed: int | None = None
    problems: list[str] = field(default_factory=list)
    evictions: dict[str, int] = field(default_factory=dict)  # "preempted" / "reclaimed" -> pods


class Simulation:
    """One run of a workload. ``on_started(sim)`` runs once the components are
    up, before the first submission (tests attach watches and drivers with
    ``spawn``); the store stays readable after ``run`` (tests look at what is left), and so do the
    jobs' state histories (``histories``: under ``history_dir``, else a temporary folder removed by
    ``close`` or when the Simulation is collected; ``record_history=False`` records none)."""

    def __init__(self, workload: LoadedWorkload, seed: int | None = None, *,
                 until: float | None = None, settle: float = 0.0,
                 on_started: Callable[["Simulation"], Any] | None = None,
                 history_dir: Path | None = None, record_history: bool = True) -> None:
        self.workload = workload
        self.spec = workload.spec
        gen = self.spec.generator
        self.seed = seed if seed is not None else (gen.seed if gen is not None else 0)
        s = self.spec.sim
        self.until = until if until is not None else s.seconds("until")
        if self.until is None:
            self.until = workload.horizon() + (s.seconds("drain") or 0.0)
        self.on_started = on_started
        self.settle = settle  # virtual seconds to run on once every job finished (pods kept still run)
        self.loop: VirtualEventLoop | None = None
        self.clock: VirtualClock | None = None
        self.store: Store | None = None
        self.client: LocalClient | None = None
        self.metrics: Metrics | None = None
        self.scheduler: Scheduler | None = None
        self.jobs: JobController | None = None
        self.agent: SimAgent | None = None
        self.gc: GarbageCollector | None = None
        self._history_tmp: tempfile.TemporaryDirectory[str] | None = None
        self.histories: JobHistories | None = None
        if record_history:
            if history_dir is None:
                self._history_tmp = tempfile.TemporaryDirectory(prefix="phalanx-sim-history-")
                history_dir = Path(self._history_tmp.name)
            self.histories = JobHistories(history_dir)
        self.history: HistoryRecorder | None = None
        self.problems: list[str] = []
        self._tasks: list[asyncio.Task[Any]] = []
        self._unfinished = 0
        self._submitting = True
        self._done: asyncio.Event | None = None
        self._finished_records: set[int] = set()
        self._end = 0.0

    # ------------------------------------------------------------------ entry points

    def run(self) -> SimResult:
        """Run to the end on a fresh virtual-time loop (blocking)."""
        tune_gc()
        wall = time.perf_counter()
        loop = VirtualEventLoop()
        self.loop = loop
        with asyncio.Runner(loop_factory=lambda: loop) as runner:
            stopped_by = runner.run(self._main())
        stats = self._stats(time.perf_counter() - wall)
        assert self.metrics is not None
        return SimResult(self.metrics.records, self.metrics.timeline, self._capacity, self._end, stats,
                         stopped_by, self.seed, list(self.problems), dict(self.metrics.evictions))

    # ------------------------------------------------------------------ wiring

    async def _main(self) -> str:
        loop = asyncio.get_running_loop()
        assert isinstance(loop, VirtualEventLoop)
        s = self.spec.sim
        self.clock = clock = VirtualClock(loop)
        self.store = Store(None, clock, admission=admit, max_pending=10_000_000, uid_factory=counter_uids(),
                           name_rng=random.Random(self.seed), interner=Interner(),
                           watch_backlog=SIM_WATCH_BACKLOG, packer=Packer())
        # as the embedded cluster: pods get their priority from their PriorityClass
        self.store.add_admission_plugin(PriorityAdmission(self.store), status_writes=False)
        client_type = LocalClient if s.events else QuietEventsClient
        # The workload's objects are admitted in full; the components write through a trusted
        # client, as the embedded cluster's do (objects built from admitted ones).
        self.client = client = client_type(self.store)
        internal = client_type(self.store, trusted=True)
        node_specs = self.spec.cluster.node_specs()
        self._capacity = _capacity(node_specs)
        await self._prepare(client, node_specs)

        # One informer per kind for every component (each event decoded and cached once).
        shared = SharedInformers(internal)
        self.metrics = Metrics(client, loop.time, self._capacity, on_job_done=self._job_done, informers=shared)
        await self.metrics.start()
        options = ReconcileOptions(gang_scheduler="volcano", local_runtime=False, resolvable_names=True,
                                   default_backoff_limit=s.default_backoff_limit)
        self.gc = GarbageCollector(internal, informers=shared)
        self.scheduler = Scheduler(internal, clock, period=s.seconds("scheduler_period") or 1.0, pace=0.0,
                                   informers=shared)
        self.jobs = JobController(internal, clock, options, informers=shared)
        agent_cfg = SimAgentConfig(backoff_base=s.seconds("backoff_base") or 0.0,
                                   backoff_cap=s.seconds("backoff_cap") or 0.0,
                                   startup=s.seconds("startup") or 0.0, stop_time=s.seconds("stop_time") or 0.0,
                                   events=s.events)
        nodes = [SimNode(name, _node_ip(i)) for i, (name, _) in enumerate(node_specs)]
        self.agent = SimAgent(internal, clock, nodes, agent_cfg, informers=shared)
        if self.histories is not None:
            self.history = HistoryRecorder(internal, self.histories, clock, threaded=False, informers=shared)
        for c in (self.gc, self.history, self.scheduler, self.jobs, self.agent):
            if c is not None:
                self._tasks.append(loop.create_task(c.run(), name=type(c).__name__))
        if s.events:
            self._tasks.append(loop.create_task(self._expire_events(s.seconds("event_ttl") or 3600.0)))
        if self.on_started is not None:
            r = self.on_started(self)
            if asyncio.iscoroutine(r):
                await r
        self._done = asyncio.Event()
        submitter = loop.create_task(self._submit(), name="submitter")
        stopped_by = "done"
        try:
            remaining = max(0.0, (self.until or 0.0) - loop.time())
            await asyncio.wait_for(self._done.wait(), remaining)
        except asyncio.TimeoutError:
            stopped_by = "until"
        if stopped_by == "done" and self.settle > 0:
            await asyncio.sleep(min(self.settle, max(0.0, (self.until or 0.0) - loop.time())))
        submitter.cancel()
        await asyncio.gather(submitter, return_exceptions=True)
        # Let everything due at this instant happen (the last pods' exits and
        # deletions reach the metrics) before stopping.
        await loop.quiescent()
        self._end = loop.time()
        await self._stop()
        return stopped_by

    async def _prepare(self, client: LocalClient, node_specs: list[tuple[str, dict[str, str]]]) -> None:
        namespaces = {"default"}
        for a in self.workload.explicit:
            for o in a.objects:
                ns = (o.get("metadata") or {}).get("namespace") if isinstance(o.get("metadata"), dict) else None
                if isinstance(ns, str) and ns:
                    namespaces.add(ns)
        gen = self.spec.generator
        if gen is not None and gen.namespaces > 1:
            namespaces.update(f"ns-{i:04d}" for i in range(gen.namespaces))
        for ns in sorted(namespaces):
            with contextlib.suppress(AlreadyExists, ApiError):
                await client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for pc in system_priority_classes():
            with contextlib.suppress(AlreadyExists):
                await client.create(pc)
        for i, (name, cap) in enumerate(node_specs):
            await ensure_node(client, name, cap, self.clock, host_ip=_node_ip(i))
        for q in self.spec.cluster.queues:
            await self._apply(client, dict(q, apiVersion=q.get("apiVersion", "scheduling.volcano.sh/v1beta1"),
                                           kind="Queue"), "cluster.queues")

    async def _stop(self) -> None:
        for c in (self.agent, self.jobs, self.scheduler, self.gc, self.history):
            if c is None:
                continue
            await c.stop()
        if self.metrics is not None:
            await self.metrics.stop()
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()

    def close(self) -> None:
        """Remove the temporary history folder, if the Simulation made one."""
        if self._history_tmp is not None:
            self._history_tmp.cleanup()
            self._history_tmp = None

    def spawn(self, coro: Any, name: str | None = None) -> asyncio.Task[Any]:
        """Run ``coro`` inside the simulation (a test's driver, a watch); it is
        cancelled when the simulation ends."""
        assert self.loop is not None
        task = self.loop.create_task(coro, name=name)
        self._tasks.append(task)
        return task

    # ------------------------------------------------------------------ workload

    async def _submit(self) -> None:
        loop = asyncio.get_running_loop()
        client = self.client
        assert client is not None and self.metrics is not None
        for arrival in self.workload.arrivals(self.seed):
            if self.until is not None and arrival.at > self.until:
                break
            delay = arrival.at - loop.time()
            if delay > 0:
                await asyncio.sleep(delay)
            for obj in arrival.objects:
                if obj.get("kind") in JOB_KINDS:
                    try:
                        created = await client.create(obj)
                    except ApiError as e:
                        self.metrics.rejected(obj, loop.time(), e.message)
                        self.problems.append(f"{obj.get('kind')} {(obj.get('metadata') or {}).get('name')}: "
                                             f"{e.message}")
                        continue
                    self._unfinished += 1
                    self.metrics.submitted(created, loop.time())
                else:
                    await self._apply(client, obj, "jobs")
        self._submitting = False
        self._check_done()

    async def _apply(self, client: LocalClient, obj: Obj, where: str) -> None:
        """Create, or replace the spec of the existing object (kubectl apply, roughly)."""
        given = obj.get("metadata")
        meta: dict[str, Any] = given if isinstance(given, dict) else {}
        try:
            await client.create(obj)
            return
        except AlreadyExists:
            pass
        except ApiError as e:
            self.problems.append(f"{where}: {obj.get('kind')} {meta.get('name')}: {e.message}")
            return
        try:
            have = await client.get(obj["kind"], meta.get("name", ""), meta.get("namespace"))
            have["spec"] = obj.get("spec") or {}
            await client.update(have)
        except ApiError as e:
            self.problems.append(f"{where}: {obj.get('kind')} {meta.get('name')}: {e.message}")

    def _job_done(self, rec: JobRecord) -> None:
        if id(rec) in self._finished_records:
            return
        self._finished_records.add(id(rec))
        self._unfinished -= 1
        self._check_done()

    def _check_done(self) -> None:
        if not self._submitting and self._unfinished <= 0 and self._done is not None:
            self._done.set()

    async def _expire_events(self, ttl: float) -> None:
        """The apiserver's --event-ttl: Events not updated for ``ttl`` are removed."""
        assert self.client is not None and self.clock is not None
        period = max(60.0, ttl / 4)
        while True:
            await asyncio.sleep(period)
            now = self.clock.now()
            for ev in (await self.client.list("Event")).items:
                last = parse_time(ev.get("lastTimestamp") or ev.get("firstTimestamp"))
                if last is not None and (now - last).total_seconds() > ttl:
                    meta = ev["metadata"]
                    with contextlib.suppress(ApiError):
                        await self.client.delete("Event", meta["name"], meta.get("namespace"))

    # ------------------------------------------------------------------ results

    def _stats(self, wall: float) -> SimStats:
        loop = self.loop
        assert loop is not None
        return SimStats(
            wall_seconds=wall, virtual_seconds=self._end, loop_callbacks=loop.steps, clock_jumps=loop.jumps,
            store_writes=int(self.store.current_rv()) if self.store is not None else 0,
            pods_created=self.metrics.pods_created if self.metrics is not None else 0,
            containers_started=self.agent.started_containers if self.agent is not None else 0,
            scheduler_sessions=self.scheduler.sessions if self.scheduler is not None else 0,
            peak_rss_mb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            nodes=len(self.spec.cluster.node_specs()),
        )


def _capacity(node_specs: list[tuple[str, dict[str, str]]]) -> tuple[float, float, float]:
    cpu = mem = gpu = 0.0
    for _, cap in node_specs:
        cpu += parse_quantity(cap["cpu"])
        mem += parse_quantity(cap["memory"])
        gpu += parse_quantity(cap.get("nvidia.com/gpu", "0"))
    return (cpu, mem, gpu)


def _node_ip(i: int) -> str:
    return f"10.0.{(i >> 8) & 0xFF}.{i & 0xFF}" if i < 65536 else f"10.{1 + (i >> 16)}.{(i >> 8) & 0xFF}.{i & 0xFF}"
