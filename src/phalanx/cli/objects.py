"""The object commands (`get`, `apply`, `describe`, `logs`, `delete`, `patch`, `edit`,
`version`), kubectl-shaped, over the blocking ``RestClient``: they load no control
plane code, no event loop and no HTTP library beyond the standard one.

Exit codes: 0 ok, 1 error (or a server error), 2 invalid input, 3 cannot run (no
control plane, cannot connect), 130 interrupted.
"""
from __future__ import annotations

import os
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, NoReturn, Optional

import typer

from phalanx.api import registry
from phalanx.cli import printers
from phalanx.cli.controlplane import home as phalanx_home_dir
from phalanx.cli.controlplane import read_endpoint
from phalanx.client.wire import Unreachable
from phalanx.objects.errors import ApiError, NotFound

EXIT_OK, EXIT_ERROR, EXIT_INVALID, EXIT_UNAVAILABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_CODES_HELP = ("Exit codes: 0 ok; 1 error (or the job Failed); 2 invalid input; "
                   "3 could not run (no control plane, cannot connect); 130 interrupted.")
OUTPUT_FORMATS = "custom-columns,json,jsonpath,name,wide,yaml"
MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


# ---------------------------------------------------------------- helpers

def say(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def warn(text: str) -> None:
    sys.stderr.write(text if text.endswith("\n") else text + "\n")
    sys.stderr.flush()


def fail(msg: str, code: int = EXIT_ERROR) -> NoReturn:
    warn(msg)
    raise typer.Exit(code)


def api_error_text(e: ApiError, verb: str | None = None, source: str | None = None) -> str:
    """kubectl's ``Error from server (Reason): [error when VERB "SOURCE": ]message``."""
    if isinstance(e, Unreachable):
        return f"error: {e.message}"
    where = f'error when {verb} "{source}": ' if verb and source else ""
    return f"Error from server ({e.reason}): {where}{e.message}"


def exit_code_of(e: ApiError) -> int:
    if isinstance(e, Unreachable):
        return EXIT_UNAVAILABLE
    return EXIT_INVALID if e.code in (400, 403, 422) else EXIT_ERROR


def interruptible(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Ctrl-C exits 130, as a shell reports a command killed by SIGINT."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt:
            sys.stderr.write("\n")
            raise typer.Exit(EXIT_INTERRUPTED) from None

    return wrapper


NO_CONTROL_PLANE = ("error: no Phalanx control plane is running; start one with `phalanx up` "
                    "(or run a job with `phalanx run FILE`)")


def connect():
    """A RestClient for the running control plane; exit 3 when there is none."""
    ep = read_endpoint(phalanx_home_dir())
    if ep is None:
        fail(NO_CONTROL_PLANE, EXIT_UNAVAILABLE)
    return ep.rest()


def resource(kind_name: str) -> registry.ResourceType:
    rt = registry.lookup(kind_name)
    if rt is None:
        fail(f'error: the server doesn\'t have a resource type "{kind_name}"', EXIT_INVALID)
    return rt


def ref(rt: registry.ResourceType, name: str) -> str:
    return f"{rt.singular}{'.' + rt.group if rt.group else ''}/{name}"


def quoted_ref(rt: registry.ResourceType, name: str) -> str:
    return f'{rt.singular}{"." + rt.group if rt.group else ""} "{name}"'


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _dump(obj: Any, fmt: str) -> str:
    return printers.to_json(obj) if fmt == "json" else printers.to_yaml(obj)


# ---------------------------------------------------------------- get

class Output:
    """A parsed ``-o``: kind (table, wide, yaml, json, name, jsonpath, custom-columns) and its argument."""

    def __init__(self, raw: Optional[str]) -> None:
        self.raw = raw
        self.kind = "table"
        self.arg = ""
        self.columns: list[tuple[str, str]] = []
        if raw is None or raw == "":
            return
        name, _, arg = raw.partition("=")
        if name in ("wide", "yaml", "json", "name") and not arg:
            self.kind = name
        elif name == "jsonpath":
            from phalanx.cli.jsonpath import JSONPathError, parse

            if not arg:
                fail("error: template format specified but no template given", EXIT_INVALID)
            try:
                parse(arg)
            except JSONPathError as e:
                fail(f"error: error parsing jsonpath {arg}, {e}", EXIT_INVALID)
            self.kind, self.arg = "jsonpath", arg
        elif name == "custom-columns":
            try:
                self.columns = printers.parse_custom_columns(arg)
            except ValueError as e:
                fail(f"error: {e}", EXIT_INVALID)
            self.kind = "custom-columns"
        else:
            fail(f'error: unable to match a printer suitable for the output format "{raw}", '
                 f"allowed formats are: {OUTPUT_FORMATS}", EXIT_INVALID)


def _get_targets(args: list[str]) -> list[tuple[registry.ResourceType, list[str]]]:
    """``KIND[,KIND] [NAME...]`` or ``KIND/NAME...`` as (type, names) in the order given."""
    if not args:
        fail("error: you must specify the type of resource to get. Use \"phalanx get pytorchjob\", "
             "\"phalanx get po\", ...", EXIT_INVALID)
    if "/" in args[0]:
        out: list[tuple[registry.ResourceType, list[str]]] = []
        for a in args:
            type_name, _, name = a.partition("/")
            if not name or not type_name:
                fail(f"error: arguments in resource/name form must have a single resource and name: {a}",
                     EXIT_INVALID)
            rt = resource(type_name)
            for i, (r, names) in enumerate(out):
                if r.kind == rt.kind:
                    names.append(name)
                    break
            else:
                out.append((rt, [name]))
        return out
    kinds = []
    for k in args[0].split(","):
        if not k:
            continue
        rt = resource(k)
        if rt.kind not in [r.kind for r in kinds]:
            kinds.append(rt)
    for a in args[1:]:
        if "/" in a:
            fail("error: there is no need to specify a resource type as a separate argument when passing "
                 "arguments in resource/name form (e.g. 'phalanx get resource/<resource_name>' instead of "
                 "'phalanx get resource resource/<resource_name>'", EXIT_INVALID)
    return [(rt, list(args[1:])) for rt in kinds]


def _print_tables(groups: list[tuple[registry.ResourceType, list[dict]]], out: Output, with_ns: bool,
                  with_kind: bool, show_labels: bool, no_headers: bool) -> None:
    blocks = []
    for rt, objs in groups:
        if not objs:
            continue
        if out.kind == "custom-columns":
            headers = [h for h, _ in out.columns]
            rows = printers.custom_columns_rows(out.columns, objs)
        else:
            wide = out.kind == "wide"
            headers = printers.columns(rt.kind, wide, with_namespace=with_ns)
            now = _now()
            rows = [printers.row(o, rt.kind, wide, now, with_namespace=with_ns) for o in objs]
            if with_kind:
                rows = printers.with_kind_names(rows, objs, with_ns)
        if show_labels:
            headers, rows = printers.add_labels_column(headers, rows, objs)
        blocks.append(printers.format_table([] if no_headers else headers, rows))
    say("\n".join(blocks))


def get(
    args: Optional[list[str]] = typer.Argument(None, metavar="KIND[,KIND...] [NAME...] | KIND/NAME...",
                                               help="pytorchjob, tfjob, xgboostjob, paddlejob, jaxjob, mpijob, "
                                                    "podgroup/pg, queue/q, pod/po, node/no, service/svc, "
                                                    "event/ev, configmap/cm, namespace/ns"),
    watch: bool = typer.Option(False, "-w", "--watch"),
    output: Optional[str] = typer.Option(None, "-o", "--output",
                                         help="wide|yaml|json|name|jsonpath=TEMPLATE|custom-columns=SPEC"),
    namespace: str = typer.Option("default", "-n", "--namespace"),
    all_namespaces: bool = typer.Option(False, "-A", "--all-namespaces"),
    selector: Optional[str] = typer.Option(None, "-l", "--selector"),
    field_selector: Optional[str] = typer.Option(None, "--field-selector"),
    show_labels: bool = typer.Option(False, "--show-labels", help="a LABELS column"),
    sort_by: Optional[str] = typer.Option(None, "--sort-by", help="a JSONPath, e.g. .metadata.creationTimestamp"),
    no_headers: bool = typer.Option(False, "--no-headers"),
) -> None:
    """List objects, kubectl style (one table per kind)."""
    _get(args or [], watch, Output(output), namespace, all_namespaces, selector, field_selector, show_labels,
         sort_by, no_headers)


@interruptible
def _get(args: list[str], watch: bool, out: Output, namespace: str, all_namespaces: bool, selector: str | None,
         field_selector: str | None, show_labels: bool, sort_by: str | None, no_headers: bool) -> None:
    targets = _get_targets(args)
    if watch and len(targets) != 1:
        fail("error: you may only specify a single resource type", EXIT_INVALID)
    named = any(names for _, names in targets)
    single = len(targets) == 1 and len(targets[0][1]) == 1 and "/" not in (args[0] if args else "")
    single = single or (len(args) == 1 and "/" in args[0])
    client = connect()
    code = EXIT_OK
    errors: list[str] = []
    groups: list[tuple[registry.ResourceType, list[dict]]] = []
    rv = ""
    try:
        for rt, names in targets:
            ns = None if (all_namespaces or not rt.namespaced) else namespace
            if names:
                objs = []
                for n in names:
                    try:
                        objs.append(client.get(rt.kind, n, ns))
                    except NotFound as e:
                        errors.append(api_error_text(e))
                        code = EXIT_ERROR
                if objs:
                    rv = objs[-1].get("metadata", {}).get("resourceVersion") or ""
            else:
                lst = client.list(rt.kind, ns, label_selector=selector, field_selector=field_selector)
                objs, rv = lst.items, lst.resource_version
            if sort_by:
                try:
                    objs = printers.sort_objects(objs, sort_by)
                except ValueError as e:
                    fail(f"error: {e}", EXIT_INVALID)
            groups.append((rt, objs))
        all_objs = [o for _, objs in groups for o in objs]
        with_ns = all_namespaces and any(rt.namespaced for rt, _ in groups)
        with_kind = len(targets) > 1
        if out.kind in ("yaml", "json"):
            if all_objs or not single:
                say(_dump(all_objs[0] if single and all_objs else printers.as_list(all_objs), out.kind))
        elif out.kind == "name":
            say("".join(printers.object_name(o) + "\n" for o in all_objs))
        elif out.kind == "jsonpath":
            from phalanx.cli.jsonpath import JSONPathError, execute

            data = all_objs[0] if single and all_objs else printers.as_list(all_objs)
            if all_objs or not single:
                try:
                    say(execute(out.arg, data, allow_missing=True))
                except JSONPathError as e:
                    fail(f'error: error executing jsonpath "{out.arg}": {e}', EXIT_ERROR)
        elif watch:
            pass
        elif all_objs:
            _print_tables(groups, out, with_ns, with_kind, show_labels, no_headers)
        if not all_objs and not named and not watch:
            rt0 = targets[0][0]
            where = f" in {namespace} namespace" if rt0.namespaced and not all_namespaces else ""
            warn(f"No resources found{where}.")
        for e in errors:
            warn(e)
        if watch:
            _watch(client, targets[0][0], targets[0][1], groups[0][1], rv, out, namespace, all_namespaces,
                   selector, no_headers)
    except ApiError as e:
        fail(api_error_text(e), exit_code_of(e))
    finally:
        client.close()
    raise typer.Exit(code)


def _watch(client, rt: registry.ResourceType, names: list[str], objs: list[dict], rv: str, out: Output,
           namespace: str, all_namespaces: bool, selector: str | None, no_headers: bool) -> None:
    ns = None if (all_namespaces or not rt.namespaced) else namespace
    with_ns = all_namespaces and rt.namespaced
    wp = printers.WatchPrinter(rt.kind, out.kind == "wide", with_namespace=with_ns, no_headers=no_headers)
    if objs and out.kind not in ("yaml", "json", "name", "jsonpath"):
        say(wp.print(objs, _now()))
    for ev in client.watch(rt.kind, ns, resource_version=rv, label_selector=selector):
        if names and ev.object.get("metadata", {}).get("name") not in names:
            continue
        if out.kind in ("yaml", "json"):
            say(_dump(ev.object, out.kind))
        elif out.kind == "name":
            say(printers.object_name(ev.object) + "\n")
        else:
            say(wp.print([ev.object], _now()))


# ---------------------------------------------------------------- apply

def manifest_files(paths: list[str], recursive: bool) -> list[str]:
    """The files ``-f`` names: a file as given, a directory's .yaml/.yml/.json files
    sorted by path (with ``recursive``, its subdirectories' too), ``-`` for stdin."""
    files: list[str] = []
    for p in paths:
        if p == "-":
            files.append(p)
            continue
        path = Path(p)
        if path.is_dir():
            found = []
            for root, dirs, names in os.walk(path):
                dirs.sort()
                found += [os.path.join(root, n) for n in sorted(names) if n.endswith(MANIFEST_SUFFIXES)]
                if not recursive:
                    break
            files += found
        elif path.exists():
            files.append(p)
        else:
            fail(f'error: the path "{p}" does not exist', EXIT_INVALID)
    return files


def load_documents(files: list[str], namespace: str | None) -> list[tuple[str, dict]]:
    """(source, object) for every document, each with its namespace settled; exit 2 on
    unreadable or malformed files, unknown kinds, or a namespace that contradicts ``-n``."""
    from phalanx.api.manifest import load_manifests

    out = []
    for f in files:
        try:
            text = sys.stdin.read() if f == "-" else Path(f).read_text()
        except (OSError, UnicodeDecodeError) as e:
            fail(f"error: cannot read {f}: {getattr(e, 'strerror', None) or e}", EXIT_INVALID)
        try:
            docs = load_manifests(text, source=f)
        except ApiError as e:
            fail(f"error: {e.message}", EXIT_INVALID)
        for d in docs:
            kind, api_version = d.get("kind"), d.get("apiVersion")
            md = d.get("metadata") if isinstance(d.get("metadata"), dict) else {}
            if not kind or not api_version:
                fail(f"error: error validating \"{f}\": error validating data: "
                     f"[{'apiVersion not set' if not api_version else ''}"
                     f"{', ' if not api_version and not kind else ''}{'kind not set' if not kind else ''}]",
                     EXIT_INVALID)
            rt = registry.lookup(str(kind))
            if rt is None or rt.kind != kind:
                fail(f'error: resource mapping not found for name: "{md.get("name", "")}" namespace: '
                     f'"{md.get("namespace", "")}" from "{f}": no matches for kind "{kind}" in version '
                     f'"{api_version}"\nensure CRDs are installed first', EXIT_INVALID)
            if rt.namespaced:
                own = md.get("namespace")
                if own and namespace and own != namespace:
                    fail(f'error: the namespace from the provided object "{own}" does not match the namespace '
                         f'"{namespace}". You must pass \'--namespace={own}\' to perform this operation.',
                         EXIT_INVALID)
                d.setdefault("metadata", {})["namespace"] = own or namespace or "default"
            out.append((f, d))
    if not out:
        fail("error: no objects passed to apply", EXIT_INVALID)
    return out


def _check_offline(docs: list[tuple[str, dict]]) -> None:
    """No control plane: validate here so a bad file still says which field (exit 2)."""
    import json

    from phalanx.api.admission import admit

    bad = False
    for source, d in docs:
        try:
            admit(json.loads(json.dumps(d)))
        except ApiError as e:
            warn(api_error_text(e, "creating", source))
            bad = True
    if bad:
        raise typer.Exit(EXIT_INVALID)


def apply(
    filename: list[str] = typer.Option(..., "-f", "--filename",
                                       help="manifest file, directory (its .yaml/.yml/.json files) or - for "
                                            "stdin; repeatable"),
    recursive: bool = typer.Option(False, "-R", "--recursive", help="also the directories under -f DIR"),
    namespace: Optional[str] = typer.Option(None, "-n", "--namespace"),
    dry_run: bool = typer.Option(False, "--dry-run", help="print the defaulted, validated objects; send nothing"),
) -> None:
    """Create or update objects (kubectl's client-side apply: what the file drops is removed)."""
    _apply(filename, recursive, namespace, dry_run)


@interruptible
def _apply(filename: list[str], recursive: bool, namespace: str | None, dry_run: bool) -> None:
    from phalanx.cli.applyconfig import FIELD_MANAGER, last_applied, three_way_patch, with_last_applied

    docs = load_documents(manifest_files(filename, recursive), namespace)
    if dry_run:
        from phalanx.api.admission import admit

        _check_offline(docs)
        for _, d in docs:
            say("---\n" + _dump(admit(d), "yaml"))
        return
    ep = read_endpoint(phalanx_home_dir())
    if ep is None:
        _check_offline(docs)
        fail(NO_CONTROL_PLANE, EXIT_UNAVAILABLE)
    client = ep.rest()
    params = {"fieldManager": FIELD_MANAGER, "fieldValidation": "Strict"}
    code = EXIT_OK
    try:
        for source, d in docs:
            rt = registry.by_kind(d["kind"])
            md = d.get("metadata") or {}
            name = md.get("name", "")
            ns = md.get("namespace") if rt.namespaced else None
            modified = with_last_applied(d)
            verb = "creating"
            try:
                try:
                    live = client.get(rt.kind, name, ns)
                except NotFound:
                    client.create(modified, params=params)
                    say(f"{ref(rt, name)} created\n")
                    continue
                verb = "patching"
                original = last_applied(live)
                if original is None:
                    warn(f"Warning: resource {rt.plural}/{name} is missing the "
                         "kubectl.kubernetes.io/last-applied-configuration annotation which is required by "
                         "phalanx apply. phalanx apply should only be used on resources created declaratively "
                         "by phalanx apply or kubectl apply. The missing annotation will be patched automatically.")
                patch = three_way_patch(original, modified, live)
                if not patch:
                    say(f"{ref(rt, name)} unchanged\n")
                    continue
                client.patch(rt.kind, name, ns, patch, "merge", params=params)
                say(f"{ref(rt, name)} configured\n")
            except ApiError as e:
                if isinstance(e, Unreachable):
                    fail(api_error_text(e), EXIT_UNAVAILABLE)
                warn(api_error_text(e, verb, source))
                if code != EXIT_INVALID:
                    code = exit_code_of(e)
    finally:
        client.close()
    raise typer.Exit(code)


# ---------------------------------------------------------------- describe

def events_of(client, obj: dict, rt: registry.ResourceType) -> list[dict]:
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
    from phalanx.cli import describe as describe_mod

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
            related["events"].sort(key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
            texts.append(describe_mod.describe(obj, related))
        say("\n\n".join(t.rstrip("\n") for t in texts) + ("\n" if texts else ""))
    except ApiError as e:
        fail(api_error_text(e), exit_code_of(e))
    finally:
        client.close()
    raise typer.Exit(code)


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
    import yaml

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
    import shlex
    import subprocess
    import tempfile

    import yaml

    rt = resource(kind)
    ns = namespace if rt.namespaced else None
    client = connect()
    try:
        try:
            obj = client.get(rt.kind, name, ns)
        except ApiError as e:
            fail(api_error_text(e), exit_code_of(e))
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
    from phalanx import __version__

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
