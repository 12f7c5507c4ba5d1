"""Admission rule of the local runtime: every container has something to run.

The local runtime runs a container's ``command`` + ``args`` on this machine
(``args`` alone, as an image without ENTRYPOINT runs them); it has no image to
take an entrypoint from. So a Pod or a job's pod template whose container has
neither is refused when written, naming the field, instead of failing later.
"""
from __future__ import annotations

from typing import Any, Iterator

from phalanx.api.kubeflow import FRAMEWORKS, MPI
from phalanx.api.registry import by_kind, lookup
from phalanx.objects.errors import FieldError, Invalid

Obj = dict[str, Any]

DETAIL = ("Phalanx's local runtime runs the container's command on this machine, not an image "
          "(image \"{image}\" is only recorded): give the container a command (or args)")


def _templates(obj: Obj) -> Iterator[tuple[str, Obj, bool]]:
    """(path of the pod spec, pod spec, containers may lack a command) of the object."""
    kind = obj.get("kind")
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return
    if kind == "Pod":
        yield "spec", spec, False
        return
    fw = FRAMEWORKS.get(kind) if isinstance(kind, str) else None
    if fw is None:
        return
    replicas = spec.get(fw.replica_specs_field)
    if not isinstance(replicas, dict):
        return
    for rtype, replica in replicas.items():
        template = (replica or {}).get("template") if isinstance(replica, dict) else None
        pod_spec = template.get("spec") if isinstance(template, dict) else None
        if isinstance(pod_spec, dict):
            # The MPI operator gives workers without a command `sleep 365d`.
            optional = fw is MPI and rtype == "Worker"
            yield f"spec.{fw.replica_specs_field}[{rtype}].template.spec", pod_spec, optional


def missing_commands(obj: Obj) -> list[FieldError]:
    errors = []
    for path, pod_spec, optional in _templates(obj):
        if optional:
            continue
        for field_name in ("initContainers", "containers"):
            containers = pod_spec.get(field_name)
            if not isinstance(containers, list):
                continue
            for i, c in enumerate(containers):
                if not isinstance(c, dict) or c.get("command") or c.get("args"):
                    continue
                errors.append(FieldError(f"{path}.{field_name}[{i}].command", "Required",
                                         DETAIL.format(image=c.get("image", ""))))
    return errors


def admission_plugin(op: str, obj: Obj | None, old: Obj | None) -> Obj | None:
    """Store admission plugin: refuse a create, or a spec change, that leaves a
    container with nothing to run."""
    if op not in ("create", "update") or not isinstance(obj, dict):
        return obj
    if op == "update" and isinstance(old, dict) and old.get("spec") == obj.get("spec"):
        return obj
    errors = missing_commands(obj)
    if errors:
        kind = str(obj.get("kind"))
        rt = lookup(kind)
        name = (obj.get("metadata") or {}).get("name", "")
        qualified = f"{kind}.{by_kind(kind).group}" if rt is not None and rt.group else kind
        raise Invalid(errors, prefix=f'{qualified} "{name}" is invalid: ')
    return obj
