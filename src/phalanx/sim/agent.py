"""Simulated node agents: the kubelet of every simulated node, without processes.

One ``SimAgent`` plays the agent of N nodes (one pod informer, one work queue
keyed by pod uid, so a thousand nodes cost no more than one). Each pod goes
through the real agent's pure state machine, ``phalanx.node.podstate.decide``:
init containers in order, restartPolicy in place with CrashLoopBackOff
back-off, the job controller's no-restart marks, deletion with grace, deadline,
and the Kubernetes-shaped status. Only running a process is simulated: a
container instance starts (after an optional startup latency), runs for the
duration its behaviour gives (``phalanx.sim.behaviour``) and exits with its
code. A kill is the real agent's: SIGTERM, then SIGKILL when the grace period
is over; the container exits ``stop_time`` after the SIGTERM with 143 (a
trapping shell), or at the end of the grace with 137 when that comes first
(grace 0: at once). Timers are event-loop timers, so in a simulation they run
in virtual time.
"""
from __future__ import annotations

import asyncio
import logging
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Sequence

from phalanx.client.interface import Client
from phalanx.node import podstate
from phalanx.node.podstate import BackoffConfig, ContainerObservation, DeletePod, KillPod, StartContainer, Termination
from phalanx.node.statuswrite import write_pod_status
from phalanx.objects.clock import Clock
from phalanx.objects.errors import NotFound
from phalanx.objects.meta import resource_version
from phalanx.runtime.controller import Controller, Result
from phalanx.runtime.events import EventRecorder
from phalanx.runtime.informer import SharedInformers
from phalanx.sim.behaviour import Behaviour, BehaviourError, behaviour_of, run_of
from phalanx.sim.loop import VirtualClock
from phalanx.sim.script import Outcome, WaitFor

log = logging.getLogger(__name__)

Obj = dict[str, Any]
COMPONENT = "kubelet"
_FINISHED_MEMORY = 65536
_EPSILON = 1e-6  # timers land just after a deadline, never a rounding short of it


@dataclass
class SimAgentConfig:
    """Timings of the simulated agents (the real agent's, plus startup latency)."""

    backoff_base: float = 10.0
    backoff_cap: float = 300.0
    backoff_reset: float | None = None  # default 2 x cap, as the real agent
    startup: float = 0.0                # seconds from start to running, unless the pod says
    events: bool = True                 # record the kubelet's events (Created, Started, Killing, BackOff)
    term_exit_code: int = 143           # a kill with grace: SIGTERM to `trap exit TERM` shells
    stop_time: float = 0.0              # seconds from SIGTERM to the exit (SIGKILL at the grace if longer)

    def backoff(self) -> BackoffConfig:
        reset = self.backoff_reset if self.backoff_reset is not None else 2 * self.backoff_cap
        return BackoffConfig(base=self.backoff_base, cap=self.backoff_cap, reset_after=reset)


@dataclass(frozen=True)
class SimNode:
    name: str
    ip: str


@dataclass
class _Instance:
    """One run of a container."""

    container: str
    container_id: str
    restart_count: int
    backoff_count: int
    run: Outcome | WaitFor
    started_at: datetime | None = None
    termination: Termination | None = None
    starting: bool = False
    timer: asyncio.TimerHandle | None = None
    waiting_for: tuple[str, str] | None = None  # (namespace, pod) a WaitFor polls
    kill_grace: float | None = None  # SIGTERM sent with this grace period (the exit is timed)

    @property
    def running(self) -> bool:
        return self.started_at is not None and self.termination is None


@dataclass
class _Record:
    current: _Instance
    last_termination: Termination | None = None


@dataclass
class _SimPod:
    uid: str
    namespace: str
    name: str
    node: SimNode
    pod: Obj
    behaviour: Behaviour | None = None
    containers: dict[str, _Record] = field(default_factory=dict)
    pod_ip: str | None = None
    removed: bool = False
    writes: int = 0
    rewrites: int = 0
    backoff_reported: set[tuple[str, int]] = field(default_factory=set)

    def update(self, pod: Obj) -> None:
        if (pod.get("metadata") or {}).get("uid") != self.uid:
            return
        if resource_version(pod) >= resource_version(self.pod) or self.removed:
            self.pod = pod

    def observe(self) -> dict[str, ContainerObservation]:
        out = {}
        for name, rec in self.containers.items():
            cur = rec.current
            out[name] = ContainerObservation(
                name=name, container_id=cur.container_id, started_at=cur.started_at, terminated=cur.termination,
                last_termination=rec.last_termination, restart_count=cur.restart_count,
                backoff_count=cur.backoff_count)
        return out

    def any_running(self) -> bool:
        return any(r.current.running or r.current.starting for r in self.containers.values())



def pod_ready(pod: Obj) -> bool:
    """Running, Ready and not being deleted: its Service's name resolves."""
    st = pod.get("status") or {}
    if st.get("phase") != "Running" or (pod.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in st.get("conditions") or [] if isinstance(c, dict))


class SimAgent:
    """Runs (in simulation) the pods bound to any of ``nodes``."""

    def __init__(self, client: Client, clock: Clock, nodes: Sequence[SimNode],
                 config: SimAgentConfig | None = None, informers: SharedInformers | None = None) -> None:
        self.client = client
        self.clock = clock
        self.config = config or SimAgentConfig()
        self.backoff = self.config.backoff()
        self.nodes = {n.name: n for n in nodes}
        self.pods = (informers if informers is not None else SharedInformers(client)).informer("Pod")
        self.controller: Controller[str] = Controller("sim-kubelet", self._reconcile, clock=clock)
        self.events = EventRecorder(client, COMPONENT, clock)
        self._pods: dict[str, _SimPod] = {}
        self._finished: dict[str, None] = {}
        self._attempts: dict[tuple[str, str, str], int] = {}  # runs per pod slot (behaviours with failures)
        self._ready: set[tuple[str, str]] = set()
        self._waiters: dict[tuple[str, str], set[tuple[str, str]]] = {}  # (ns, pod) -> {(uid, container)}
        self._ip_counter = 0
        self._id_counter = 0
        self.started_containers = 0

    # ------------------------------------------------------------------ lifecycle

    async def run(self) -> None:
        self.pods.add_handler(self._on_pod)
        await self.pods.start()
        if await self.pods.wait_synced():
            await self.controller.run()

    async def stop(self) -> None:
        await self.pods.stop()
        for p in self._pods.values():
            self._cancel_timers(p)
        await self.controller.stop()

    # ------------------------------------------------------------------ watch

    def _on_pod(self, type_: str, pod: Obj, old: Obj | None) -> None:
        meta = pod.get("metadata") or {}
        uid = meta.get("uid")
        if not uid:
            return
        key = (meta.get("namespace") or "default", meta.get("name") or "")
        ready = type_ != "DELETED" and pod_ready(pod)
        if ready and key not in self._ready:
            self._ready.add(key)
            self._resolved(key)
        elif not ready:
            self._ready.discard(key)
        p = self._pods.get(uid)
        if type_ == "DELETED":
            if p is not None:
                p.removed = True
                p.update(pod)
                self.controller.enqueue(uid)
            return
        node = self.nodes.get((pod.get("spec") or {}).get("nodeName") or "")
        if node is None:
            return
        if p is None:
            if uid in self._finished:
                return
            p = _SimPod(uid, key[0], key[1], node, pod)
            self._pods[uid] = p
        else:
            # A version no newer than the one held is this agent's own write coming
            # back (or one its write or re-read already included): nothing to decide.
            stale = 0 < resource_version(pod) <= resource_version(p.pod)  # (0: no number to compare)
            p.update(pod)
            if stale:
                return
        self.controller.enqueue(uid)

    # ------------------------------------------------------------------ one round

    async def _reconcile(self, uid: str) -> Result | None:
        p = self._pods.get(uid)
        if p is None:
            return None
        if p.removed:
            self._teardown(p)
            return None
        pod = p.pod
        problem = podstate.pod_problem(pod)
        if problem is None and p.behaviour is None:
            try:
                p.behaviour = behaviour_of(pod)
            except BehaviourError as e:
                problem = str(e)
        if problem:
            return await self._reject(p, "InvalidPodSpec", problem)
        if p.pod_ip is None:
            p.pod_ip = self._next_ip()
        now = self.clock.now()
        d = podstate.decide(pod, p.observe(), now, pod_ip=p.pod_ip, host_ip=p.node.ip, backoff=self.backoff)
        before = p.writes
        if not await self._write_status(p, d.status):
            return Result(requeue_after=0)
        rewrite = p.writes != before and p.rewrites < 3
        p.rewrites = p.rewrites + 1 if rewrite else 0
        await self._report_backoff(p, d)
        acted = False
        for a in d.actions:
            if isinstance(a, StartContainer):
                acted = await self._start(p, a) or acted
            elif isinstance(a, KillPod):
                acted = await self._kill(p, a) or acted
            elif isinstance(a, DeletePod):
                await self._delete(p)
                return None
        if acted or rewrite:
            return Result(requeue_after=0)
        if d.next_wakeup is not None:
            return Result(requeue_after=self._delay_until(d.next_wakeup, now))
        return None

    def _delay_until(self, when: datetime, now: datetime) -> float:
        """Seconds from the loop's time to ``when``: exact on a virtual clock (the
        timer lands on the microsecond ``decide`` asked for), else a microsecond
        late rather than a rounding early."""
        if isinstance(self.clock, VirtualClock):
            return max(0.0, self.clock.seconds(when) - self.clock.loop.time())
        return max(0.0, (when - now).total_seconds()) + _EPSILON

    # ------------------------------------------------------------------ actions

    async def _start(self, p: _SimPod, a: StartContainer) -> bool:
        """Start an instance; False when one is already starting (startup latency)."""
        rec = p.containers.get(a.name)
        if rec is not None and (rec.current.starting or rec.current.running):
            return False
        spec = p.pod.get("spec") or {}
        container = next((c for c in (spec.get("initContainers") or []) + (spec.get("containers") or [])
                          if isinstance(c, dict) and c.get("name") == a.name), {})
        if rec is None:
            restart_count, last = 0, None
        elif rec.current.started_at is None and rec.current.termination is None:
            restart_count, last = rec.current.restart_count, rec.last_termination
        else:
            restart_count, last = rec.current.restart_count + 1, rec.current.termination
        behaviour = p.behaviour or Behaviour()
        attempt = restart_count
        slot = (p.namespace, p.name, a.name)
        if behaviour.failures is not None and not a.init:
            attempt = self._attempts.get(slot, 0)
            self._attempts[slot] = attempt + 1
        run = run_of(p.pod, container, a.init, attempt, behaviour)
        self._id_counter += 1
        inst = _Instance(a.name, f"sim://{self._id_counter:016x}", restart_count, a.backoff_count, run)
        p.containers[a.name] = _Record(inst, last)
        startup = behaviour.startup if behaviour.startup is not None else self.config.startup
        if startup > 0:
            inst.starting = True
            inst.timer = asyncio.get_running_loop().call_later(startup, self._started, p.uid, inst)
        else:
            self._started(p.uid, inst, notify=False)
        await self._record(p, "Normal", "Created", f"Created container: {a.name}")
        await self._record(p, "Normal", "Started", f"Started container {a.name}")
        return True

    def _started(self, uid: str, inst: _Instance, notify: bool = True) -> None:
        """The instance runs from now on: its end is scheduled."""
        p = self._pods.get(uid)
        rec = p.containers.get(inst.container) if p is not None else None
        if p is None or rec is None or rec.current is not inst:
            return
        inst.starting = False
        inst.timer = None
        inst.started_at = self.clock.now()
        self.started_containers += 1
        loop = asyncio.get_running_loop()
        run = inst.run
        if isinstance(run, WaitFor):
            key = _host_key(run.host, p.namespace)
            if key in self._ready:
                self._end(uid, inst, 0)
            else:
                inst.waiting_for = key
                self._waiters.setdefault(key, set()).add((uid, inst.container))
                inst.timer = loop.call_later(run.timeout, self._end, uid, inst, 1)
        elif math.isfinite(run.duration):
            if run.duration <= 0:
                self._end(uid, inst, run.exit_code, notify=False)
            else:
                inst.timer = loop.call_later(run.duration, self._end, uid, inst, run.exit_code)
        if notify:
            self.controller.enqueue(uid)

    def _resolved(self, key: tuple[str, str]) -> None:
        """``key`` became ready: its waiters exit 0 at their next poll."""
        waiters = self._waiters.pop(key, None)
        if not waiters:
            return
        loop = asyncio.get_running_loop()
        now = self.clock.now()
        for uid, name in sorted(waiters):
            p = self._pods.get(uid)
            rec = p.containers.get(name) if p is not None else None
            inst = rec.current if rec is not None else None
            if inst is None or not inst.running or not isinstance(inst.run, WaitFor) or inst.kill_grace is not None:
                continue
            ran = (now - inst.started_at).total_seconds() if inst.started_at else 0.0
            interval = inst.run.interval
            at = math.ceil(ran / interval - 1e-9) * interval
            if inst.timer is not None:
                inst.timer.cancel()
            inst.waiting_for = None
            inst.timer = loop.call_later(max(0.0, at - ran), self._end, uid, inst, 0)

    def _end(self, uid: str, inst: _Instance, exit_code: int, reason: str = "", notify: bool = True) -> None:
        """The instance's process exited with ``exit_code``."""
        if inst.termination is not None:
            return
        if inst.timer is not None:
            inst.timer.cancel()
            inst.timer = None
        if inst.waiting_for is not None:
            ws = self._waiters.get(inst.waiting_for)
            if ws is not None:
                ws.discard((uid, inst.container))
                if not ws:
                    del self._waiters[inst.waiting_for]
            inst.waiting_for = None
        now = self.clock.now()
        inst.termination = Termination(exit_code=exit_code, finished_at=now, started_at=inst.started_at or now,
                                       reason=reason, container_id=inst.container_id)
        if notify:
            self.controller.enqueue(uid)

    async def _kill(self, p: _SimPod, a: KillPod) -> bool:
        """SIGTERM every running container: each exits ``stop_time`` later (143),
        or is SIGKILLed when the grace ends first (137). A second kill changes
        nothing unless its grace is shorter (as the real agent's kill task).
        True when a container ended at once (the pod is to be looked at again)."""
        loop = asyncio.get_running_loop()
        grace = max(0.0, a.grace_seconds)
        stop = max(0.0, self.config.stop_time)
        ended = signalled = False
        for name, rec in sorted(p.containers.items()):
            inst = rec.current
            if inst.starting:  # never got to run
                if inst.timer is not None:
                    inst.timer.cancel()
                inst.starting = False
                inst.timer = None
                ended = True
                continue
            if not inst.running or (inst.kill_grace is not None and grace >= inst.kill_grace):
                continue
            if inst.kill_grace is None:
                signalled = True
                await self._record(p, "Normal", "Killing", f"Stopping container {name}")
            inst.kill_grace = grace
            if grace <= 0 or stop <= 0:
                self._end(p.uid, inst, self.config.term_exit_code if grace > 0 else 137, notify=False)
                ended = True
                continue
            delay, code = (stop, self.config.term_exit_code) if stop < grace else (grace, 137)
            if inst.timer is not None and inst.timer.when() <= loop.time() + delay:
                continue  # it ends on its own before the signal takes effect
            if inst.timer is not None:
                inst.timer.cancel()
            inst.timer = loop.call_later(delay, self._end, p.uid, inst, code)
        if signalled and a.reason == podstate.DEADLINE_EXCEEDED:
            await self._record(p, "Normal", podstate.DEADLINE_EXCEEDED, podstate.DEADLINE_MESSAGE)
        return ended

    async def _delete(self, p: _SimPod) -> None:
        try:
            await self.client.delete("Pod", p.name, p.namespace, grace_period_seconds=0)
        except NotFound:
            pass
        self._teardown(p)

    def _teardown(self, p: _SimPod) -> None:
        """The pod object is gone: its processes end, its records are forgotten."""
        for rec in p.containers.values():
            if rec.current.running or rec.current.starting:
                self._end(p.uid, rec.current, 137, notify=False)
        self._cancel_timers(p)
        p.removed = True
        self._pods.pop(p.uid, None)
        self._finished[p.uid] = None
        while len(self._finished) > _FINISHED_MEMORY:
            self._finished.pop(next(iter(self._finished)))

    def _cancel_timers(self, p: _SimPod) -> None:
        for rec in p.containers.values():
            if rec.current.timer is not None:
                rec.current.timer.cancel()
                rec.current.timer = None

    async def _reject(self, p: _SimPod, reason: str, message: str) -> Result | None:
        for rec in p.containers.values():
            if rec.current.running:
                self._end(p.uid, rec.current, 137, notify=False)
        status = podstate.rejected_status(p.pod, self.clock.now(), reason, message, host_ip=p.node.ip)
        old = p.pod.get("status") or {}
        if old.get("phase") != "Failed" or old.get("reason") != reason or old.get("message") != message:
            if not await self._write_status(p, status):
                return Result(requeue_after=0)
            await self._record(p, "Warning", reason, message)
        if (p.pod.get("metadata") or {}).get("deletionTimestamp"):
            await self._delete(p)
        return None

    # ------------------------------------------------------------------ status

    async def _write_status(self, p: _SimPod, status: Obj) -> bool:
        """Write unless unchanged; False when the pod moved (re-read) or vanished."""
        outcome, obj = await write_pod_status(self.client, p.pod, status)
        if outcome == "gone":
            p.removed = True
        elif outcome == "moved":
            assert obj is not None  # "moved" comes with the fresh pod
            p.pod = obj
        elif outcome == "written":
            assert obj is not None  # "written" comes with the stored pod
            # Keep the pod we had with the written status and resourceVersion, not
            # the write's result: that is a private copy of the whole pod, and in
            # a burst (informers behind) one per pod (~11 KB each) stays held.
            base = p.pod
            p.update({**base, "metadata": {**(base.get("metadata") or {}),
                                            "resourceVersion": obj["metadata"]["resourceVersion"]},
                      "status": obj.get("status")})
            p.writes += 1
        return outcome in ("unchanged", "written")

    async def _report_backoff(self, p: _SimPod, d: podstate.Decision) -> None:
        for name, _delay in sorted(d.backing_off.items()):
            rec = p.containers.get(name)
            key = (name, rec.current.restart_count if rec else -1)
            if key in p.backoff_reported:
                continue
            p.backoff_reported.add(key)
            await self._record(p, "Warning", "BackOff",
                               f"Back-off restarting failed container {name} in pod {podstate.pod_ref(p.pod)}")

    async def _record(self, p: _SimPod, type_: str, reason: str, message: str) -> None:
        if self.config.events:
            await self.events.record(p.pod, type_, reason, message)

    def _next_ip(self) -> str:
        self._ip_counter += 1
        n = self._ip_counter
        return f"10.{(n >> 16) & 0xFF | 0x80}.{(n >> 8) & 0xFF}.{n & 0xFF}"


def _host_key(host: str, namespace: str) -> tuple[str, str]:
    """``svc``, ``svc.ns``, ``svc.ns.svc[.cluster.local]`` -> (ns, svc): a Kubeflow
    Service is named like the pod it selects."""
    parts = host.split(".")
    if len(parts) >= 2 and parts[1]:
        return (parts[1], parts[0])
    return (namespace, parts[0])
