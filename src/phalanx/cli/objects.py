"""The object commands (`get`, `apply`, `describe`, `logs`, `delete`, `patch`, `edit`,
`version`), kubectl-shaped, over the blocking ``RestClient``: they load no control
plane code, no event loop and no HTTP library beyond the standard one.

`get` and `apply` have modules of their own (``getcmd``, ``applycmd``); what all
share is in ``cmdutil``. Exit codes: 0 ok, 1 error (or a server error), 2 invalid
input, 3 cannot run (no control plane, cannot connect), 130 interrupted.
"""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer
import yaml

from phalanx import __version__
from phalanx.api import registry
from phalanx.cli.applycmd import apply, load_documents, manifest_files
from phalanx.cli.cmdutil import (
    EXIT_ERROR,
    EXIT_INVALID,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    api_error_text,
    connect,
    dump,
    exit_code_of,
    fail,
    interruptible,
    quoted_ref,
    ref,
    resource,
    say,
    warn,
)
from phalanx.cli.controlplane import home as phalanx_home_dir
from phalanx.cli.controlplane import read_endpoint
from phalanx.cli.getcmd import get
from phalanx.client.wire import Unreachable
from phalanx.objects.errors import ApiError, NotFound

if TYPE_CHECKING:
    from phalanx.client.rest import RestClient  # loaded when a command connects (Endpoint.rest)

# ---------------------------------------------------------------- describe

def events_of(client: RestClient, obj: dict, rt: registry.ResourceType) -> list[dict]:
    """The object's own events: selected by name, namespace, kind and uid (kubectl's field
    selector), and filtered here by uid too, so a namesake's events never show."""
    md = obj.get("metadata") or {}
    uid = md.get("uid") or ""
    ns = md.get("namespace") or ("default" if rt.namespaced else None)
    parts = [f"involvedObject.name={md.get('name', '')}"]
    if rt.namespaced:
        parts.append(f"involvedObject.namespace={ns}")
    parts.append(f"involvedObject.kind={rt.kind}")
    if uid:
        parts.append(f"involvedObject.uid={uid}")
    events = client.list("Event", ns or "default", field_selector=",".join(parts)).items
    return [e for e in events if (e.get("involvedObject") or {}).get("uid") == uid
            and (e.get("involvedObject") or {}).get("kind") == rt.kind]


def describe(
    kind: str = typer.Argument(...),
    names: Optional[list[str]] = typer.Argument(None, metavar="[NAME...]"),
    namespace: str = typer.Option("default", "-n", "--namespace"),
    selector: Optional[str] = typer.Option(None, "-l", "--selector"),
) -> None:
    """Show objects in detail, with their own events (and, for a waiting job, why)."""
    _describe(kind, names or [], namespace, selector)


@interruptible
def _describe(kind: str, names: list[str], namespace: str, selector: str | None) -> None:
    from phalanx.cli import describe as describe_mod  # lazy for start-up speed: only `describe` needs it

    if "/" in kind:
        kind, _, name = kind.partition("/")
        names = [name, *names]
    rt = resource(kind)
    ns = namespace if rt.namespaced else None
    client = connect()
    code = EXIT_OK
    try:
        if names:
            objs = []
            for n in names:
                try:
                    objs.append(client.get(rt.kind, n, ns))
                except NotFound as e:
                    warn(api_error_text(e))
                    code = EXIT_ERROR
        else:
            objs = client.list(rt.kind, ns, label_selector=selector).items
            if not objs:
                warn(f"No resources found in {namespace} namespace." if rt.namespaced else "No resources found")
        texts = []
        for obj in objs:
            related: dict[str, Any] = {"events": events_of(client, obj, rt)}
            if rt.kind in registry.JOB_KINDS:
                try:
                    pg = client.get("PodGroup", obj["metadata"]["name"], ns)
                except NotFound:
                    pg = None
                if pg is not None and any(r.get("uid") == obj["metadata"].get("uid")
                                          for r in (pg.get("metadata") or {}).get("ownerReferences") or []):
                    related["podgroup"] = pg
                    related["events"] += events_of(client, pg, registry.by_kind("PodGroup"))
                related["history"] = job_history(obj)
            related["events"].sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
            texts.append(describe_mod.describe(obj, related))
        say("\n\n".join(t.rstrip("\n") for t in texts) + ("\n" if texts else ""))
    except ApiError as e:
        fail(api_error_text(e), exit_code_of(e))
    finally:
        client.close()
    raise typer.Exit(code)


def job_history(job: dict) -> list:
    """The job's state history kept in $PHALANX_HOME (empty when none is, e.g. against another server)."""
    from phalanx.store.history import JobHistories, JobKey  # lazy for start-up speed, as describe's

    md = job.get("metadata") or {}
    try:
        return JobHistories(phalanx_home_dir() / "history").read(
            JobKey(md.get("namespace") or "default", job.get("kind") or "", md.get("name") or "", md.get("uid") or ""))
    except ValueError:
        return []


# ---------------------------------------------------------------- logs

def log_target(target: str) -> tuple[registry.ResourceType, str]:
    """`POD`, `pod/POD` or `TYPE/NAME` for a job (kubectl's TYPE/NAME form)."""
    if "/" not in target:
        return registry.by_kind("Pod"), target
    type_name, name = target.split("/", 1)
    rt = resource(type_name)
    if not name:
        fail(f"error: arguments in resource/name form must have a single resource and name: {target}",
             EXIT_INVALID)
    if rt.kind != "Pod" and rt.kind not in registry.JOB_KINDS:
        kinds = ", ".join(registry.by_kind(k).singular for k in registry.JOB_KINDS)
        fail(f"error: cannot get logs from {rt.singular}/{name}: only pods and jobs ({kinds}) have logs",
             EXIT_INVALID)
    return rt, name


def logs(
    target: str = typer.Argument(..., metavar="POD | TYPE/NAME",
                                 help="a pod (also after it was deleted, while its job exists), or a job: "
                                      "pytorchjob/NAME, tfjob/NAME, xgboostjob/NAME, paddlejob/NAME, jaxjob/NAME, "
                                      "mpijob/NAME prints the logs of all its pods. Without a control plane "
                                      "the logs are read from $PHALANX_HOME"),
    container: Optional[str] = typer.Option(None, "-c", "--container"),
    follow: bool = typer.Option(False, "-f", "--follow"),
    previous: bool = typer.Option(False, "-p", "--previous",
                                  help="the previous container instance, or the previous pod of that name"),
    tail: Optional[int] = typer.Option(None, "--tail", help="lines to show (per pod and container for a job)"),
    namespace: str = typer.Option("default", "-n", "--namespace"),
) -> None:
    """Print a pod's container log, or every log of a job's pods (current and deleted)."""
    _logs(target, container, follow, previous, tail, namespace)


@interruptible
def _logs(target: str, container: str | None, follow: bool, previous: bool, tail: int | None,
          namespace: str) -> None:
    rt, name = log_target(target)
    if rt.kind != "Pod" and previous:
        fail("error: --previous cannot be used with a job: its logs already hold every earlier container "
             "and pod instance", EXIT_INVALID)
    if tail is not None and tail < 0:
        tail = None  # kubectl: -1 means all lines
    home = phalanx_home_dir()
    ep = read_endpoint(home)
    if ep is None:
        # Lazy for start-up speed: reading stored logs loads the node layer and asyncio.
        from phalanx.cli.offlinelogs import read_offline

        try:
            text = read_offline(home, namespace, rt.kind, name, container, previous, tail)
        except ApiError as e:
            fail(api_error_text(e), exit_code_of(e))
        except ValueError as e:
            fail(f"error: {e}", EXIT_INVALID)
        sys.stdout.buffer.write(text.encode())
        sys.stdout.flush()
        if follow:
            warn(f"note: no control plane is running; printed the logs stored in {home} (nothing is writing "
                 "to them)")
        return
    client = ep.rest()
    try:
        if rt.kind == "Pod":
            source = client.logs(namespace, name, container=container, follow=follow, tail=tail, previous=previous)
        else:
            source = client.job_logs(namespace, rt.kind, name, container=container, follow=follow, tail=tail)
        for chunk in source:
            sys.stdout.buffer.write(chunk)
            sys.stdout.buffer.flush()
    except ApiError as e:
        fail(api_error_text(e), exit_code_of(e))
    finally:
        client.close()


# ---------------------------------------------------------------- delete

def delete(
    args: Optional[list[str]] = typer.Argument(None, metavar="KIND NAME... | KIND/NAME... | KIND --all"),
    filename: Optional[list[str]] = typer.Option(None, "-f", "--filename", help="repeatable; files or directories"),
    recursive: bool = typer.Option(False, "-R", "--recursive"),
    all_: bool = typer.Option(False, "--all", help="every object of the kind in the namespace"),
    selector: Optional[str] = typer.Option(None, "-l", "--selector"),
    ignore_not_found: bool = typer.Option(False, "--ignore-not-found", help="a missing object is not an error"),
    namespace: str = typer.Option("default", "-n", "--namespace"),
) -> None:
    """Delete objects by file, by kind and names, or all of a kind (dependents are garbage-collected)."""
    _delete(args or [], filename or [], recursive, all_, selector, ignore_not_found, namespace)


@interruptible
def _delete(args: list[str], filename: list[str], recursive: bool, all_: bool, selector: str | None,
            ignore_not_found: bool, namespace: str) -> None:
    targets: list[tuple[registry.ResourceType, str, str | None]] = []
    kinds: list[registry.ResourceType] = []
    if filename:
        if args:
            fail("error: there is no need to specify a resource type as a separate argument when passing "
                 "arguments in resource/name form or with -f", EXIT_INVALID)
        for _, d in load_documents(manifest_files(filename, recursive), None):
            rt = registry.by_kind(d["kind"])
            md = d.get("metadata") or {}
            targets.append((rt, md.get("name", ""), md.get("namespace") if rt.namespaced else None))
    elif args and "/" in args[0]:
        for a in args:
            type_name, _, n = a.partition("/")
            if not type_name or not n:
                fail(f"error: arguments in resource/name form must have a single resource and name: {a}",
                     EXIT_INVALID)
            rt = resource(type_name)
            targets.append((rt, n, namespace if rt.namespaced else None))
    elif args:
        kinds = [resource(k) for k in args[0].split(",") if k]
        names = args[1:]
        if names and (all_ or selector):
            fail("error: name cannot be provided when a selector or --all is specified", EXIT_INVALID)
        if not names and not (all_ or selector):
            fail('error: resource(s) were provided, but no name was specified', EXIT_INVALID)
        for rt in kinds:
            targets += [(rt, n, namespace if rt.namespaced else None) for n in names]
    else:
        fail("error: you must provide one or more resources by argument or filename", EXIT_INVALID)
    client = connect()
    code = EXIT_OK
    try:
        if all_ or selector:
            found = False
            for rt in kinds:
                ns = namespace if rt.namespaced else None
                for o in client.list(rt.kind, ns, label_selector=selector).items:
                    targets.append((rt, o["metadata"]["name"], ns))
                    found = True
            if not found:
                say("No resources found\n")
        for rt, n, ns in targets:
            try:
                client.delete(rt.kind, n, ns)
                say(f"{quoted_ref(rt, n)} deleted\n")
            except NotFound as e:
                if not ignore_not_found:
                    warn(api_error_text(e))
                    code = EXIT_ERROR
            except ApiError as e:
                if isinstance(e, Unreachable):
                    fail(api_error_text(e), EXIT_UNAVAILABLE)
                warn(api_error_text(e))
                code = EXIT_ERROR
    finally:
        client.close()
    raise typer.Exit(code)


# ---------------------------------------------------------------- patch, edit

def patch(
    kind: str = typer.Argument(...),
    name: str = typer.Argument(...),
    patch_body: str = typer.Option(..., "-p", "--patch", help="the patch, JSON or YAML"),
    patch_type: str = typer.Option("merge", "--type", help="merge|json"),
    namespace: str = typer.Option("default", "-n", "--namespace"),
) -> None:
    """Patch an object (e.g. a queue's capability)."""
    _patch(kind, name, patch_body, patch_type, namespace)


@interruptible
def _patch(kind: str, name: str, patch_body: str, patch_type: str, namespace: str) -> None:
    rt = resource(kind)
    if patch_type not in ("merge", "json", "strategic"):
        fail(f'error: --type must be one of "json", "merge", not "{patch_type}"', EXIT_INVALID)
    try:
        body = yaml.safe_load(patch_body)
    except yaml.YAMLError as e:
        fail(f"error: unable to parse the patch: {e}", EXIT_INVALID)
    client = connect()
    try:
        client.patch(rt.kind, name, namespace if rt.namespaced else None, body,
                     patch_type="merge" if patch_type == "strategic" else patch_type)
        say(f"{ref(rt, name)} patched\n")
    except ApiError as e:
        fail(api_error_text(e), exit_code_of(e))
    finally:
        client.close()


def edit(
    kind: str = typer.Argument(...),
    name: str = typer.Argument(...),
    namespace: str = typer.Option("default", "-n", "--namespace"),
) -> None:
    """Edit an object in $EDITOR (spec, labels, annotations)."""
    _edit(kind, name, namespace)


@interruptible
def _edit(kind: str, name: str, namespace: str) -> None:
    rt = resource(kind)
    ns = namespace if rt.namespaced else None
    client = connect()
    try:
        try:
            obj = client.get(rt.kind, name, ns)
        except ApiError as e:
            fail(api_error_text(e), exit_code_of(e))
        text = dump(obj, "yaml")
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
            say("Edit cancelled, no changes made.\n")
            return
        try:
            new = yaml.safe_load(new_text)
        except yaml.YAMLError as e:
            fail(f"error: the edited file is not valid YAML: {e}", EXIT_INVALID)
        if not isinstance(new, dict):
            fail("error: the edited file must hold one object", EXIT_INVALID)
        try:
            client.update(new)
            say(f"{ref(rt, name)} edited\n")
        except ApiError as e:
            fail(api_error_text(e), exit_code_of(e))
    finally:
        client.close()


# ---------------------------------------------------------------- version

def client_version() -> str:
    return f"v{__version__}"


def version(
    client_only: bool = typer.Option(False, "--client", help="the client's version only"),
) -> None:
    """The client's version and, when a control plane is running, the server's (as kubectl version)."""
    say(f"Client Version: {client_version()}\n")
    if client_only:
        return
    ep = read_endpoint(phalanx_home_dir())
    if ep is None:
        warn("no Phalanx control plane is running (`phalanx up` starts one)")
        return
    client = ep.rest()
    try:
        info = client.version()
    except ApiError as e:
        fail(api_error_text(e), exit_code_of(e))
    finally:
        client.close()
    say(f"Server Version: {info.get('gitVersion', '')}\n")


# The commands `phalanx` registers under their function names.
COMMANDS = (apply, get, describe, logs, delete, patch, edit, version)
