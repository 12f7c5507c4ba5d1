"""`phalanx apply -f`: the manifests a path names, checked, then created or patched with
kubectl's client-side three-way merge (what the file drops is removed).
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Optional

import typer

from phalanx.api import registry
from phalanx.cli.applyconfig import FIELD_MANAGER, last_applied, three_way_patch, with_last_applied
from phalanx.cli.cmdutil import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_UNAVAILABLE,
    NO_CONTROL_PLANE,
    api_error_text,
    dump,
    exit_code_of,
    fail,
    interruptible,
    ref,
    say,
    warn,
)
from phalanx.cli.controlplane import home as phalanx_home_dir
from phalanx.cli.controlplane import read_endpoint
from phalanx.client.wire import Unreachable
from phalanx.objects.errors import ApiError, NotFound

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")


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
    from phalanx.api.manifest import load_manifests  # lazy for start-up speed: only -f needs it

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
            raw_md = d.get("metadata")
            md = raw_md if isinstance(raw_md, dict) else {}
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
    # Lazy for start-up speed: admission loads every kind's defaulting and validation.
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
    docs = load_documents(manifest_files(filename, recursive), namespace)
    if dry_run:
        from phalanx.api.admission import admit  # lazy for start-up speed, as in _check_offline

        _check_offline(docs)
        for _, d in docs:
            say("---\n" + dump(admit(d), "yaml"))
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

