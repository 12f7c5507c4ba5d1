"""Small helpers over any ``Client``: wait for an object to reach a state."""
from __future__ import annotations

import asyncio
import contextlib
from typing import Any, AsyncIterator, Callable

from phalanx.client.interface import Client, Obj
from phalanx.objects.errors import Gone, NotFound
from phalanx.objects.meta import name_of


@contextlib.asynccontextmanager
async def closing_stream(stream: Any) -> AsyncIterator[Any]:
    """Close a watch stream on exit, whether it has ``aclose`` (async
    generators) or ``close`` (e.g. a store Watcher)."""
    try:
        yield stream
    finally:
        if hasattr(stream, "aclose"):
            await stream.aclose()
        elif hasattr(stream, "close"):
            res = stream.close()
            if asyncio.iscoroutine(res):
                await res


def _escape(value: str) -> str:
    """Escape a field-selector value (backslash, comma, equals)."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


def _what(kind: str, namespace: str | None, name: str | None, description: str | None,
          predicate: Callable[[Obj], object]) -> str:
    target = f"{kind} {namespace + '/' if namespace else ''}{name}" if name else \
        f"a {kind}{' in ' + namespace if namespace else ''}"
    cond = description or getattr(predicate, "__name__", "predicate")
    return f"{target} to satisfy {cond}"


async def wait_for(
    client: Client,
    kind: str,
    namespace: str | None,
    predicate: Callable[[Obj], object],
    timeout: float,
    *,
    name: str | None = None,
    description: str | None = None,
) -> Obj:
    """The first object of ``kind`` (named ``name``, when given) for which
    ``predicate`` is true, checking the current list and then every change.
    Raises TimeoutError naming what it waited for."""
    fsel = f"metadata.name={_escape(name)}" if name else None

    async def scan() -> Obj:
        while True:
            lst = await client.list(kind, namespace, field_selector=fsel)
            for obj in lst.items:
                if predicate(obj):
                    return obj
            try:
                stream = client.watch(kind, namespace, resource_version=lst.resource_version)
                async with closing_stream(stream):
                    async for ev in stream:
                        if ev.type in ("ADDED", "MODIFIED") and (name is None or name_of(ev.object) == name):
                            if predicate(ev.object):
                                return ev.object
            except Gone:
                pass  # history moved on: relist
            await asyncio.sleep(0)

    try:
        return await asyncio.wait_for(scan(), timeout)
    except asyncio.TimeoutError:
        raise TimeoutError(
            f"timed out after {timeout}s waiting for {_what(kind, namespace, name, description, predicate)}"
        ) from None


async def wait_for_deletion(client: Client, kind: str, name: str, namespace: str | None, timeout: float) -> None:
    """Return once ``kind`` ``namespace/name`` no longer exists."""

    async def scan() -> None:
        while True:
            lst = await client.list(kind, namespace, field_selector=f"metadata.name={_escape(name)}")
            if not lst.items:
                return
            try:
                stream = client.watch(kind, namespace, resource_version=lst.resource_version)
                async with closing_stream(stream):
                    async for ev in stream:
                        if ev.type == "DELETED" and name_of(ev.object) == name:
                            return
            except Gone:
                pass
            await asyncio.sleep(0)

    try:
        await asyncio.wait_for(scan(), timeout)
    except asyncio.TimeoutError:
        where = f"{namespace}/" if namespace else ""
        raise TimeoutError(f"timed out after {timeout}s waiting for {kind} {where}{name} to be deleted") from None


async def get_or_none(client: Client, kind: str, name: str, namespace: str | None = None) -> Obj | None:
    """``get`` that answers None instead of raising NotFound."""
    try:
        return await client.get(kind, name, namespace)
    except NotFound:
        return None
