"""``DeleteOptions`` of a DELETE request, from its body or its query, as the apiserver reads them.

kubectl sends ``{"propagationPolicy":"Background"}`` in the body (docs/REFERENCE.md golden 67);
curl users put ``gracePeriodSeconds`` / ``propagationPolicy`` in the query.
A field in the body wins over the same query parameter. Pure: no I/O.

Phalanx decision (README "kubectl"): a training job (any of
``registry.JOB_KINDS``: PyTorchJob, TFJob, XGBoostJob, PaddleJob, JAXJob,
MPIJob) deleted with the Background policy, or with none, is deleted in the
Foreground: it stays, marked with ``deletionTimestamp`` and the
``foregroundDeletion`` finalizer, until the garbage collector has removed its
pods, Services, PodGroup and other dependents (an MPIJob's ConfigMap, ...).
So ``kubectl delete -f job.yaml`` (which always asks for Background and then
waits for the object to be gone) returns only once nothing of the job is left.
``Orphan`` is honoured as asked.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

from phalanx.api.registry import JOB_KINDS
from phalanx.objects.errors import BadRequest

POLICIES = ("Background", "Foreground", "Orphan")


@dataclass(frozen=True)
class DeleteOptions:
    grace_period_seconds: int | None = None
    propagation_policy: str | None = None
    preconditions_uid: str | None = None
    preconditions_resource_version: str | None = None
    dry_run: bool = False


def _grace(value: Any, source: str) -> int | None:
    if value is None or value == "":
        return None
    if source == "query":
        try:
            value = int(value)
        except (TypeError, ValueError):
            raise BadRequest(f'gracePeriodSeconds: Invalid value: "{value}": must be an integer') from None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"gracePeriodSeconds: Invalid value: {json.dumps(value)}: must be an integer")
    if value < 0:
        raise BadRequest(f"gracePeriodSeconds: Invalid value: {value}: must be greater than or equal to 0")
    return value


def _bool(value: Any, name: str, source: str) -> bool | None:
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        return value
    if source == "query" and isinstance(value, str):
        if value in ("1", "t", "T", "true", "TRUE", "True"):
            return True
        if value in ("0", "f", "F", "false", "FALSE", "False"):
            return False
    raise BadRequest(f"{name}: Invalid value: {json.dumps(value)}: must be a boolean")


def _string(value: Any, name: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise BadRequest(f"{name}: Invalid value: {json.dumps(value)}: must be a string")
    return value


def parse_delete_options(body: Any, query: Mapping[str, str]) -> DeleteOptions:
    """The options of one DELETE; ``body`` is the decoded body (None when empty).
    Raises BadRequest naming the field and the rule."""
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise BadRequest("DeleteOptions must be a JSON object")
    kind = body.get("kind")
    if kind not in (None, "", "DeleteOptions"):
        raise BadRequest(f'the body of a DELETE must be a DeleteOptions, not a "{kind}"')

    def pick(field: str) -> tuple[Any, str]:
        if body.get(field) is not None:
            return body[field], "body"
        return query.get(field), "query"

    grace = _grace(*pick("gracePeriodSeconds"))
    policy = _string(pick("propagationPolicy")[0], "propagationPolicy")
    if policy is not None and policy not in POLICIES:
        raise BadRequest(f'propagationPolicy: Unsupported value: "{policy}": supported values: '
                         + ", ".join(f'"{p}"' for p in POLICIES))
    value, source = pick("orphanDependents")
    orphan = _bool(value, "orphanDependents", source)
    if orphan is not None:
        if policy is not None:
            raise BadRequest("orphanDependents: Invalid value: " + json.dumps(orphan)
                             + ": orphanDependents and propagationPolicy cannot both be set")
        policy = "Orphan" if orphan else "Background"
    pre = body.get("preconditions")
    if pre is None:
        pre = {}
    if not isinstance(pre, dict):
        raise BadRequest("preconditions: Invalid value: must be an object with uid and/or resourceVersion")
    uid = _string(pre.get("uid"), "preconditions.uid")
    rv = _string(pre.get("resourceVersion"), "preconditions.resourceVersion")

    dry = body.get("dryRun")
    dry_values = dry if isinstance(dry, list) else ([] if dry in (None, "") else [dry])
    dry_values += list(query.getall("dryRun", [])) if hasattr(query, "getall") else (
        [query["dryRun"]] if query.get("dryRun") else [])
    for v in dry_values:
        if v != "All":
            raise BadRequest(f'dryRun: Unsupported value: {json.dumps(v)}: supported values: "All"')
    return DeleteOptions(grace, policy, uid, rv, bool(dry_values))


def effective_policy(kind: str, requested: str | None) -> str | None:
    """The propagation policy Phalanx applies (see the module docstring): jobs
    are deleted in the Foreground unless Orphan is asked; other kinds as asked
    (None: the store's default, Background)."""
    if kind in JOB_KINDS and requested in (None, "Background"):
        return "Foreground"
    return requested
