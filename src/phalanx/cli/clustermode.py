"""`phalanx operator` and `phalanx scheduler`: the job controller and the gang
scheduler as processes of their own, over a ``KubeClient`` — against a
Kubernetes cluster, or against ``phalanx up --no-controllers --no-scheduler``.

Local runtime (``--local-runtime auto``): Nodes whose
``status.nodeInfo.containerRuntimeVersion`` starts with ``phalanx://`` are
Phalanx node agents, which run pods as processes on one machine, sharing its
ports. Against those the operator builds pods as the embedded control plane
does (host ports and Service addresses from the local network, the
``phalanx.node.initwait`` init container); against real kubelets it builds
them as the original does (DNS names, declared ports, the nslookup init
container).
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from dataclasses import dataclass, replace
from typing import Any, Callable, Coroutine

from prometheus_client import GC_COLLECTOR, PLATFORM_COLLECTOR, CollectorRegistry, ProcessCollector

from phalanx.api.registry import JOB_KINDS
from phalanx.client.interface import Client
from phalanx.client.kube import DEFAULT_BURST, DEFAULT_QPS, KubeClient
from phalanx.client.kubeconfig import resolve
from phalanx.client.scoped import NamespaceScoped
from phalanx.controller.job.controller import JobController
from phalanx.controller.job.plan import ReconcileOptions
from phalanx.controller.metrics import OperatorMetrics
from phalanx.controller.podgroup.controller import PodGroupController
from phalanx.controller.webhook.rotator import CertSettings
from phalanx.controller.webhook.server import Webhooks, WebhookSettings
from phalanx.node.home import phalanx_home
from phalanx.node.nsswrapper import nss_wrapper_available
from phalanx.objects.clock import Clock
from phalanx.objects.errors import ApiError, NotFound
from phalanx.objects.names import is_dns1123_label, is_dns1123_subdomain, is_dns_label
from phalanx.runtime.events import EventRecorder
from phalanx.runtime.gcpolicy import tune_for_long_running
from phalanx.runtime.informer import SharedInformers
from phalanx.runtime.leaderelection import ElectionConfig, LeaderElectionLost, LeaderElector, default_namespace
from phalanx.runtime.probes import Check, OpsEndpoints
from phalanx.scheduler.config import SchedulerConfig
from phalanx.scheduler.metrics import SchedulerMetrics
from phalanx.scheduler.scheduler import Scheduler
from phalanx.sim.units import DurationError, parse_duration

log = logging.getLogger(__name__)

PHALANX_RUNTIME_PREFIX = "phalanx://"
INITWAIT_COMMAND = [sys.executable, "-m", "phalanx.node.initwait"]
# Local runtime, MPI: the launcher's rsh agent and its wait for the workers, with this interpreter.
EXEC_COMMAND = (sys.executable, "-m", "phalanx.cli.execcmd")  # phalanx exec without the whole CLI
PODWAIT_COMMAND = (sys.executable, "-m", "phalanx.node.podwait")
DEFAULT_MPI_KUBECTL_DELIVERY_IMAGE = "kubeflow/kubectl-delivery:latest"


@dataclass
class Connection:
    """How to reach the API server (kubectl's flags)."""

    kubeconfig: str | None = None
    context: str | None = None
    server: str | None = None
    token: str | None = None
    certificate_authority: str | None = None
    in_cluster: bool | None = None
    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST

    def client(self, field_manager: str = "phalanx") -> KubeClient:
        """A KubeClient; raises ``kubeconfig.ConfigError`` when nothing is usable.
        ``$PHALANX_HOME/kubeconfig`` (what ``phalanx up`` writes) is the last resort."""
        cfg = resolve(self.kubeconfig, self.context, server=self.server, token=self.token,
                      ca_cert=self.certificate_authority, in_cluster=self.in_cluster,
                      fallbacks=(phalanx_home() / "kubeconfig",))
        return KubeClient(cfg, qps=self.qps, burst=self.burst, field_manager=field_manager)


def parse_gang_scheduler(value: str | None) -> str | None:
    """The original's ``--gang-scheduler-name``: empty or ``None`` disables gang scheduling."""
    v = (value or "").strip()
    return None if v == "" or v.lower() == "none" else v


def parse_kinds(values: list[str] | None) -> list[str]:
    """``--enable-scheme`` values (any case, kind or plural: ``mpijob``, ``XGBoostJobs``,
    comma-separated or repeated) to job kinds, in the order given; all of
    ``JOB_KINDS`` by default."""
    if not values:
        return list(JOB_KINDS)
    out: list[str] = []
    by_name = {k.lower(): k for k in JOB_KINDS} | {k.lower() + "s": k for k in JOB_KINDS}
    for raw in values:
        for v in raw.split(","):
            v = v.strip().lower()
            if not v:
                continue
            kind = by_name.get(v)
            if kind is None:
                raise ValueError(f'--enable-scheme: unsupported value "{v}": supported values: '
                                 + ", ".join(f'"{k.lower()}"' for k in JOB_KINDS))
            if kind not in out:
                out.append(kind)
    return out


def parse_image(flag: str, value: str) -> str:
    """An image reference given on the command line: non-empty, no whitespace."""
    if not value or any(c.isspace() for c in value):
        raise ValueError(f"{flag}: must be a non-empty image reference without spaces, got {value!r}")
    return value


def is_phalanx_node(node: Any) -> bool:
    status = node.get("status") if isinstance(node, dict) else None
    info = status.get("nodeInfo") if isinstance(status, dict) else None
    runtime = info.get("containerRuntimeVersion") if isinstance(info, dict) else None
    return isinstance(runtime, str) and runtime.startswith(PHALANX_RUNTIME_PREFIX)


def local_runtime_from_nodes(nodes: list[dict]) -> bool:
    """True when there is at least one Node and every Node is a Phalanx node agent."""
    return bool(nodes) and all(is_phalanx_node(n) for n in nodes)


async def detect_local_runtime(client: Client, retry_cap: float = 5.0) -> bool:
    """``--local-runtime auto``: read the Nodes; cluster mode when the server refuses
    (no RBAC for Nodes). An unreachable server is waited for, not taken as an answer."""
    delay = 0.2
    while True:
        try:
            nodes = (await client.list("Node")).items
        except ApiError as e:
            if e.code in (429, 500, 502, 503, 504):
                log.warning("operator: the API server is not answering (%s); retrying in %.1fs", e.message, delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, retry_cap)
                continue
            log.info("operator: cannot list nodes (%s); assuming a Kubernetes cluster", e.message)
            return False
        return local_runtime_from_nodes(nodes)


def reconcile_options(gang_scheduler: str | None, local_runtime: bool, *, cluster_domain: str | None = None,
                      init_container_image: str = "alpine:3.10", init_container_max_tries: int = 100,
                      default_backoff_limit: int = 0,
                      mpi_kubectl_delivery_image: str = DEFAULT_MPI_KUBECTL_DELIVERY_IMAGE) -> ReconcileOptions:
    """Cluster mode: DNS names, declared ports, the original's init containers
    (PyTorch's nslookup, MPI's kubectl-delivery). Local runtime: as the
    embedded control plane (``cluster.EmbeddedCluster``)."""
    if local_runtime:
        return ReconcileOptions(gang_scheduler=gang_scheduler, local_runtime=True,
                                resolvable_names=nss_wrapper_available(),
                                init_container_command=list(INITWAIT_COMMAND),
                                default_backoff_limit=default_backoff_limit,
                                exec_command=EXEC_COMMAND, pod_wait_command=PODWAIT_COMMAND)
    return ReconcileOptions(gang_scheduler=gang_scheduler, local_runtime=False, resolvable_names=True,
                            init_container_command=None, default_backoff_limit=default_backoff_limit,
                            cluster_domain=cluster_domain or None, init_container_image=init_container_image,
                            init_container_max_tries=init_container_max_tries,
                            mpi_kubectl_delivery_image=mpi_kubectl_delivery_image)


async def podgroup_crd_missing(client: Client) -> str | None:
    """The original exits when the PodGroup CRD is missing (``validateCRD``); say why."""
    try:
        await client.list("PodGroup", "default")
    except NotFound:
        return ("the PodGroup CRD (podgroups.scheduling.volcano.sh/v1beta1) is not installed: install Volcano, "
                "or `phalanx install | kubectl apply -f -`, or run with --gang-scheduler-name ''")
    except ApiError as e:
        log.warning("operator: checking the PodGroup CRD: %s", e.message)
    return None


async def run_until_signalled(start: Callable[[], Coroutine[Any, Any, Any]], stop: Callable[[], Any],
                              stop_event: asyncio.Event | None = None) -> None:
    """Run ``start()`` until SIGTERM/SIGINT (or ``stop_event``), then ``stop()``."""
    event = stop_event or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, event.set)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - not the main thread
            pass
    task = asyncio.create_task(start())
    waiter = asyncio.create_task(event.wait())
    done, _ = await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    res = stop()
    if asyncio.iscoroutine(res):
        await res
    waiter.cancel()
    try:
        await asyncio.wait_for(task, 10)
    except asyncio.TimeoutError:
        task.cancel()
    if task in done and task.exception() is not None:
        raise task.exception()  # type: ignore[misc]


Address = tuple[str, int]  # (host, port); host "" is every interface


def process_registry() -> CollectorRegistry:
    """A program's registry: its own series plus the process and Python runtime ones
    (Go programs expose process_* and go_*)."""
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    for shared in (PLATFORM_COLLECTOR, GC_COLLECTOR):
        registry.register(shared)
    return registry


async def start_ops(registry: CollectorRegistry, readyz: dict[str, Check], metrics_address: Address | None,
                    health_address: Address | None, say: Callable[[str], None]) -> OpsEndpoints:
    """The metrics and probe servers; one whose address cannot be bound stays off (said why)."""
    ops = OpsEndpoints(registry, readyz)
    for problem in await ops.start(metrics_address, health_address):
        say(f"warning: not serving {problem}")
    if ops.metrics_url:
        say(f"serving metrics on {ops.metrics_url}/metrics")
    if ops.health_url:
        say(f"serving probes on {ops.health_url}/healthz and /readyz")
    return ops


@dataclass
class LeaderElection:
    """``--leader-elect``: the Lease ``namespace/name`` (namespace None: the pod's, else
    ``default``) and client-go's durations."""

    name: str
    namespace: str | None = None
    config: ElectionConfig = ElectionConfig()


def leader_election(enabled: bool, name: str, namespace: str | None, durations: tuple[str, str, str],
                    flags: tuple[str, str, str, str, str]) -> LeaderElection | None:
    """The ``--leader-elect`` flags (``flags``: the name, namespace and three duration flags as
    spelled on the command line) to settings; ValueError naming the flag and the rule."""
    if not enabled:
        return None
    name_flag, ns_flag, *duration_flags = flags
    for flag, value, errors in ((name_flag, name, is_dns1123_subdomain(name)),
                                (ns_flag, namespace, is_dns1123_label(namespace) if namespace else [])):
        if errors:
            raise ValueError(f"{flag}: invalid value {value!r}: {'; '.join(errors)}")
    seconds = []
    for flag, text in zip(duration_flags, durations):
        try:
            seconds.append(parse_duration(text))
        except DurationError as e:
            raise ValueError(f"{flag}: {e}") from None
    config = ElectionConfig(seconds[0], seconds[1], seconds[2])
    config.check((duration_flags[0], duration_flags[1], duration_flags[2]))
    return LeaderElection(name, namespace or None, config)


@dataclass
class Leading:
    """Whether this process acts now (always, without leader election); read by its readiness check."""

    now: bool


async def run_elected(client: Client, election: LeaderElection | None, what: str, component: str,
                      start: Callable[[], Coroutine[Any, Any, Any]], stop: Callable[[], Any],
                      say: Callable[[str], None], stop_event: asyncio.Event | None,
                      leading: Leading | None = None) -> int:
    """``start()`` until signalled; with leader election only while leading: nothing runs
    before, a lost lease stops it and answers 1 (controller-runtime: "leader election lost"),
    a signal stops it and then releases the lease."""
    if election is None:
        await run_until_signalled(start, stop, stop_event)
        return 0
    ns = election.namespace or default_namespace()
    elector = LeaderElector(client, ns, election.name, config=election.config, clock=Clock(),
                            recorder=EventRecorder(client, component))
    lease = f"lease {ns}/{election.name} as {elector.identity}"
    say(f"phalanx {what}: leader election: {lease}; waiting to lead")

    async def stop_work() -> None:
        res = stop()
        if asyncio.iscoroutine(res):
            await res

    def on_leading() -> None:
        if leading is not None:
            leading.now = True
        say(f"phalanx {what}: leading: {lease}")

    async def lead() -> None:
        await elector.run_while_leading(start, stop_work, on_leading=on_leading)

    try:
        await run_until_signalled(lead, elector.stop, stop_event)
    except LeaderElectionLost as e:
        say(f"error: {e}")
        return 1
    return 0


@dataclass
class OperatorSettings:
    gang_scheduler: str | None = "volcano"
    namespace: str | None = None
    kinds: tuple[str, ...] = JOB_KINDS
    workers: int = 1
    local_runtime: str = "auto"  # auto | true | false
    cluster_domain: str | None = None
    init_container_image: str = "alpine:3.10"
    init_container_max_tries: int = 100
    default_backoff_limit: int = 0
    mpi_kubectl_delivery_image: str = DEFAULT_MPI_KUBECTL_DELIVERY_IMAGE
    leader_election: LeaderElection | None = None
    webhook: WebhookSettings | None = None  # None: no webhook server (--disable-webhook)
    metrics_address: Address | None = None  # --metrics-bind-address; None: off
    health_address: Address | None = None  # --health-probe-bind-address; None: off


SERVICE_ACCOUNT_NAMESPACE_FILE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"
DEFAULT_OPERATOR_NAMESPACE = "phalanx-system"  # phalanx install's


def operator_namespace(sa_file: str = SERVICE_ACCOUNT_NAMESPACE_FILE) -> str:
    """Where the operator's own objects live (the webhook's Secret): ``$POD_NAMESPACE``,
    else the pod's service account namespace, else phalanx install's namespace."""
    env = os.environ.get("POD_NAMESPACE", "").strip()
    if env:
        return env
    try:
        with open(sa_file) as f:
            ns = f.read().strip()
    except OSError:
        ns = ""
    return ns or DEFAULT_OPERATOR_NAMESPACE


def webhook_settings(host: str, port: int, cert_dir: str, rotate: bool, service_name: str, secret_name: str,
                     namespace: str | None = None) -> WebhookSettings:
    """The webhook server's settings from the operator's flags; ValueError naming the flag."""
    for flag, value in (("--webhook-service-name", service_name), ("--webhook-secret-name", secret_name)):
        if not is_dns_label(value):
            raise ValueError(f"{flag}: must be a DNS label (lowercase letters, digits, '-'), got {value!r}")
    host, cert_dir = host.strip(), cert_dir.strip()
    if not host or not cert_dir:
        raise ValueError("--webhook-host and --webhook-cert-dir must not be empty")
    certs = CertSettings(namespace=namespace or operator_namespace(), secret_name=secret_name,
                         service_name=service_name, cert_dir=cert_dir) if rotate else None
    return WebhookSettings(host=host, port=port, cert_dir=cert_dir, rotate=rotate, certs=certs)


async def run_operator(conn: Connection, settings: OperatorSettings, say: Callable[[str], None],
                       stop_event: asyncio.Event | None = None) -> int:
    """The job controller until signalled; 1 when it cannot start."""
    client = conn.client("training-operator")
    tune_for_long_running()
    try:
        scoped: Client = NamespaceScoped(client, settings.namespace) if settings.namespace else client
        if settings.local_runtime == "auto":
            local = await detect_local_runtime(client)
        else:
            local = settings.local_runtime == "true"
        if settings.gang_scheduler:
            why = await podgroup_crd_missing(scoped)
            if why:
                say(f"error: {why}")
                return 1
        options = reconcile_options(settings.gang_scheduler, local, cluster_domain=settings.cluster_domain,
                                    init_container_image=settings.init_container_image,
                                    init_container_max_tries=settings.init_container_max_tries,
                                    default_backoff_limit=settings.default_backoff_limit,
                                    mpi_kubectl_delivery_image=settings.mpi_kubectl_delivery_image)
        registry = process_registry()
        jobs = JobController(scoped, Clock(), options, kinds=settings.kinds, workers=settings.workers,
                             metrics=OperatorMetrics(registry))
        # A replica waiting to lead is ready (it serves webhooks and probes): only a leader syncs informers.
        leading = Leading(settings.leader_election is None)
        ops = await start_ops(registry, {"informer-sync": lambda: not leading.now or jobs.synced()},
                              settings.metrics_address, settings.health_address, say)
        say(f"phalanx operator: {client.server}; kinds {', '.join(settings.kinds)}; "
            f"gang scheduler {settings.gang_scheduler or 'off'}; "
            f"namespace {settings.namespace or 'all'}; "
            f"runtime {'local (Phalanx nodes)' if local else 'Kubernetes'}")
        try:
            if settings.webhook is None:
                return await run_elected(client, settings.leader_election, "operator", "training-operator",
                                         jobs.run, jobs.stop, say, stop_event, leading)
            # Every replica serves the webhooks, leader or not (as the original's manager does).
            webhooks = Webhooks(client, Clock(), settings.webhook, say)
            served = asyncio.create_task(webhooks.run())
            try:
                return await run_elected(client, settings.leader_election, "operator", "training-operator",
                                         jobs.run, jobs.stop, say, stop_event, leading)
            finally:
                await webhooks.stop()
                try:
                    await asyncio.wait_for(served, 10)
                except asyncio.TimeoutError:
                    served.cancel()
        finally:
            await ops.stop()
    finally:
        await client.close()


@dataclass
class SchedulerSettings:
    scheduler_name: str = "volcano"
    default_queue: str = "default"
    period: float = 1.0
    leader_election: LeaderElection | None = None
    metrics_address: Address | None = None  # --listen-address; None: off
    health_address: Address | None = None  # --healthz-address; None: off
    config: SchedulerConfig | None = None  # --scheduler-conf's actions, tiers and arguments; None: the defaults
    config_file: str | None = None


async def run_scheduler(conn: Connection, settings: SchedulerSettings, say: Callable[[str], None],
                        stop_event: asyncio.Event | None = None) -> int:
    """The gang scheduler until signalled: schedules pods whose schedulerName is its
    own, and (Volcano's controller manager's part) gives those without a PodGroup one."""
    client = conn.client("phalanx-scheduler")
    tune_for_long_running()
    try:
        config = replace(settings.config or SchedulerConfig(), scheduler_name=settings.scheduler_name,
                         default_queue=settings.default_queue)
        registry = process_registry()
        shared = SharedInformers(client)  # one Pod watch for both
        sched = Scheduler(client, Clock(), config, name=settings.scheduler_name, period=settings.period,
                          metrics=SchedulerMetrics(registry), informers=shared)
        groups = PodGroupController(client, config.scheduler_names, informers=shared)
        leading = Leading(settings.leader_election is None)
        ops = await start_ops(registry,
                              {"informer-sync": lambda: not leading.now or (sched.synced() and groups.pods.synced)},
                              settings.metrics_address, settings.health_address, say)
        say(f"phalanx scheduler: {client.server}; scheduler name {settings.scheduler_name}; "
            f"default queue {settings.default_queue}"
            + (f"; configuration {settings.config_file} (actions: {', '.join(config.actions)})"
               if settings.config_file else ""))

        async def run_both() -> None:
            await asyncio.gather(sched.run(), groups.run())

        async def stop_both() -> None:
            await sched.stop()
            await groups.stop()

        try:
            return await run_elected(client, settings.leader_election, "scheduler", settings.scheduler_name,
                                     run_both, stop_both, say, stop_event, leading)
        finally:
            await ops.stop()
    finally:
        await client.close()


def configure_logging(verbose: int) -> None:
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("phalanx.client.requests", "httpx2", "httpcore2"):  # one line per request: only with -vv
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose >= 2 else logging.WARNING)


def env_cluster_domain() -> str | None:
    """The original reads ``CUSTOM_CLUSTER_DOMAIN`` from its environment."""
    return os.environ.get("CUSTOM_CLUSTER_DOMAIN") or None
