"""`phalanx`: the command line, kubectl-shaped.

Every command talks to a control plane over its HTTP API (see
``controlplane.py``). ``run`` starts an embedded one in-process when none is up.
"""
from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Optional

import typer
import yaml
from rich.console import Console

from ..api import registry
from ..api.errors import AlreadyExists, ApiError, Forbidden, Invalid, NotFound
from ..clock import Clock
from . import printers
from .controlplane import (
    ServedCluster, export_line, home as phalanx_home_dir, read_endpoint, running_endpoint, serve_forever, start_daemon,
    stop_daemon,
)

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Run Kubeflow training jobs, gang-scheduled, on this machine.")
err = Console(stderr=True, highlight=False, soft_wrap=True)
out = Console(highlight=False, soft_wrap=True)

EXIT_INVALID = 2
# Client rate limits of the cluster-mode processes (Volcano's scheduler defaults to 2000/2000,
# client-go to 5/10; these suit a shared API server and keep gangs of hundreds of pods quick).
DEFAULT_OPERATOR_QPS, DEFAULT_OPERATOR_BURST = 50.0, 100
DEFAULT_SCHEDULER_QPS, DEFAULT_SCHEDULER_BURST = 200.0, 400


# ---------------------------------------------------------------- helpers

def _fail(msg: str, code: int = 1) -> None:
    err.print(msg, markup=False)
    raise typer.Exit(code)


def _api_error_text(e: ApiError, verb: str | None = None, source: str | None = None) -> str:
    where = f'error when {verb} "{source}": ' if verb and source else ""
    return f"Error from server ({e.reason}): {where}{e.message}"


def _connect():
    home = phalanx_home_dir()
    ep = read_endpoint(home)
    if ep is None:
        _fail("error: no Phalanx control plane is running; start one with `phalanx up` "
              "(or run a job with `phalanx run FILE`)")
    return ep.client()


def _resource(kind_name: str) -> registry.ResourceType:
    rt = registry.lookup(kind_name)
    if rt is None:
        _fail(f'error: the server doesn\'t have a resource type "{kind_name}"')
    return rt


def _ref(obj: dict) -> str:
    rt = registry.by_kind(obj["kind"])
    prefix = rt.singular + (f".{rt.group}" if rt.group else "")
    return f"{prefix}/{obj.get('metadata', {}).get('name', '')}"


def _load_and_check(path: str, namespace: str | None) -> list[dict]:
    """Parse, default and validate every document before anything is sent, so
    a bad file changes nothing (exit 2 with the field and the rule)."""
    from ..api.admission import admit
    from ..api.manifest import load_manifests

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
            err.print(_api_error_text(e, "creating", path), markup=False)
            failed = True
    if failed:
        raise typer.Exit(EXIT_INVALID)
    return docs


async def _apply_one(client, doc: dict) -> str:
    """kubectl-apply-like: create, or update the spec/labels/annotations."""
    rt = registry.by_kind(doc["kind"])
    md = doc.get("metadata", {})
    ns = md.get("namespace") or ("default" if rt.namespaced else None)
    if rt.namespaced:
        md["namespace"] = ns
    try:
        cur = await client.get(doc["kind"], md["name"], ns)
    except NotFound:
        await client.create(doc)
        return "created"
    new = dict(cur)
    new_md = dict(cur["metadata"])
    for k in ("labels", "annotations"):
        if k in md:
            new_md[k] = md[k]
    new["metadata"] = new_md
    for k, v in doc.items():
        if k not in ("metadata", "status", "apiVersion", "kind"):
            new[k] = v
    from ..api.admission import admit

    if admit(json.loads(json.dumps(new)), cur) == admit(json.loads(json.dumps(cur)), cur):
        return "unchanged"
    await client.update(new)
    return "configured"


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _print_table(kind: str, objs: list[dict], wide: bool, with_ns: bool) -> None:
    headers = printers.columns(kind, wide, with_namespace=with_ns)
    rows = [printers.row(o, kind, wide, _now(), with_namespace=with_ns) for o in objs]
    out.print(printers.format_table(headers, rows), markup=False, end="")


def _dump(obj: Any, fmt: str) -> str:
    return printers.to_json(obj) if fmt == "json" else printers.to_yaml(obj)


# ---------------------------------------------------------------- control plane

@app.command()
def up(
    port: int = typer.Option(0, help="TCP port on 127.0.0.1 (0: any free port)"),
    controllers: bool = typer.Option(True, "--controllers/--no-controllers",
                                     help="run the job controller (--no-controllers: `phalanx operator` runs it)"),
    scheduler: bool = typer.Option(True, "--scheduler/--no-scheduler",
                                   help="run the gang scheduler (--no-scheduler: `phalanx scheduler` runs it)"),
) -> None:
    """Start a background control plane (state in $PHALANX_HOME); print the line that points kubectl at it."""
    home = phalanx_home_dir()
    ep = running_endpoint(home)  # asked through the API; a dying one is waited for
    if ep is not None:
        err.print(f"control plane already running (pid {ep.pid}) at {ep.url}", markup=False)
    else:
        try:
            ep = start_daemon(home, port, controllers=controllers, scheduler=scheduler)
        except RuntimeError as e:
            _fail(f"error: {e}")
        err.print(f"control plane running (pid {ep.pid}) at {ep.url}; state in {home}", markup=False)
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
) -> None:
    """Run the control plane in the foreground (used by `up`)."""
    asyncio.run(serve_forever(phalanx_home_dir(), port, controllers=controllers, scheduler=scheduler))


# ---------------------------------------------------------------- cluster mode

_CONN_HELP = ("kubeconfig file (default: in-cluster service account, $KUBECONFIG, ~/.kube/config, "
              "$PHALANX_HOME/kubeconfig)")


def _connection(kubeconfig: Optional[str], context: Optional[str], server: Optional[str], token: Optional[str],
                certificate_authority: Optional[str], in_cluster: Optional[bool], qps: float, burst: int):
    from .clustermode import Connection

    if qps > 0 and burst < 1:
        _fail("error: --kube-api-burst: must be at least 1 when --kube-api-qps is set", EXIT_INVALID)
    return Connection(kubeconfig, context, server, token, certificate_authority, in_cluster, qps, burst)


def _run_cluster_mode(coro) -> None:
    from ..client.kubeconfig import ConfigError

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
    verbose: int = typer.Option(0, "-v", "--verbose", count=True),
) -> None:
    """Run the job controller against a Kubernetes API server (a cluster, or `phalanx up --no-controllers`)."""
    from .clustermode import OperatorSettings, configure_logging, env_cluster_domain, parse_gang_scheduler, \
        parse_image, parse_kinds, run_operator

    if local_runtime not in ("auto", "true", "false"):
        _fail(f'error: --local-runtime: unsupported value "{local_runtime}": supported values: "auto", "true", '
              '"false"', EXIT_INVALID)
    try:
        kinds = parse_kinds(enable_scheme)
        parse_image("--mpi-kubectl-delivery-image", mpi_kubectl_delivery_image)
    except ValueError as e:
        _fail(f"error: {e}", EXIT_INVALID)
    configure_logging(verbose)
    conn = _connection(kubeconfig, context, server, token, certificate_authority, in_cluster, kube_api_qps,
                       kube_api_burst)
    settings = OperatorSettings(parse_gang_scheduler(gang_scheduler_name), namespace or None, tuple(kinds),
                                controller_threads, local_runtime, env_cluster_domain(), init_container_image,
                                init_container_max_tries, default_backoff_limit,
                                mpi_kubectl_delivery_image=mpi_kubectl_delivery_image)
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
    verbose: int = typer.Option(0, "-v", "--verbose", count=True),
) -> None:
    """Run the gang scheduler (Volcano-shaped) as a secondary scheduler: PodGroups, Queues, pods/binding."""
    from .clustermode import SchedulerSettings, configure_logging, run_scheduler

    if not scheduler_name.strip():
        _fail("error: --scheduler-name: must not be empty", EXIT_INVALID)
    configure_logging(verbose)
    conn = _connection(kubeconfig, context, server, token, certificate_authority, in_cluster, kube_api_qps,
                       kube_api_burst)
    settings = SchedulerSettings(scheduler_name.strip(), default_queue, schedule_period)
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
) -> None:
    """Print everything a cluster needs (`phalanx install | kubectl apply -f -`): CRDs, RBAC, Deployments."""
    from ..deploy.manifests import DEFAULT_IMAGE, InstallOptions, install_objects, to_yaml

    opts = InstallOptions(namespace=namespace, image=image or DEFAULT_IMAGE, image_pull_policy=image_pull_policy,
                          scheduler=scheduler, scheduler_name=scheduler_name.strip(), volcano_crds=volcano_crds)
    try:
        objs = install_objects(opts)
    except ValueError as e:
        _fail(f"error: {e}", EXIT_INVALID)
    if not apply_:
        out.print(to_yaml(objs), markup=False, end="")
        return
    from .clustermode import Connection
    from ..deploy.apply import apply_objects

    conn = Connection(kubeconfig=kubeconfig, context=context)

    async def go() -> int:
        client = conn.client("phalanx-install")
        try:
            for ref, verb in await apply_objects(client, objs):
                out.print(f"{ref} {verb}", markup=False)
        except ApiError as e:
            err.print(_api_error_text(e), markup=False)
            return 1
        finally:
            await client.close()
        return 0

    _run_cluster_mode(go())


# ---------------------------------------------------------------- objects

@app.command()
def apply(
    filename: str = typer.Option(..., "-f", "--filename", help="manifest file, or - for stdin"),
    namespace: Optional[str] = typer.Option(None, "-n", "--namespace"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the defaulted, validated objects; send nothing"),
) -> None:
    """Create or update the objects of a manifest file."""
    docs = _load_and_check(filename, namespace)
    if dry_run:
        from ..api.admission import admit

        for d in docs:
            out.print("---\n" + _dump(admit(d), "yaml"), markup=False, end="")
        return

    async def go() -> None:
        client = _connect()
        try:
            for d in docs:
                try:
                    verb = await _apply_one(client, d)
                except ApiError as e:
                    _fail(_api_error_text(e, "creating", filename), EXIT_INVALID if e.code in (400, 403, 422) else 1)
                out.print(f"{_ref(d)} {verb}", markup=False)
        finally:
            await client.close()

    asyncio.run(go())


@app.command()
def get(
    kind: str = typer.Argument(..., help="pytorchjob, tfjob, xgboostjob, paddlejob, jaxjob, mpijob, podgroup/pg, "
                                         "queue/q, pod/po, node/no, service/svc, event/ev, configmap/cm"),
    name: Optional[str] = typer.Argument(None),
    watch: bool = typer.Option(False, "-w", "--watch"),
    output: Optional[str] = typer.Option(None, "-o", "--output", help="wide|yaml|json"),
    namespace: str = typer.Option("default", "-n", "--namespace"),
    all_namespaces: bool = typer.Option(False, "-A", "--all-namespaces"),
    selector: Optional[str] = typer.Option(None, "-l", "--selector"),
) -> None:
    """List objects, kubectl style."""
    rt = _resource(kind)
    if output not in (None, "wide", "yaml", "json"):
        _fail(f'error: unable to match a printer suitable for the output format "{output}", '
              "allowed formats are: json,wide,yaml")
    wide = output == "wide"
    ns = None if (all_namespaces or not rt.namespaced) else namespace

    async def go() -> None:
        client = _connect()
        try:
            if name:
                try:
                    objs = [await client.get(rt.kind, name, ns)]
                except NotFound as e:
                    _fail(_api_error_text(e))
                rv = objs[0]["metadata"].get("resourceVersion")
            else:
                lst = await client.list(rt.kind, ns, label_selector=selector)
                objs, rv = lst.items, lst.resource_version
            with_ns = all_namespaces and rt.namespaced
            if output in ("yaml", "json"):
                out.print(_dump(objs[0] if name else printers.as_list(objs), output), markup=False, end="")
            elif watch:
                wp = printers.WatchPrinter(rt.kind, wide, with_namespace=with_ns)
                if objs:
                    out.print(wp.print(objs, _now()), markup=False, end="")
            elif objs:
                _print_table(rt.kind, objs, wide, with_ns)
            else:
                where = f" in {namespace} namespace" if rt.namespaced and not all_namespaces else ""
                err.print(f"No resources found{where}.", markup=False)
            if watch:
                async for ev in client.watch(rt.kind, ns, resource_version=rv):
                    if ev.type == "BOOKMARK":
                        continue
                    if name and ev.object.get("metadata", {}).get("name") != name:
                        continue
                    if output in ("yaml", "json"):
                        out.print(_dump(ev.object, output), markup=False, end="")
                    else:
                        out.print(wp.print([ev.object], _now()), markup=False, end="")
        finally:
            await client.close()

    try:
        asyncio.run(go())
    except KeyboardInterrupt:
        pass


@app.command()
def describe(
    kind: str = typer.Argument(...),
    name: str = typer.Argument(...),
    namespace: str = typer.Option("default", "-n", "--namespace"),
) -> None:
    """Show an object in detail, with its events (and, for a waiting job, why)."""
    from . import describe as describe_mod

    rt = _resource(kind)
    ns = namespace if rt.namespaced else None

    async def go() -> None:
        client = _connect()
        try:
            try:
                obj = await client.get(rt.kind, name, ns)
            except NotFound as e:
                _fail(_api_error_text(e))
            related: dict[str, Any] = {}
            fs = f"involvedObject.name={name},involvedObject.kind={rt.kind}"
            related["events"] = (await client.list("Event", ns or "default", field_selector=fs)).items
            if rt.kind in registry.JOB_KINDS:
                try:
                    pg = await client.get("PodGroup", name, ns)
                    related["podgroup"] = pg
                    fs = f"involvedObject.name={name},involvedObject.kind=PodGroup"
                    related["events"] += (await client.list("Event", ns, field_selector=fs)).items
                except NotFound:
                    pass
            related["events"].sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
            out.print(describe_mod.describe(obj, related), markup=False)
        finally:
            await client.close()

    asyncio.run(go())


def _log_target(target: str) -> tuple[registry.ResourceType, str]:
    """`POD`, `pod/POD` or `TYPE/NAME` for a job (kubectl's TYPE/NAME form)."""
    if "/" not in target:
        return registry.by_kind("Pod"), target
    type_name, name = target.split("/", 1)
    rt = _resource(type_name)
    if not name:
        _fail(f"error: arguments in resource/name form must have a single resource and name: {target}")
    if rt.kind != "Pod" and rt.kind not in registry.JOB_KINDS:
        kinds = ", ".join(registry.by_kind(k).singular for k in registry.JOB_KINDS)
        _fail(f"error: cannot get logs from {rt.singular}/{name}: only pods and jobs ({kinds}) have logs")
    return rt, name


@app.command()
def logs(
    target: str = typer.Argument(..., metavar="POD | TYPE/NAME",
                                 help="a pod (also after it was deleted, while its job exists), or a job: "
                                      "pytorchjob/NAME, tfjob/NAME, xgboostjob/NAME, paddlejob/NAME, jaxjob/NAME, "
                                      "mpijob/NAME prints the logs of all its pods"),
    container: Optional[str] = typer.Option(None, "-c", "--container"),
    follow: bool = typer.Option(False, "-f", "--follow"),
    previous: bool = typer.Option(False, "-p", "--previous",
                                  help="the previous container instance, or the previous pod of that name"),
    tail: Optional[int] = typer.Option(None, "--tail", help="lines to show (per pod and container for a job)"),
    namespace: str = typer.Option("default", "-n", "--namespace"),
) -> None:
    """Print a pod's container log, or every log of a job's pods (current and deleted)."""
    rt, name = _log_target(target)
    if rt.kind != "Pod" and previous:
        _fail("error: --previous cannot be used with a job: its logs already hold every earlier container "
              "and pod instance")
    if tail is not None and tail < 0:
        tail = None  # kubectl: -1 means all lines

    async def go() -> None:
        client = _connect()
        try:
            if rt.kind == "Pod":
                source = client.logs(namespace, name, container=container, follow=follow, tail=tail,
                                     previous=previous)
            else:
                source = client.job_logs(namespace, rt.kind, name, container=container, follow=follow, tail=tail)
            async for chunk in source:
                sys.stdout.buffer.write(chunk)
                sys.stdout.buffer.flush()
        except ApiError as e:
            _fail(_api_error_text(e))
        finally:
            await client.close()

    try:
        asyncio.run(go())
    except KeyboardInterrupt:
        pass


@app.command()
def delete(
    kind: Optional[str] = typer.Argument(None),
    name: Optional[str] = typer.Argument(None),
    filename: Optional[str] = typer.Option(None, "-f", "--filename"),
    namespace: str = typer.Option("default", "-n", "--namespace"),
) -> None:
    """Delete objects by file or by kind and name (dependents are garbage-collected)."""
    targets: list[tuple[registry.ResourceType, str, str | None]] = []
    if filename:
        from ..api.manifest import load_manifests

        try:
            docs = load_manifests(Path(filename).read_text(), source=filename)
        except (OSError, ApiError) as e:
            _fail(f"error: {getattr(e, 'message', e)}", EXIT_INVALID)
        for d in docs:
            rt = _resource(d.get("kind", ""))
            md = d.get("metadata") or {}
            targets.append((rt, md.get("name", ""), (md.get("namespace") or namespace) if rt.namespaced else None))
    elif kind and name:
        rt = _resource(kind)
        targets.append((rt, name, namespace if rt.namespaced else None))
    else:
        _fail("error: you must provide one or more resources by argument or filename", EXIT_INVALID)

    async def go() -> int:
        client = _connect()
        code = 0
        try:
            for rt, n, ns in targets:
                try:
                    await client.delete(rt.kind, n, ns)
                    out.print(f'{rt.singular}{"." + rt.group if rt.group else ""} "{n}" deleted', markup=False)
                except ApiError as e:
                    err.print(_api_error_text(e), markup=False)
                    code = 1
        finally:
            await client.close()
        return code

    raise typer.Exit(asyncio.run(go()))


@app.command()
def patch(
    kind: str = typer.Argument(...),
    name: str = typer.Argument(...),
    patch_body: str = typer.Option(..., "-p", "--patch", help="the patch, JSON or YAML"),
    patch_type: str = typer.Option("merge", "--type", help="merge|json"),
    namespace: str = typer.Option("default", "-n", "--namespace"),
) -> None:
    """Patch an object (e.g. a queue's capability)."""
    rt = _resource(kind)
    if patch_type not in ("merge", "json", "strategic"):
        _fail(f'error: --type must be one of "json", "merge", not "{patch_type}"', EXIT_INVALID)
    try:
        body = yaml.safe_load(patch_body)
    except yaml.YAMLError as e:
        _fail(f"error: unable to parse the patch: {e}", EXIT_INVALID)

    async def go() -> None:
        client = _connect()
        try:
            await client.patch(rt.kind, name, namespace if rt.namespaced else None, body,
                               patch_type="merge" if patch_type == "strategic" else patch_type)
            out.print(f"{rt.singular}{'.' + rt.group if rt.group else ''}/{name} patched", markup=False)
        except ApiError as e:
            _fail(_api_error_text(e), EXIT_INVALID if e.code in (400, 403, 422) else 1)
        finally:
            await client.close()

    asyncio.run(go())


@app.command()
def edit(
    kind: str = typer.Argument(...),
    name: str = typer.Argument(...),
    namespace: str = typer.Option("default", "-n", "--namespace"),
) -> None:
    """Edit an object in $EDITOR (spec, labels, annotations)."""
    rt = _resource(kind)
    ns = namespace if rt.namespaced else None

    async def fetch() -> dict:
        client = _connect()
        try:
            return await client.get(rt.kind, name, ns)
        except ApiError as e:
            _fail(_api_error_text(e))
        finally:
            await client.close()

    obj = asyncio.run(fetch())
    text = _dump(obj, "yaml")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(text)
        path = f.name
    try:
        editor = os.environ.get("KUBE_EDITOR") or os.environ.get("EDITOR") or "vi"
        subprocess.call([*shlex.split(editor), path])
        new_text = Path(path).read_text()
    finally:
        os.unlink(path)
    if new_text == text:
        out.print("Edit cancelled, no changes made.", markup=False)
        return
    try:
        new = yaml.safe_load(new_text)
    except yaml.YAMLError as e:
        _fail(f"error: the edited file is not valid YAML: {e}", EXIT_INVALID)
    if not isinstance(new, dict):
        _fail("error: the edited file must hold one object", EXIT_INVALID)

    async def save() -> None:
        client = _connect()
        try:
            await client.update(new)
            out.print(f"{rt.singular}{'.' + rt.group if rt.group else ''}/{name} edited", markup=False)
        except ApiError as e:
            _fail(_api_error_text(e), EXIT_INVALID if e.code in (400, 403, 422) else 1)
        finally:
            await client.close()

    asyncio.run(save())


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
    from .runner import run_job

    try:
        code = asyncio.run(run_job(docs, jobs[0], filename, timeout, out, err))
    except KeyboardInterrupt:
        code = 130
    raise typer.Exit(code)


from .execcmd import exec_command  # noqa: E402  (phalanx exec: node/execctx, no API server needed)

app.command("exec", no_args_is_help=True)(exec_command)


# ---------------------------------------------------------------- simulate

from .simulate import simulate as _simulate  # noqa: E402  (its heavy imports happen when it runs)

app.command("simulate")(_simulate)


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    app()
