"""`phalanx`: the command line, kubectl-shaped.

Every command talks to a control plane over its HTTP API (see
``controlplane.py``). ``run`` starts an embedded one in-process when none is up.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import NoReturn, Optional

import typer

from phalanx.api import registry
from phalanx.cli import cmdutil, objects
from phalanx.cli.controlplane import (
    export_line,
    mode_line,
    running_endpoint,
    serve_forever,
    start_daemon,
    stop_daemon,
)
from phalanx.cli.controlplane import home as phalanx_home_dir
from phalanx.cli.lazy import LazyConsole, lazy_module
from phalanx.objects.errors import ApiError

# Loaded by the commands that run a control plane or a job; the object commands need neither.
asyncio = lazy_module("asyncio")

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Run Kubeflow training jobs, gang-scheduled, on this machine.\n\n" + cmdutil.EXIT_CODES_HELP)
err = LazyConsole(stderr=True, highlight=False, soft_wrap=True)
out = LazyConsole(highlight=False, soft_wrap=True)

EXIT_INVALID = cmdutil.EXIT_INVALID
# Client rate limits of the cluster-mode processes (Volcano's scheduler defaults to 2000/2000,
# client-go to 5/10; these suit a shared API server and keep gangs of hundreds of pods quick).
DEFAULT_OPERATOR_QPS, DEFAULT_OPERATOR_BURST = 50.0, 100
DEFAULT_SCHEDULER_QPS, DEFAULT_SCHEDULER_BURST = 200.0, 400
# The original's --leader-election-id default (training-operator's main.go).
DEFAULT_LEADER_ELECTION_ID = "1ca428e5.training-operator.kubeflow.org"
_LEASE_HELP = "leader election: {what} (a duration: 15s, 1.5s, 500ms)"


def _print_version(value: bool) -> None:
    if value:
        objects.version(client_only=False)
        raise typer.Exit(cmdutil.EXIT_OK)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                 help="print the client's version (and the server's, when one is running)"),
) -> None:
    pass


# ---------------------------------------------------------------- helpers

def _fail(msg: str, code: int = 1) -> NoReturn:
    err.print(msg, markup=False)
    raise typer.Exit(code)


def _load_and_check(path: str, namespace: str | None) -> list[dict]:
    """Parse, default and validate every document before anything is sent, so
    a bad file changes nothing (exit 2 with the field and the rule)."""
    # Lazy for start-up speed (as every import in a command below): only the commands that need them load them.
    from phalanx.api.admission import admit
    from phalanx.api.manifest import load_manifests

    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
    except OSError as e:
        _fail(f"error: cannot read {path}: {e.strerror}", EXIT_INVALID)
    try:
        docs = load_manifests(text, source=path)
    except ApiError as e:
        _fail(f"error: {e.message}", EXIT_INVALID)
    if not docs:
        _fail(f"error: no objects passed to apply (file {path} is empty)", EXIT_INVALID)
    failed = False
    for d in docs:
        if namespace and registry.lookup(d.get("kind", "")) and registry.by_kind(d["kind"]).namespaced:
            d.setdefault("metadata", {}).setdefault("namespace", namespace)
        try:
            admit(json.loads(json.dumps(d)))
        except ApiError as e:
            err.print(cmdutil.api_error_text(e, "creating", path), markup=False)
            failed = True
    if failed:
        raise typer.Exit(EXIT_INVALID)
    return docs


_SCHEDULER_CONF_HELP = ("Volcano's volcano-scheduler.conf: actions, tiers of plugins and their arguments "
                        "(default: Phalanx's; see --print-config)")


def _scheduler_conf(path: str):
    """The file's SchedulerConfig, read before anything starts; a bad file exits 2 naming it and the field."""
    from phalanx.scheduler.conffile import SchedulerConfError, load_scheduler_conf  # lazy for start-up speed

    try:
        return load_scheduler_conf(path)
    except SchedulerConfError as e:
        for line in str(e).splitlines():
            err.print(f"error: --scheduler-conf: {line}", markup=False)
        raise typer.Exit(EXIT_INVALID) from None


# ---------------------------------------------------------------- control plane

@app.command()
def up(
    port: int = typer.Option(0, help="TCP port on 127.0.0.1 (0: any free port)"),
    controllers: bool = typer.Option(True, "--controllers/--no-controllers",
                                     help="run the job controller (--no-controllers: `phalanx operator` runs it)"),
    scheduler: bool = typer.Option(True, "--scheduler/--no-scheduler",
                                   help="run the gang scheduler (--no-scheduler: `phalanx scheduler` runs it)"),
    plain_kubernetes: bool = typer.Option(
        False, "--plain-kubernetes",
        help="admit as a plain kube-apiserver with the CRDs: no Kubeflow defaults or webhook rules for the job "
             "kinds (schemas still checked); registered admission webhooks are called"),
    scheduler_conf: Optional[str] = typer.Option(None, "--scheduler-conf", help=_SCHEDULER_CONF_HELP),
) -> None:
    """Start a background control plane (state in $PHALANX_HOME); print the line that points kubectl at it."""
    if scheduler_conf is not None:
        if not scheduler:
            _fail("error: --scheduler-conf: configures the embedded scheduler, which --no-scheduler leaves out "
                  "(give the file to `phalanx scheduler`)", EXIT_INVALID)
        _scheduler_conf(scheduler_conf)
        scheduler_conf = str(Path(scheduler_conf).absolute())
    home = phalanx_home_dir()
    ep = running_endpoint(home)  # asked through the API; a dying one is waited for
    if ep is not None:
        err.print(f"control plane already running (pid {ep.pid}) at {ep.url}", markup=False)
        if scheduler_conf is not None:
            err.print("warning: --scheduler-conf: not applied: the running control plane keeps its scheduler "
                      "configuration (`phalanx down` first)", markup=False)
    else:
        try:
            ep = start_daemon(home, port, controllers=controllers, scheduler=scheduler,
                              plain_kubernetes=plain_kubernetes, scheduler_conf=scheduler_conf)
        except RuntimeError as e:
            _fail(f"error: {e}")
        err.print(f"control plane running (pid {ep.pid}) at {ep.url}; state in {home}; "
                  f"{mode_line(controllers, scheduler, plain_kubernetes)}", markup=False)
    out.print(export_line(home), markup=False)


@app.command()
def down() -> None:
    """Stop the background control plane (its pods are stopped too)."""
    if stop_daemon(phalanx_home_dir()):
        out.print("control plane stopped", markup=False)
    else:
        out.print("no control plane running", markup=False)


@app.command(hidden=True)
def serve(
    port: int = typer.Option(0),
    controllers: bool = typer.Option(True, "--controllers/--no-controllers"),
    scheduler: bool = typer.Option(True, "--scheduler/--no-scheduler"),
    plain_kubernetes: bool = typer.Option(False, "--plain-kubernetes"),
    scheduler_conf: Optional[str] = typer.Option(None, "--scheduler-conf"),
) -> None:
    """Run the control plane in the foreground (used by `up`)."""
    sched_config = _scheduler_conf(scheduler_conf) if scheduler_conf is not None else None
    asyncio.run(serve_forever(phalanx_home_dir(), port, controllers=controllers, scheduler=scheduler,
                              plain_kubernetes=plain_kubernetes, scheduler_config=sched_config))


# ---------------------------------------------------------------- cluster mode

_CONN_HELP = ("kubeconfig file (default: in-cluster service account, $KUBECONFIG, ~/.kube/config, "
              "$PHALANX_HOME/kubeconfig)")


def _connection(kubeconfig: Optional[str], context: Optional[str], server: Optional[str], token: Optional[str],
                certificate_authority: Optional[str], in_cluster: Optional[bool], qps: float, burst: int):
    from phalanx.cli.clustermode import Connection  # lazy for start-up speed: loads controllers and scheduler

    if qps > 0 and burst < 1:
        _fail("error: --kube-api-burst: must be at least 1 when --kube-api-qps is set", EXIT_INVALID)
    return Connection(kubeconfig, context, server, token, certificate_authority, in_cluster, qps, burst)


def _ops_addresses(metrics: tuple[str, str], health: tuple[str, str]):
    """The metrics and probe addresses of a cluster-mode program (None: off); ValueError names the flag.
    Run by hand they listen on loopback; the generated Deployments pass ``:port``."""
    from phalanx.runtime.probes import parse_bind_address  # lazy for start-up speed: aiohttp, prometheus_client

    return parse_bind_address(*metrics), parse_bind_address(*health)


def _run_cluster_mode(coro) -> None:
    from phalanx.client.kubeconfig import ConfigError  # lazy for start-up speed

    try:
        code = asyncio.run(coro)
    except ConfigError as e:
        _fail(f"error: {e}")
    except KeyboardInterrupt:
        code = 130
    raise typer.Exit(code)


@app.command()
def operator(
    kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help=_CONN_HELP),
    context: Optional[str] = typer.Option(None, "--context", help="kubeconfig context (default: its current one)"),
    server: Optional[str] = typer.Option(None, "--server", help="API server URL (with --token)"),
    token: Optional[str] = typer.Option(None, "--token", help="bearer token for --server"),
    certificate_authority: Optional[str] = typer.Option(None, "--certificate-authority",
                                                        help="CA file for --server"),
    in_cluster: Optional[bool] = typer.Option(None, "--in-cluster/--no-in-cluster",
                                              help="force (or refuse) the pod's service account"),
    gang_scheduler_name: str = typer.Option(
        "volcano", "--gang-scheduler-name",
        help="schedulerName of the pods, with a Volcano PodGroup per job; '' or None: no gang scheduling"),
    namespace: Optional[str] = typer.Option(None, "--namespace", envvar="KUBEFLOW_NAMESPACE",
                                            help="watch this namespace only (default: all)"),
    enable_scheme: Optional[list[str]] = typer.Option(None, "--enable-scheme",
                                                      help="job kinds to run (default: all): pytorchjob, tfjob, "
                                                           "xgboostjob, paddlejob, jaxjob, mpijob"),
    controller_threads: int = typer.Option(1, "--controller-threads", min=1, help="concurrent reconciles"),
    kube_api_qps: float = typer.Option(DEFAULT_OPERATOR_QPS, "--kube-api-qps",
                                       help="requests per second (0: no limit)"),
    kube_api_burst: int = typer.Option(DEFAULT_OPERATOR_BURST, "--kube-api-burst", help="request burst"),
    local_runtime: str = typer.Option(
        "auto", "--local-runtime",
        help="auto|true|false: build pods for Phalanx node agents (host ports, local names) instead of kubelets; "
             "auto: true when every Node's containerRuntimeVersion starts with phalanx://"),
    init_container_image: str = typer.Option("alpine:3.10", "--pytorch-init-container-image"),
    init_container_max_tries: int = typer.Option(100, "--pytorch-init-container-max-tries", min=1),
    mpi_kubectl_delivery_image: str = typer.Option(
        "kubeflow/kubectl-delivery:latest", "--mpi-kubectl-delivery-image",
        help="image of the MPIJob launcher's kubectl-delivery init container (Kubernetes runtime)"),
    default_backoff_limit: int = typer.Option(0, "--default-backoff-limit", min=0,
                                              help="restarts allowed when a job sets no backoffLimit"),
    leader_elect: bool = typer.Option(False, "--leader-elect",
                                      help="Enable leader election for controller manager. Enabling this will "
                                           "ensure there is only one active controller manager."),
    leader_election_id: str = typer.Option(DEFAULT_LEADER_ELECTION_ID, "--leader-election-id",
                                           help="The ID for leader election (the Lease's name)."),
    leader_election_namespace: Optional[str] = typer.Option(
        None, "--leader-election-namespace",
        help="namespace of the Lease (default: the pod's namespace in a cluster, else default)"),
    leader_election_lease_duration: str = typer.Option(
        "15s", "--leader-election-lease-duration",
        help=_LEASE_HELP.format(what="how long a Lease not renewed keeps the other candidates waiting")),
    leader_election_renew_deadline: str = typer.Option(
        "10s", "--leader-election-renew-deadline",
        help=_LEASE_HELP.format(what="how long the leader tries to renew before it gives up and exits")),
    leader_election_retry_period: str = typer.Option(
        "2s", "--leader-election-retry-period", help=_LEASE_HELP.format(what="time between tries")),
    webhook_server_port: int = typer.Option(9443, "--webhook-server-port", min=0, max=65535,
                                            help="port of the admission webhook server (0: any free port)"),
    webhook_host: str = typer.Option("127.0.0.1", "--webhook-host",
                                     help="address the webhook server listens on (in a pod: 0.0.0.0)"),
    webhook_cert_dir: str = typer.Option("/tmp/k8s-webhook-server/serving-certs", "--webhook-cert-dir",
                                         help="directory of the webhook's tls.crt and tls.key"),
    webhook_service_name: str = typer.Option("phalanx-operator-webhook", "--webhook-service-name",
                                             help="the webhook's Service (the certificate names it)"),
    webhook_secret_name: str = typer.Option("phalanx-operator-webhook-cert", "--webhook-secret-name",
                                            help="the Secret holding the webhook's CA and certificate"),
    enable_cert_rotation: bool = typer.Option(
        True, "--enable-cert-rotation/--no-enable-cert-rotation",
        help="create and rotate the webhook certificate in the Secret and inject its CA into the webhook "
             "configurations (off: serve what is in --webhook-cert-dir, e.g. cert-manager's)"),
    disable_webhook: bool = typer.Option(False, "--disable-webhook", help="run without the webhook server"),
    metrics_bind_address: str = typer.Option(
        "127.0.0.1:8080", "--metrics-bind-address",
        help="serve /metrics here (':8080': every interface, as the original's default; '0': off)"),
    health_probe_bind_address: str = typer.Option(
        "127.0.0.1:8081", "--health-probe-bind-address",
        help="serve /healthz and /readyz here (':8081': every interface; '0': off)"),
    verbose: int = typer.Option(0, "-v", "--verbose", count=True),
) -> None:
    """Run the job controller against a Kubernetes API server (a cluster, or `phalanx up --no-controllers`)."""
    from phalanx.cli.clustermode import (  # lazy for start-up speed
        OperatorSettings,
        configure_logging,
        env_cluster_domain,
        leader_election,
        parse_gang_scheduler,
        parse_image,
        parse_kinds,
        run_operator,
        webhook_settings,
    )

    if local_runtime not in ("auto", "true", "false"):
        _fail(f'error: --local-runtime: unsupported value "{local_runtime}": supported values: "auto", "true", '
              '"false"', EXIT_INVALID)
    try:
        kinds = parse_kinds(enable_scheme)
        parse_image("--mpi-kubectl-delivery-image", mpi_kubectl_delivery_image)
        election = leader_election(
            leader_elect, leader_election_id, leader_election_namespace,
            (leader_election_lease_duration, leader_election_renew_deadline, leader_election_retry_period),
            ("--leader-election-id", "--leader-election-namespace", "--leader-election-lease-duration",
             "--leader-election-renew-deadline", "--leader-election-retry-period"))
        ops_addresses = _ops_addresses(("--metrics-bind-address", metrics_bind_address),
                                       ("--health-probe-bind-address", health_probe_bind_address))
    except ValueError as e:
        _fail(f"error: {e}", EXIT_INVALID)
    configure_logging(verbose)
    conn = _connection(kubeconfig, context, server, token, certificate_authority, in_cluster, kube_api_qps,
                       kube_api_burst)
    settings = OperatorSettings(parse_gang_scheduler(gang_scheduler_name), namespace or None, tuple(kinds),
                                controller_threads, local_runtime, env_cluster_domain(), init_container_image,
                                init_container_max_tries, default_backoff_limit,
                                mpi_kubectl_delivery_image=mpi_kubectl_delivery_image, leader_election=election)
    settings.metrics_address, settings.health_address = ops_addresses
    if not disable_webhook:
        try:
            settings.webhook = webhook_settings(webhook_host, webhook_server_port, webhook_cert_dir,
                                                enable_cert_rotation, webhook_service_name, webhook_secret_name)
        except ValueError as e:
            _fail(f"error: {e}", EXIT_INVALID)
    _run_cluster_mode(run_operator(conn, settings, lambda m: err.print(m, markup=False)))


@app.command("scheduler")
def scheduler_cmd(
    kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help=_CONN_HELP),
    context: Optional[str] = typer.Option(None, "--context"),
    server: Optional[str] = typer.Option(None, "--server"),
    token: Optional[str] = typer.Option(None, "--token"),
    certificate_authority: Optional[str] = typer.Option(None, "--certificate-authority"),
    in_cluster: Optional[bool] = typer.Option(None, "--in-cluster/--no-in-cluster"),
    scheduler_name: str = typer.Option("volcano", "--scheduler-name",
                                       help="schedule the pods whose spec.schedulerName is this"),
    default_queue: str = typer.Option("default", "--default-queue"),
    schedule_period: float = typer.Option(1.0, "--schedule-period", min=0.05, help="seconds between sessions"),
    kube_api_qps: float = typer.Option(DEFAULT_SCHEDULER_QPS, "--kube-api-qps"),
    kube_api_burst: int = typer.Option(DEFAULT_SCHEDULER_BURST, "--kube-api-burst"),
    leader_elect: bool = typer.Option(False, "--leader-elect",
                                      help="Start a leader election client and gain leadership before executing "
                                           "the main loop. Enable this when running replicated components for "
                                           "high availability."),
    leader_elect_resource_name: Optional[str] = typer.Option(
        None, "--leader-elect-resource-name", help="the Lease's name (default: the scheduler name, as Volcano)"),
    leader_elect_resource_namespace: Optional[str] = typer.Option(
        None, "--leader-elect-resource-namespace", "--lock-object-namespace",
        help="namespace of the Lease (default: the pod's namespace in a cluster, else default)"),
    leader_elect_lease_duration: str = typer.Option(
        "15s", "--leader-elect-lease-duration",
        help=_LEASE_HELP.format(what="how long a Lease not renewed keeps the other candidates waiting")),
    leader_elect_renew_deadline: str = typer.Option(
        "10s", "--leader-elect-renew-deadline",
        help=_LEASE_HELP.format(what="how long the leader tries to renew before it gives up and exits")),
    leader_elect_retry_period: str = typer.Option(
        "2s", "--leader-elect-retry-period", help=_LEASE_HELP.format(what="time between tries")),
    listen_address: str = typer.Option(
        "127.0.0.1:8080", "--listen-address",
        help="serve /metrics here (':8080': every interface, as Volcano's default; '0': off)"),
    healthz_address: str = typer.Option(
        "127.0.0.1:11251", "--healthz-address",
        help="serve /healthz and /readyz here (':11251': every interface; '0': off)"),
    scheduler_conf: Optional[str] = typer.Option(None, "--scheduler-conf", help=_SCHEDULER_CONF_HELP),
    print_config: bool = typer.Option(False, "--print-config",
                                      help="print the configuration (--scheduler-conf's or the default) as a "
                                           "volcano-scheduler.conf and exit"),
    verbose: int = typer.Option(0, "-v", "--verbose", count=True),
) -> None:
    """Run the gang scheduler (Volcano-shaped) as a secondary scheduler: PodGroups, Queues, pods/binding."""
    from phalanx.cli.clustermode import (  # lazy: start-up speed
        SchedulerSettings,
        configure_logging,
        leader_election,
        run_scheduler,
    )

    if not scheduler_name.strip():
        _fail("error: --scheduler-name: must not be empty", EXIT_INVALID)
    sched_config = _scheduler_conf(scheduler_conf) if scheduler_conf is not None else None
    if print_config:
        from phalanx.scheduler.conffile import render_scheduler_conf  # lazy for start-up speed, as above
        from phalanx.scheduler.config import SchedulerConfig  # lazy for start-up speed, as above

        out.print(render_scheduler_conf(sched_config or SchedulerConfig()), markup=False, end="")
        raise typer.Exit(cmdutil.EXIT_OK)
    try:
        election = leader_election(
            leader_elect, leader_elect_resource_name or scheduler_name.strip(), leader_elect_resource_namespace,
            (leader_elect_lease_duration, leader_elect_renew_deadline, leader_elect_retry_period),
            ("--leader-elect-resource-name", "--leader-elect-resource-namespace", "--leader-elect-lease-duration",
             "--leader-elect-renew-deadline", "--leader-elect-retry-period"))
        ops_addresses = _ops_addresses(("--listen-address", listen_address), ("--healthz-address", healthz_address))
    except ValueError as e:
        _fail(f"error: {e}", EXIT_INVALID)
    configure_logging(verbose)
    conn = _connection(kubeconfig, context, server, token, certificate_authority, in_cluster, kube_api_qps,
                       kube_api_burst)
    settings = SchedulerSettings(scheduler_name.strip(), default_queue, schedule_period, leader_election=election,
                                 config=sched_config, config_file=scheduler_conf)
    settings.metrics_address, settings.health_address = ops_addresses
    _run_cluster_mode(run_scheduler(conn, settings, lambda m: err.print(m, markup=False)))


@app.command()
def install(
    namespace: str = typer.Option("phalanx-system", "--namespace", "-n",
                                  help="namespace of the operator and scheduler Deployments"),
    image: Optional[str] = typer.Option(None, "--image", help="container image with Phalanx installed"),
    image_pull_policy: str = typer.Option("IfNotPresent", "--image-pull-policy"),
    scheduler: bool = typer.Option(
        True, "--scheduler/--no-scheduler",
        help="add `phalanx scheduler` and the Volcano CRDs (--no-scheduler: Volcano is installed and schedules)"),
    scheduler_name: str = typer.Option("volcano", "--scheduler-name",
                                       help="the gang scheduler's name (the pods' schedulerName)"),
    volcano_crds: Optional[bool] = typer.Option(
        None, "--volcano-crds/--no-volcano-crds",
        help="include the PodGroup and Queue CRDs (default: with the scheduler)"),
    apply_: bool = typer.Option(False, "--apply", help="create or update the objects instead of printing them"),
    kubeconfig: Optional[str] = typer.Option(None, "--kubeconfig", help=_CONN_HELP + "; with --apply"),
    context: Optional[str] = typer.Option(None, "--context"),
    webhooks: bool = typer.Option(
        True, "--webhooks/--no-webhooks",
        help="the operator's admission webhooks (validating and defaulting), their Service, Secret and RBAC"),
    cert_manager: bool = typer.Option(
        False, "--cert-manager",
        help="cert-manager issues the webhook certificate and injects its CA (the operator does not rotate)"),
    webhook_url: Optional[str] = typer.Option(
        None, "--webhook-url",
        help="call the webhooks at this https:// URL (an operator outside the cluster, e.g. https://127.0.0.1:9443) "
             "instead of through the Service"),
    scheduler_conf: Optional[str] = typer.Option(
        None, "--scheduler-conf",
        help="ship this volcano-scheduler.conf in the scheduler's ConfigMap (default: Phalanx's configuration)"),
) -> None:
    """Print everything a cluster needs (`phalanx install | kubectl apply -f -`): CRDs, RBAC, Deployments."""
    # Lazy for start-up speed: the manifests load every kind's OpenAPI schema.
    from phalanx.deploy.manifests import DEFAULT_IMAGE, InstallOptions, install_objects, to_yaml
    from phalanx.deploy.webhooks import WebhookInstall

    if apply_ and webhooks and cert_manager:
        _fail("error: --cert-manager: its Issuer and Certificate are applied with kubectl: "
              "`phalanx install --cert-manager | kubectl apply -f -`", EXIT_INVALID)
    hooks = WebhookInstall(cert_manager=cert_manager, url=webhook_url) if webhooks else None
    conf_text = None
    if scheduler_conf is not None:
        _scheduler_conf(scheduler_conf)  # exits 2 naming the file and the field
        conf_text = Path(scheduler_conf).read_text()
    opts = InstallOptions(namespace=namespace, image=image or DEFAULT_IMAGE, image_pull_policy=image_pull_policy,
                          scheduler=scheduler, scheduler_name=scheduler_name.strip(), volcano_crds=volcano_crds,
                          webhook=hooks, scheduler_conf=conf_text)
    try:
        objs = install_objects(opts)
    except ValueError as e:
        _fail(f"error: {e}", EXIT_INVALID)
    if not apply_:
        out.print(to_yaml(objs), markup=False, end="")
        return
    from phalanx.cli.clustermode import Connection  # lazy for start-up speed, as above
    from phalanx.deploy.apply import apply_objects

    conn = Connection(kubeconfig=kubeconfig, context=context)

    async def go() -> int:
        client = conn.client("phalanx-install")
        try:
            for ref, verb in await apply_objects(client, objs):
                out.print(f"{ref} {verb}", markup=False)
        except ApiError as e:
            err.print(cmdutil.api_error_text(e), markup=False)
            return 1
        finally:
            await client.close()
        return 0

    _run_cluster_mode(go())


# ---------------------------------------------------------------- objects

for _command in objects.COMMANDS:
    app.command(_command.__name__)(_command)


# ---------------------------------------------------------------- run

@app.command()
def run(
    filename: str = typer.Argument(..., help="a manifest with one training job (and optionally queues)"),
    namespace: Optional[str] = typer.Option(None, "-n", "--namespace"),
    timeout: Optional[float] = typer.Option(None, help="give up after this many seconds (exit 1)"),
) -> None:
    """Apply a job, stream its job / PodGroup / pod rows, exit 0 on Succeeded, 1 on Failed."""
    docs = _load_and_check(filename, namespace)
    jobs = [d for d in docs if d.get("kind") in registry.JOB_KINDS]
    if len(jobs) != 1:
        _fail(f"error: {filename} must contain exactly one training job ({', '.join(registry.JOB_KINDS)}); "
              f"found {len(jobs)}", EXIT_INVALID)
    from phalanx.cli.runner import run_job  # lazy for start-up speed: loads rich, admission and the HTTP client

    try:
        code = asyncio.run(run_job(docs, jobs[0], filename, timeout, out.console, err.console))
    except KeyboardInterrupt:
        code = 130
    raise typer.Exit(code)


# Imported here, next to its registration: `phalanx exec` reads only files (node/execctx, loaded when it
# runs), so it needs no API server and costs the other commands nothing.
from phalanx.cli.execcmd import exec_command

app.command("exec", no_args_is_help=True)(exec_command)


# ---------------------------------------------------------------- simulate

# Imported here, next to its registration: its heavy imports (phalanx.sim) happen when it runs.
from phalanx.cli.simulate import simulate as simulate_command

app.command("simulate")(simulate_command)


# ---------------------------------------------------------------- timeline

# Imported here, next to its registration: it reads files only; the renderers load when it runs.
from phalanx.cli.timelinecmd import timeline as timeline_command

app.command("timeline", no_args_is_help=True)(timeline_command)


# ---------------------------------------------------------------- web view

from phalanx.cli.uicmd import ui as ui_command

app.command("ui")(ui_command)


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
