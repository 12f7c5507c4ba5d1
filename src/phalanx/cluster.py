"""The embedded control plane: store + controllers + scheduler + node agents.

This is the only module that knows every component. Components talk only
through the object API (a LocalClient over the Store), exactly as they would
across machines.
"""
from __future__ import annotations

import asyncio
import logging
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from phalanx.api.admission import admit, plain_admit
from phalanx.api.scheduling import system_priority_classes
from phalanx.client.local import LocalClient
from phalanx.config import ClusterConfig, load_config, make_private_dir
from phalanx.controller.autoscaler.calculator import Readiness
from phalanx.controller.autoscaler.controller import HPAController
from phalanx.controller.autoscaler.decide import Settings as AutoscalerSettings
from phalanx.controller.gc import GarbageCollector
from phalanx.controller.history import HistoryRecorder
from phalanx.controller.job.controller import JobController
from phalanx.controller.job.plan import ReconcileOptions
from phalanx.controller.metrics import OperatorMetrics
from phalanx.controller.namespaces import NamespaceController
from phalanx.controller.podgroup.controller import PodGroupController
from phalanx.gctune import tune_gc
from phalanx.node import commandcheck
from phalanx.node.agent import AgentConfig, NodeAgent, ensure_node
from phalanx.node.cpuusage import PodCpuUsage
from phalanx.node.execctx import LocalExecProvider
from phalanx.node.logjanitor import LogJanitor
from phalanx.node.logs import LogProvider
from phalanx.node.metrics import NodeMetrics
from phalanx.node.network import LocalNetwork
from phalanx.objects.clock import Clock
from phalanx.objects.errors import AlreadyExists
from phalanx.runtime.informer import SharedInformers
from phalanx.scheduler.config import SchedulerConfig
from phalanx.scheduler.metrics import SchedulerMetrics
from phalanx.scheduler.scheduler import Scheduler
from phalanx.store.history import JobHistories
from phalanx.store.namespaces import SYSTEM_NAMESPACES, NamespaceLifecycle
from phalanx.store.priority import PriorityAdmission
from phalanx.store.store import Store

log = logging.getLogger(__name__)

DRAIN_TIMEOUT = 2.0  # seconds a stop waits for the job controller's queued rounds
STOP_TIMEOUT = 10.0  # seconds a stop waits for the stopped components to write what they queued (Events: 5)


class EmbeddedCluster:
    """One process, one machine: everything Phalanx needs to run jobs.

    ``persist=False`` keeps objects in memory only (tests, benchmarks); the
    state directory still holds pod logs and the local network table.
    ``controllers=False`` / ``scheduler=False`` leave out the job controller /
    the gang scheduler with its podgroup controller, so that ``phalanx
    operator`` / ``phalanx scheduler`` can run them as separate processes over
    HTTPS, as on a cluster; the garbage collector (an API-server-side duty),
    the HPA controller (kube-controller-manager's, measuring the pods'
    processes) and the node agents (playing kubelet) always run. ``plain_kubernetes=True``
    admits as a plain kube-apiserver with the CRDs installed does: the job
    kinds get neither the training operator's defaults nor its webhook rules
    (their schema is still checked; ``admission`` is what the API server uses),
    and the API server calls the registered admission webhooks.
    """

    def __init__(
        self,
        home: Path,
        config: ClusterConfig | None = None,
        clock: Clock | None = None,
        persist: bool = True,
        *,
        controllers: bool = True,
        scheduler: bool = True,
        plain_kubernetes: bool = False,
    ) -> None:
        self.home = Path(home)
        make_private_dir(self.home)
        self.config = config or load_config(home=self.home)
        self.clock = clock or Clock()
        self.plain_kubernetes = plain_kubernetes
        self.admission = plain_admit if plain_kubernetes else admit
        self.store = Store(self.home / "state.db" if persist else None, self.clock, admission=self.admission,
                           group_commit=True)
        self.network = LocalNetwork(self.home)
        # First: nothing is allocated for an object refused for its namespace.
        # None of these acts on a status write (creates, spec changes, Service addresses).
        self.store.add_admission_plugin(NamespaceLifecycle(self.store), status_writes=False)
        # kube-apiserver's, so in plain-Kubernetes mode too: pod priorities from their PriorityClass.
        self.store.add_admission_plugin(PriorityAdmission(self.store), status_writes=False)
        self.store.add_admission_plugin(self.network.admission_plugin, status_writes=False)
        self.store.add_admission_plugin(commandcheck.admission_plugin, status_writes=False)
        # ``client``: the API's (and the user's) client, every write admitted in full; ``internal``: the
        # components' own, trusted (their writes skip the schema decoding, see Store.create).
        self.client = LocalClient(self.store)
        self.internal = LocalClient(self.store, trusted=True)
        self.log_provider = LogProvider(self.home, self.client)
        self.log_janitor = LogJanitor(self.internal, self.home)
        # `phalanx exec`'s argv up to the pod: the MPI launcher's rsh agent and the API's pods/exec run it.
        exec_command = (sys.executable, "-m", "phalanx.cli.execcmd", "--home", str(self.home.absolute()))
        self.exec_provider = LocalExecProvider(self.home, exec_command)
        options = ReconcileOptions(
            gang_scheduler="volcano",
            local_runtime=True,
            resolvable_names=self.network.nss_wrapper_available(),
            init_container_command=[sys.executable, "-m", "phalanx.node.initwait"],
            default_backoff_limit=self.config.operator.default_backoff_limit,
            # MPI: the launcher's rsh agent and its wait for the workers, with this interpreter and home.
            exec_command=exec_command,
            pod_wait_command=(sys.executable, "-m", "phalanx.node.podwait", "--home", str(self.home.absolute())),
        )
        # The series of this control plane's operator, scheduler and node agents (the API server serves them).
        self.metrics_registry = CollectorRegistry()
        # One informer per kind for every component (each event decoded and cached once).
        self.informers = SharedInformers(self.internal)
        self.gc = GarbageCollector(self.internal, informers=self.informers)
        # The gang scheduler and, as Volcano's controller manager runs beside it, the
        # podgroup controller: both serve every name of ``config.scheduler_names``.
        own_name, *other_names = self.config.scheduler_names
        sched_config = replace(self.config.scheduler or SchedulerConfig(), scheduler_name=own_name,
                               extra_scheduler_names=tuple(other_names))
        self.scheduler: Scheduler | None = (
            Scheduler(self.internal, self.clock, sched_config, name=own_name,
                      metrics=SchedulerMetrics(self.metrics_registry), informers=self.informers) if scheduler else None)
        self.podgroups: PodGroupController | None = (
            PodGroupController(self.internal, sched_config.scheduler_names, informers=self.informers)
            if scheduler else None)
        self.namespaces = NamespaceController(self.internal)
        # Every job's states and events, for `phalanx timeline` and describe (also in split mode).
        self.histories = JobHistories(self.home / "history")
        self.history = HistoryRecorder(self.internal, self.histories, self.clock, informers=self.informers)
        self.jobs: JobController | None = (
            JobController(self.internal, self.clock, options, workers=self.config.operator.workers,
                          metrics=OperatorMetrics(self.metrics_registry), informers=self.informers)
            if controllers else None)
        agent_cfg = AgentConfig(
            backoff_base=self.config.agent.backoff_base,
            backoff_cap=self.config.agent.backoff_cap,
            environments=tuple(self.config.environments),
        )
        node_metrics = NodeMetrics(self.metrics_registry)
        self.agents = [
            NodeAgent(self.internal, self.clock, n.name, self.home, self.network, agent_cfg, metrics=node_metrics)
            for n in self.config.nodes
        ]
        # kube-controller-manager's HPA controller, on the pods' cpu as their processes use it.
        hpa = self.config.autoscaler
        self.pod_cpu = PodCpuUsage(lambda: [a.runtime for a in self.agents], self.clock, hpa.sync_period)
        self.autoscaler = HPAController(self.internal, self.clock, self.pod_cpu.usage, AutoscalerSettings(
            sync_period=hpa.sync_period, downscale_stabilization=hpa.downscale_stabilization,
            tolerance=hpa.tolerance, readiness=Readiness(hpa.cpu_initialization_period, hpa.initial_readiness_delay)))
        self._tasks: list[asyncio.Task[Any]] = []

    async def start(self) -> None:
        tune_gc()
        for name in SYSTEM_NAMESPACES:
            await self._ensure_namespace(name)
        for pc in system_priority_classes():  # as kube-apiserver's post-start hook creates them
            await self._ensure(pc)
        for n in self.config.nodes:
            await ensure_node(self.client, n.name, n.capacity())
        # Pods still running under their shims (the control plane was stopped
        # with kill_pods=False, or crashed) are adopted before any controller
        # or the log janitor acts on them.
        for a in self.agents:
            await a.prepare()
        components = [c for c in (self.gc, self.namespaces, self.history, self.podgroups, self.scheduler, self.jobs,
                                  self.autoscaler, self.log_janitor, *self.agents) if c is not None]
        for c in components:
            self._tasks.append(asyncio.create_task(c.run(), name=type(c).__name__))
        # Fail fast if a component died while starting.
        await asyncio.sleep(0)
        for t in self._tasks:
            if t.done() and t.exception():
                raise t.exception()  # type: ignore[misc]

    async def _ensure_namespace(self, name: str) -> None:
        await self._ensure({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    async def _ensure(self, obj: dict[str, Any]) -> None:
        try:
            await self.client.create(obj)
        except AlreadyExists:
            pass

    async def stop(self, kill_pods: bool = True) -> None:
        """Stop every component. With ``kill_pods`` the agents terminate the
        processes they run (SIGTERM, grace, SIGKILL) before returning; without,
        the pods keep running under their shims and the next start adopts them
        (as after a crash of the control plane)."""
        # The job controller finishes the rounds queued now (their status and
        # Events are not lost), then it and the scheduler stop first: the pods the agents
        # stop are marked stopped by the shutdown (not failed), and nothing must
        # act on that before the next start.
        if self.jobs is not None:
            await self.jobs.drain(DRAIN_TIMEOUT)
        for c in (self.jobs, self.autoscaler, self.scheduler, self.podgroups):
            if c is not None:
                await c.stop()
        for a in self.agents:
            await a.stop(kill_pods=kill_pods)
        for housekeeper in (self.gc, self.namespaces, self.log_janitor, self.history):
            if housekeeper is not None:
                await housekeeper.stop()
        # Each component's run returns once it is stopped, after writing what it had queued (the scheduler's
        # bindings and Events): waited for before the store closes, then whatever still runs is cancelled.
        if self._tasks:
            await asyncio.wait(self._tasks, timeout=STOP_TIMEOUT)
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        self.store.close()
        self.network.close()  # its machine-wide claims too (pods left running keep their ports bound)

    async def __aenter__(self) -> "EmbeddedCluster":
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
