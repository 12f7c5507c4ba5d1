"""The subset of strategic merge patch that kubectl sends for built-in kinds.

kubectl apply/edit patch Pods, Services, Nodes with
``application/strategic-merge-patch+json``. Maps merge as in a JSON merge
patch (null deletes); lists with a known merge key (containers and env by
``name``, ports by ``containerPort``/``port``, ...) merge item by item;
``$patch: delete|replace``, ``$setElementOrder/<list>``,
``$deleteFromPrimitiveList/<list>`` and ``$retainKeys`` are understood;
every other list is replaced. Pure, works on copies (docs/REFERENCE.md W1.7).
"""
from __future__ import annotations

import copy
from typing import Any

from phalanx.objects.errors import BadRequest

# list field -> merge key (k8s.io/api patchMergeKey tags of the kinds we serve)
MERGE_KEYS: dict[str, str] = {
    "containers": "name", "initContainers": "name", "ephemeralContainers": "name", "env": "name",
    "volumes": "name", "volumeMounts": "mountPath", "volumeDevices": "devicePath", "imagePullSecrets": "name",
    "conditions": "type", "ownerReferences": "uid", "hostAliases": "ip", "addresses": "type",
    "topologySpreadConstraints": "topologyKey", "resourceClaims": "name", "taints": "key", "webhooks": "name",
}
# lists of scalars merged as sets rather than replaced
SET_LISTS = {"finalizers"}

_ORDER = "$setElementOrder/"
_DELETE_PRIMITIVE = "$deleteFromPrimitiveList/"


def _merge_key(field: str, items: list[Any]) -> str | None:
    if field == "ports":
        for item in items:
            if isinstance(item, dict):
                return "containerPort" if "containerPort" in item else "port"
        return None
    return MERGE_KEYS.get(field)


def apply_strategic_merge(current: Any, patch: Any) -> Any:
    """``current`` with the strategic merge ``patch`` applied (a new object)."""
    if not isinstance(patch, dict):
        raise BadRequest("a strategic merge patch must be a JSON object")
    return _merge_map(current if isinstance(current, dict) else {}, patch)


def _merge_map(current: dict, patch: dict) -> Any:
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return _clean(patch)
    if directive not in (None, "merge"):
        raise BadRequest(f'unknown strategic merge patch directive "$patch: {directive}"')
    result = copy.deepcopy(current)
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith(_ORDER):
            if isinstance(value, list):
                orders[key[len(_ORDER):]] = value
            continue
        if key.startswith(_DELETE_PRIMITIVE):
            field = key[len(_DELETE_PRIMITIVE):]
            if isinstance(value, list) and isinstance(result.get(field), list):
                result[field] = [x for x in result[field] if x not in value]
            continue
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            base = result.get(key)
            merged = _merge_map(base if isinstance(base, dict) else {}, value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        else:
            result[key] = value
    for field, order in orders.items():
        if isinstance(result.get(field), list):
            result[field] = _reorder(field, result[field], order)
    return result


def _merge_list(field: str, current: Any, patch: list) -> list:
    current = current if isinstance(current, list) else []
    if field in SET_LISTS and all(not isinstance(x, (dict, list)) for x in patch):
        return list(current) + [x for x in patch if x not in current]
    key = _merge_key(field, patch + current)
    if key is None or not all(isinstance(x, dict) for x in patch):
        return _clean(patch)
    if any(isinstance(x, dict) and x.get("$patch") == "replace" for x in patch):
        return [_clean(x) for x in patch if x.get("$patch") != "replace"]
    result = [copy.deepcopy(x) for x in current]
    for item in patch:
        if key not in item:
            raise BadRequest(f'strategic merge patch: an item of "{field}" lacks its merge key "{key}"')
        idx = next((i for i, x in enumerate(result) if isinstance(x, dict) and x.get(key) == item[key]), None)
        if item.get("$patch") == "delete":
            if idx is not None:
                result.pop(idx)
            continue
        if idx is None:
            result.append(_clean(item))
        else:
            merged = _merge_map(result[idx], item)
            if merged is not None:
                result[idx] = merged
    return result


def _reorder(field: str, items: list, order: list) -> list:
    key = _merge_key(field, items)
    if key is None:
        return items
    rank = {o.get(key): i for i, o in enumerate(order) if isinstance(o, dict) and _scalar(o.get(key))}

    def ranked(x: Any) -> bool:
        return isinstance(x, dict) and _scalar(x.get(key)) and x.get(key) in rank

    listed = sorted((x for x in items if ranked(x)), key=lambda x: rank[x[key]])
    return listed + [x for x in items if not ranked(x)]


def _scalar(v: Any) -> bool:
    """A merge key value that can be one (an object or a list names no item)."""
    return v is None or isinstance(v, (str, int, float, bool))


def _clean(value: Any) -> Any:
    """A patch value with its directives removed (what gets stored)."""
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items() if not k.startswith("$") and v is not None}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value
