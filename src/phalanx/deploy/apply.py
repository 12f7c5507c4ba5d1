"""``phalanx install --apply``: create each object, or replace it when it exists."""
from __future__ import annotations

import copy
from typing import Any

from phalanx.api.registry import by_kind
from phalanx.client.interface import Client
from phalanx.client.retry import retry_on_conflict
from phalanx.objects.errors import AlreadyExists

# Created when missing, never replaced: the webhook certificate's Secret is the operator's to fill.
CREATE_ONLY_KINDS = ("Secret",)


def reference(obj: dict[str, Any]) -> str:
    """kubectl's ``<singular>.<group>/<name>``."""
    rt = by_kind(obj["kind"])
    return f"{rt.singular}{'.' + rt.group if rt.group else ''}/{obj['metadata']['name']}"


async def apply_objects(client: Client, objs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """In order; returns (reference, "created" | "configured" | "unchanged") per object."""
    done = []
    for obj in objs:
        try:
            await client.create(copy.deepcopy(obj))
            done.append((reference(obj), "created"))
            continue
        except AlreadyExists:
            pass
        if obj["kind"] in CREATE_ONLY_KINDS:
            done.append((reference(obj), "unchanged"))
            continue
        rt = by_kind(obj["kind"])
        ns = obj["metadata"].get("namespace") if rt.namespaced else None

        async def replace(obj: dict[str, Any] = obj, ns: str | None = ns) -> None:
            current = await client.get(obj["kind"], obj["metadata"]["name"], ns)
            new = copy.deepcopy(obj)
            new["metadata"]["resourceVersion"] = current["metadata"].get("resourceVersion")
            await client.update(new)

        await retry_on_conflict(replace)
        done.append((reference(obj), "configured"))
    return done
