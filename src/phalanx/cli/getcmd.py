"""`phalanx get`: one table per kind (or yaml, json, name, jsonpath, custom-columns),
and with ``-w`` the rows of each change as it is watched.
"""
from __future__ import annotations

from datetime import datetime, timezone
from typing import TYPE_CHECKING, Optional

import typer

from phalanx.api import registry
from phalanx.cli import printers
from phalanx.cli.cmdutil import (
    EXIT_ERROR,
    EXIT_INVALID,
    EXIT_OK,
    api_error_text,
    connect,
    dump,
    exit_code_of,
    fail,
    interruptible,
    resource,
    say,
    warn,
)
from phalanx.objects.errors import ApiError, NotFound

if TYPE_CHECKING:
    from phalanx.client.rest import RestClient  # loaded when a command connects (Endpoint.rest)

OUTPUT_FORMATS = "custom-columns,json,jsonpath,name,wide,yaml"


def _now() -> datetime:
    return datetime.now(timezone.utc)


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
            from phalanx.cli.jsonpath import JSONPathError, parse  # lazy for start-up speed: -o jsonpath only

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
    kinds: list[registry.ResourceType] = []
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
                say(dump(all_objs[0] if single and all_objs else printers.as_list(all_objs), out.kind))
        elif out.kind == "name":
            say("".join(printers.object_name(o) + "\n" for o in all_objs))
        elif out.kind == "jsonpath":
            from phalanx.cli.jsonpath import JSONPathError, execute  # lazy for start-up speed

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
        for msg in errors:
            warn(msg)
        if watch:
            _watch(client, targets[0][0], targets[0][1], groups[0][1], rv, out, namespace, all_namespaces,
                   selector, no_headers)
    except ApiError as e:
        fail(api_error_text(e), exit_code_of(e))
    finally:
        client.close()
    raise typer.Exit(code)


def _watch(client: RestClient, rt: registry.ResourceType, names: list[str], objs: list[dict], rv: str, out: Output,
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
            say(dump(ev.object, out.kind))
        elif out.kind == "name":
            say(printers.object_name(ev.object) + "\n")
        else:
            say(wp.print([ev.object], _now()))

