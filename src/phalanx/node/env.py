"""A container's environment and argv, resolved as the kubelet does. Pure.

``env`` entries in order (``value`` / ``valueFrom.fieldRef`` /
``valueFrom.resourceFieldRef``), ``$(VAR)`` expansion against the variables
defined before (``$$`` escapes), and the same expansion in ``command``/``args``.
The result is an argv list handed to exec: nothing is ever re-quoted for a shell.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from phalanx.objects.quantity import parse_quantity

Obj = dict[str, Any]


class ContainerConfigError(ValueError):
    """The container cannot be configured; the message names the field and the rule."""


@dataclass(frozen=True)
class PodContext:
    """What fieldRef may read that is not in the pod object itself."""

    pod_ip: str = ""
    host_ip: str = "127.0.0.1"
    node_allocatable: Mapping[str, str] | None = None  # resourceFieldRef fallback when no limit


def expand(text: str, lookup: Callable[[str], str | None]) -> str:
    """Kubernetes' ``third_party/forked/golang/expansion.Expand``.

    ``$(NAME)`` becomes the value of NAME when defined, else stays as written;
    ``$$`` becomes ``$``; anything else is copied.
    """
    out: list[str] = []
    checkpoint = 0
    cursor = 0
    n = len(text)
    while cursor < n:
        if text[cursor] == "$" and cursor + 1 < n:
            out.append(text[checkpoint:cursor])
            rest = text[cursor + 1:]
            if rest[0] == "$":
                out.append("$")
                advance = 1
            elif rest[0] == "(":
                close = rest.find(")", 1)
                if close == -1:
                    out.append("$(")
                    advance = 1
                else:
                    name = rest[1:close]
                    value = lookup(name)
                    out.append(value if value is not None else f"$({name})")
                    advance = close + 1
            else:
                out.append("$" + rest[0])
                advance = 1
            cursor += advance
            checkpoint = cursor + 1
        cursor += 1
    out.append(text[checkpoint:])
    return "".join(out)


_SUBSCRIPT = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


def field_ref_value(pod: Obj, field_path: str, ctx: PodContext) -> str:
    """Value of a downward-API fieldRef, or ContainerConfigError."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    simple = {
        "metadata.name": meta.get("name", ""),
        "metadata.namespace": meta.get("namespace", ""),
        "metadata.uid": meta.get("uid", ""),
        "spec.nodeName": spec.get("nodeName", ""),
        "spec.serviceAccountName": spec.get("serviceAccountName") or spec.get("serviceAccount") or "default",
        "status.podIP": ctx.pod_ip,
        "status.podIPs": ctx.pod_ip,
        "status.hostIP": ctx.host_ip,
        "status.hostIPs": ctx.host_ip,
    }
    if field_path in simple:
        return str(simple[field_path] or "")
    m = _SUBSCRIPT.match(field_path)
    if m:
        values = meta.get(m.group(1)) or {}
        return str(values.get(m.group(2), ""))
    if field_path in ("metadata.labels", "metadata.annotations"):
        values = meta.get(field_path.split(".")[1]) or {}
        return "\n".join(f'{k}="{v}"' for k, v in sorted(values.items()))
    raise ContainerConfigError(f'unsupported fieldPath "{field_path}"')


_RESOURCE_FIELDS = {
    "limits.cpu": ("limits", "cpu"), "requests.cpu": ("requests", "cpu"),
    "limits.memory": ("limits", "memory"), "requests.memory": ("requests", "memory"),
    "limits.ephemeral-storage": ("limits", "ephemeral-storage"),
    "requests.ephemeral-storage": ("requests", "ephemeral-storage"),
}


def resource_field_value(pod: Obj, container: Obj, ref: Obj, ctx: PodContext) -> str:
    """Value of a resourceFieldRef: ceil(quantity / divisor), as the kubelet does."""
    resource = ref.get("resource")
    if resource not in _RESOURCE_FIELDS:
        raise ContainerConfigError(f'unsupported resource "{resource}"')
    target = container
    if ref.get("containerName"):
        named = next((c for c in _all_containers(pod) if c.get("name") == ref["containerName"]), None)
        if named is None:
            raise ContainerConfigError(f'container "{ref["containerName"]}" not found')
        target = named
    kind, res = _RESOURCE_FIELDS[resource]
    resources = target.get("resources") or {}
    raw = (resources.get(kind) or {}).get(res)
    if raw is None and kind == "requests":
        raw = (resources.get("limits") or {}).get(res)  # requests default to limits
    if raw is None:
        raw = (ctx.node_allocatable or {}).get(res)
    if raw is None:
        return "0"
    try:
        value = parse_quantity(raw)
        divisor = parse_quantity(ref.get("divisor") or "1")
    except ValueError as e:
        raise ContainerConfigError(str(e)) from None
    if divisor <= 0:
        raise ContainerConfigError("divisor: must be greater than zero")
    return str(int(math.ceil(value / divisor - 1e-9)))


def _all_containers(pod: Obj) -> list[Obj]:
    spec = pod.get("spec") or {}
    return list(spec.get("initContainers") or []) + list(spec.get("containers") or [])


def container_env(pod: Obj, container: Obj, ctx: PodContext, path: str,
                  predefined: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """The container's ``env`` resolved in order; ``path`` is the container's
    field path (``spec.containers[0]``) for error messages.

    ``predefined`` variables (e.g. ``PHALANX_ROOT``) count as defined before the
    container's own: ``$(NAME)`` expands to them, and they come first in the
    result unless the container's ``env`` defines the same name.
    """
    resolved: dict[str, str] = {str(k): str(v) for k, v in (predefined or {}).items()}
    env = container.get("env") or []
    own = {e["name"] for e in env if isinstance(e, dict) and isinstance(e.get("name"), str)} \
        if isinstance(env, list) else set()
    out: list[tuple[str, str]] = [(k, v) for k, v in resolved.items() if k not in own]
    if not isinstance(env, list):
        raise ContainerConfigError(f"{path}.env: must be a list")
    if container.get("envFrom"):
        raise ContainerConfigError(
            f"{path}.envFrom: Unsupported: the local runtime has no ConfigMaps or Secrets")
    for i, e in enumerate(env):
        epath = f"{path}.env[{i}]"
        if not isinstance(e, dict) or not isinstance(e.get("name"), str) or not e["name"]:
            raise ContainerConfigError(f"{epath}.name: Required value")
        name = e["name"]
        if "valueFrom" in e and e["valueFrom"] is not None:
            vf = e["valueFrom"]
            if not isinstance(vf, dict):
                raise ContainerConfigError(f"{epath}.valueFrom: must be an object")
            if isinstance(vf.get("fieldRef"), dict):
                try:
                    value = field_ref_value(pod, str(vf["fieldRef"].get("fieldPath", "")), ctx)
                except ContainerConfigError as err:
                    raise ContainerConfigError(f"{epath}.valueFrom.fieldRef.fieldPath: {err}") from None
            elif isinstance(vf.get("resourceFieldRef"), dict):
                try:
                    value = resource_field_value(pod, container, vf["resourceFieldRef"], ctx)
                except ContainerConfigError as err:
                    raise ContainerConfigError(f"{epath}.valueFrom.resourceFieldRef: {err}") from None
            else:
                kinds = ", ".join(sorted(vf)) or "nothing"
                raise ContainerConfigError(
                    f"{epath}.valueFrom: Unsupported: {kinds}: the local runtime supports fieldRef and "
                    "resourceFieldRef only (it has no ConfigMaps or Secrets)")
        else:
            raw = e.get("value", "")
            value = expand("" if raw is None else str(raw), resolved.get)
        resolved[name] = value
        out.append((name, value))
    return out


def container_argv(container: Obj, env: Mapping[str, str], path: str) -> list[str]:
    """``command + args`` with ``$(VAR)`` expanded; ContainerConfigError if empty."""
    command = container.get("command") or []
    args = container.get("args") or []
    if not isinstance(command, list) or not isinstance(args, list):
        raise ContainerConfigError(f"{path}.command: must be a list of strings")
    if not command and not args:
        raise NoCommandError(
            f"{path}.command: Required value: Phalanx's local runtime does not pull or run images; "
            f"it runs the container's command on this host (image \"{container.get('image', '')}\" is only "
            "recorded), so the container needs a command (or args)")
    # args alone run as an image without ENTRYPOINT runs them (busybox: `kubectl run -- sh -c ...`).
    return [expand(str(a), env.get) for a in [*command, *args]]


class NoCommandError(ContainerConfigError):
    """A container without ``command``: restarting cannot help."""
