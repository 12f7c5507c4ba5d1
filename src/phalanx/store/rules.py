"""The apiserver's object rules the store applies on every write, as pure functions:
metadata and name checks, preconditions, system fields, finalizers, generation, patches, pod grace."""
from __future__ import annotations

import json
import os
import random
from typing import Any

from phalanx.api.manifest import MAX_DEPTH, ShapeError, normalize_json
from phalanx.api.registry import ResourceType, by_kind
from phalanx.api.scheduling import check_deletable as check_priority_class_deletable
from phalanx.objects.errors import ApiError, BadRequest, Conflict, FieldError, Invalid
from phalanx.store import codec
from phalanx.store.errors import MAX_OBJECT_BYTES, ObjectTooLarge, PatchRejected, PreconditionConflict
from phalanx.store.patch import JsonPatchError, json_equal, json_patch, merge_patch

Obj = dict[str, Any]

DEFAULT_POD_GRACE_SECONDS = 30
GENERATE_NAME_CHARS = "bcdfghjklmnpqrstvwxz2456789"  # apiserver's SimpleNameGenerator alphabet
GENERATE_NAME_SUFFIX = 5
MAX_NAME_LENGTH = 253
# What the apiserver's create strategies put in a fresh object's status.
INITIAL_STATUS: dict[str, dict[str, Any]] = {"Pod": {"phase": "Pending"}, "Namespace": {"phase": "Active"},
                  "HorizontalPodAutoscaler": {"desiredReplicas": 0}}

FOREGROUND_FINALIZER = "foregroundDeletion"
ORPHAN_FINALIZER = "orphan"
PROPAGATION_POLICIES = ("Background", "Foreground", "Orphan")


def gc_finalizers(policy: str | None, finalizers: list[str]) -> list[str]:
    """The finalizers a delete with ``policy`` leaves (apiserver
    deletionFinalizersForGarbageCollection): the policy's own, never both."""
    if policy is None:
        return list(finalizers)
    out = [f for f in finalizers if f not in (FOREGROUND_FINALIZER, ORPHAN_FINALIZER)]
    if policy == "Foreground":
        out.append(FOREGROUND_FINALIZER)
    elif policy == "Orphan":
        out.append(ORPHAN_FINALIZER)
    return out


def resource_name(rt: ResourceType) -> str:
    """How the apiserver names a resource in messages: ``pods``, ``pytorchjobs.kubeflow.org``."""
    return f"{rt.plural}.{rt.group}" if rt.group else rt.plural


def tracks_generation(rt: ResourceType) -> bool:
    """Custom resources and (since 1.32) Pods carry metadata.generation; the other
    built-in v1 kinds served (Node, Namespace, Service, Event) and HorizontalPodAutoscalers do not."""
    return (bool(rt.group) and rt.kind != "HorizontalPodAutoscaler") or rt.kind == "Pod"


# uids: random version-4 UUIDs, as the apiserver's, from a PRNG seeded from the OS
# rather than os.urandom per uid: uniqueness is all a uid needs, it guards nothing.
_uid_rng = random.Random()
os.register_at_fork(after_in_child=_uid_rng.seed)  # a forked child must not repeat the parent's uids


def random_uid() -> str:
    """A version-4 uuid as ``str(uuid.UUID(int=bits, version=4))`` spells it, without building the UUID."""
    n = _uid_rng.getrandbits(128) & _UID_KEEP | _UID_SET
    h = "%032x" % n
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


# RFC 4122's variant bits (10) and version 4, where uuid.UUID(version=4) puts them.
_UID_KEEP = ~((0xc000 << 48) | (0xf000 << 64))
_UID_SET = (0x8000 << 48) | (4 << 76)


def invalid(rt: ResourceType, name: str, *errors: FieldError) -> Invalid:
    return Invalid(list(errors), prefix=f'{rt.kind} "{name}" is invalid: ')


# ---------------------------------------------------------------- kinds and namespaces


def resource_type(kind: str) -> ResourceType:
    """The registry entry of ``kind``; BadRequest for a kind the store does not keep."""
    try:
        return by_kind(kind)
    except (KeyError, TypeError):
        raise BadRequest(f'unknown kind "{kind}"') from None


def resource_type_of(obj: Obj) -> ResourceType:
    kind = obj.get("kind")
    if not kind or not isinstance(kind, str):
        raise BadRequest("Object 'Kind' is missing in the object")
    return resource_type(kind)


def request_namespace(rt: ResourceType, namespace: str | None) -> str | None:
    """The namespace a request names: required for namespaced kinds, None otherwise."""
    if not rt.namespaced:
        return None
    if not namespace or not isinstance(namespace, str):
        raise BadRequest(f"a namespace is required for {resource_name(rt)}")
    return namespace


def object_namespace(rt: ResourceType, obj: Obj, name: str) -> str | None:
    """The object's namespace: required for namespaced kinds, dropped otherwise."""
    meta = obj["metadata"]
    if not rt.namespaced:
        meta.pop("namespace", None)
        return None
    ns: str | None = meta.get("namespace")
    if not ns:
        raise invalid(rt, name, FieldError("metadata.namespace", "Required", f"{rt.kind} is a namespaced kind"))
    return ns


# ---------------------------------------------------------------- copies and shapes


def copy_in(obj: Any) -> Obj:
    """A deep copy of client input, checked to be a JSON object (json module: exact for any input)."""
    if not isinstance(obj, dict):
        raise BadRequest("the object must be a JSON object")
    try:
        out: Obj = json.loads(json.dumps(obj, separators=(",", ":"), allow_nan=False))
    except (TypeError, ValueError, RecursionError) as e:
        raise BadRequest(f"the object is not valid JSON: {e}") from None
    return out


def serialize(obj: Obj) -> str:
    """The stored JSON of an admitted object."""
    try:
        return codec.dumps(obj)
    except (TypeError, ValueError, RecursionError) as e:
        raise ApiError(f"Internal error occurred: object is not JSON-serializable: {e}") from e


def check_size(rt: ResourceType, name: str, raw: str) -> None:
    size = len(raw.encode("utf-8")) if not raw.isascii() else len(raw)
    if size > MAX_OBJECT_BYTES:
        raise ObjectTooLarge(rt, name, size)


def checked_status(rt: ResourceType, name: str, status: Any) -> Any:
    """A status written apart from admission still gets admission's shape
    rules (depth, value count, integer size), refused naming the field;
    returns a fresh copy of it."""
    try:
        return normalize_json({"status": status}, strip_nulls=False, max_depth=MAX_DEPTH)["status"]
    except ShapeError as e:
        raise invalid(rt, name, FieldError(e.path or "status", "Invalid", e.detail, e.value_type)) from None


def check_api_version(rt: ResourceType, obj: Obj) -> None:
    av = obj.get("apiVersion")
    if av is None:
        obj["apiVersion"] = rt.api_version
    elif av != rt.api_version:
        raise BadRequest(f'apiVersion "{av}" is not served for kind {rt.kind} (expected "{rt.api_version}")')


def checked_meta(rt: ResourceType, obj: Obj) -> dict[str, Any]:
    """metadata (added when missing), type-checked where the store itself relies on it."""
    meta = obj.get("metadata")
    if meta is None:
        meta = obj["metadata"] = {}
    name = meta.get("name", "") if isinstance(meta, dict) else ""
    name = name if isinstance(name, str) else ""
    if not isinstance(meta, dict):
        raise invalid(rt, name, FieldError("metadata", "Invalid", "must be an object", "<non-object>"))
    errors: list[FieldError] = []
    for f in ("name", "namespace", "generateName"):
        if meta.get(f) is not None and not isinstance(meta[f], str):
            errors.append(FieldError(f"metadata.{f}", "Invalid", "must be a string", meta[f]))
    for f in ("labels", "annotations"):
        v = meta.get(f)
        if v is None:
            continue
        if not isinstance(v, dict):
            errors.append(FieldError(f"metadata.{f}", "Invalid", "must be a map of strings", str(v)))
            continue
        for k, val in v.items():
            if not isinstance(val, str):
                errors.append(FieldError(f"metadata.{f}[{k}]", "Invalid", "must be a string", val))
    fin = meta.get("finalizers")
    if fin is not None and (not isinstance(fin, list) or not all(isinstance(x, str) for x in fin)):
        errors.append(FieldError("metadata.finalizers", "Invalid", "must be a list of strings", str(fin)))
    refs = meta.get("ownerReferences")
    if refs is not None:
        if not isinstance(refs, list):
            errors.append(FieldError("metadata.ownerReferences", "Invalid", "must be a list", str(refs)))
        else:
            for i, r in enumerate(refs):
                if not isinstance(r, dict):
                    errors.append(FieldError(f"metadata.ownerReferences[{i}]", "Invalid", "must be an object", str(r)))
                    continue
                for f in ("apiVersion", "kind", "name", "uid"):
                    if not isinstance(r.get(f), str) or not r.get(f):
                        errors.append(FieldError(f"metadata.ownerReferences[{i}].{f}", "Required"))
    if errors:
        raise invalid(rt, name, *errors)
    return meta


def check_name(rt: ResourceType, name: str) -> None:
    problem = None
    if len(name) > MAX_NAME_LENGTH:
        problem = f"must be no more than {MAX_NAME_LENGTH} characters"
    elif name in (".", ".."):
        problem = f'may not be "{name}"'
    elif "/" in name or "%" in name:
        problem = "may not contain '/' or '%'"
    if problem:
        raise invalid(rt, name, FieldError("metadata.name", "Invalid", problem, name))


def required_name(rt: ResourceType, meta: dict[str, Any]) -> str:
    name = meta.get("name")
    if not name:
        raise invalid(rt, "", FieldError("metadata.name", "Required", "name is required"))
    return str(name)


def check_identity(rt: ResourceType, obj: Obj, ns: str | None, name: str) -> None:
    """Admission and plugins may not change what the object is."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if (not isinstance(meta, dict) or obj.get("kind") != rt.kind or meta.get("name") != name
            or (rt.namespaced and meta.get("namespace") != ns)):
        raise ApiError("Internal error occurred: admission changed the identity of the object")


# ---------------------------------------------------------------- updates


def check_preconditions(rt: ResourceType, name: str, meta: dict[str, Any], old: Obj) -> None:
    """A set resourceVersion or uid must match the stored object's."""
    rv = meta.get("resourceVersion")
    if rv not in (None, "") and str(rv) != old["metadata"].get("resourceVersion"):
        raise Conflict(resource_name(rt), name)
    uid = meta.get("uid")
    if uid not in (None, "") and uid != old["metadata"].get("uid"):
        raise PreconditionConflict(
            resource_name(rt), name,
            f"Precondition failed: UID in precondition: {uid}, UID in object meta: {old['metadata'].get('uid')}")


def keep_system_fields(rt: ResourceType, obj: Obj, old: Obj) -> None:
    """What a client cannot change through update: identity stamps, deletion
    state, generation (recomputed) and, with a status subresource, status."""
    meta, old_meta = obj["metadata"], old["metadata"]
    for f in ("uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
        if f in old_meta:
            meta[f] = old_meta[f]
        else:
            meta.pop(f, None)
    if rt.namespaced:
        meta["namespace"] = old_meta.get("namespace")
    if rt.has_status:
        if "status" in old:
            obj["status"] = old["status"]
        else:
            obj.pop("status", None)


def check_finalizers(rt: ResourceType, name: str, obj: Obj, old: Obj) -> None:
    """No finalizer may be added to an object being deleted."""
    if not old["metadata"].get("deletionTimestamp"):
        return
    before = set(old["metadata"].get("finalizers") or [])
    added = [f for f in obj["metadata"].get("finalizers") or [] if f not in before]
    if added:
        raise invalid(rt, name, FieldError(
            "metadata.finalizers", "Forbidden", "no new finalizers can be added if the object is being deleted"))


def should_delete_during_update(old_meta: dict[str, Any], meta: dict[str, Any]) -> bool:
    """apiserver ShouldDeleteDuringUpdate: the last finalizer of an object being
    deleted (with no grace period pending) was just removed."""
    if meta.get("finalizers") or not old_meta.get("finalizers"):
        return False
    if not meta.get("deletionTimestamp"):
        return False
    grace = meta.get("deletionGracePeriodSeconds")
    return not (isinstance(grace, int) and grace > 0)


def spec_changed(rt: ResourceType, old: Obj, new: Obj) -> bool:
    if rt.has_status:
        return not json_equal(old.get("spec"), new.get("spec"))
    # Without a status subresource every change outside metadata counts,
    # as for a CRD (PodGroup status writes bump generation in Kubernetes).
    keys = (set(old) | set(new)) - {"metadata"}
    return any(not json_equal(old.get(k), new.get(k)) for k in keys)


def bump_generation(rt: ResourceType, meta: dict[str, Any]) -> None:
    if tracks_generation(rt) and isinstance(meta.get("generation"), int):
        meta["generation"] += 1


def patched(rt: ResourceType, ns: str | None, name: str, current: Obj, patch: Any, patch_type: str) -> Obj:
    """``current`` with a merge (RFC 7386) or JSON (RFC 6902) patch applied; it may
    not change the object's kind, name or namespace."""
    if patch_type == "merge":
        if not isinstance(patch, dict):
            raise BadRequest("merge patch must be a JSON object")
        out = merge_patch(current, patch)
    elif patch_type == "json":
        try:
            out = json_patch(current, patch)
        except JsonPatchError as e:
            raise PatchRejected(str(e), e.index, e.pointer) from None
    else:
        raise BadRequest(f'unsupported patch type "{patch_type}" (supported: "merge", "json")')
    if not isinstance(out, dict):
        raise BadRequest("the patched object must be a JSON object")
    if out.get("kind") != rt.kind:
        raise BadRequest(f'the patch may not change kind (from "{rt.kind}" to {out.get("kind")!r})')
    pmeta = out.get("metadata")
    if not isinstance(pmeta, dict):
        raise invalid(rt, name, FieldError("metadata", "Required"))
    if pmeta.get("name") != name:
        raise BadRequest(f"the name of the object ({pmeta.get('name')}) does not match the name on the URL ({name})")
    if rt.namespaced and pmeta.get("namespace") != ns:
        raise BadRequest(
            f"the namespace of the object ({pmeta.get('namespace')}) does not match the namespace on the URL ({ns})")
    return out


# ---------------------------------------------------------------- deletion


def pod_grace(pod: Obj, requested: int | None) -> int:
    """The apiserver's pod CheckGracefulDelete: the effective grace period."""
    spec: dict[str, Any] = pod["spec"] if isinstance(pod.get("spec"), dict) else {}
    status: dict[str, Any] = pod["status"] if isinstance(pod.get("status"), dict) else {}
    if requested is not None:
        period = requested
    else:
        t = spec.get("terminationGracePeriodSeconds")
        period = t if isinstance(t, int) and not isinstance(t, bool) else DEFAULT_POD_GRACE_SECONDS
    if not spec.get("nodeName"):
        period = 0
    if status.get("phase") in ("Succeeded", "Failed"):
        period = 0
    if period < 0:
        period = 1
    return period


def check_deletable(rt: ResourceType, name: str) -> None:
    """What the apiserver's storage never deletes: the system PriorityClasses (403)."""
    if rt.kind == "PriorityClass":
        check_priority_class_deletable(name)


def check_delete_options(grace_period_seconds: Any, propagation_policy: Any) -> None:
    if grace_period_seconds is not None and (
            isinstance(grace_period_seconds, bool) or not isinstance(grace_period_seconds, int)):
        raise BadRequest(f"gracePeriodSeconds: Invalid value: {grace_period_seconds!r}: must be an integer")
    if propagation_policy not in (None, *PROPAGATION_POLICIES):
        raise BadRequest(f'propagationPolicy: Unsupported value: "{propagation_policy}": supported values: '
                         + ", ".join(f'"{p}"' for p in PROPAGATION_POLICIES))
