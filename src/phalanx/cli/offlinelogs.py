"""`phalanx logs` with no control plane running: the logs are files under
$PHALANX_HOME, read with the node's own log readers (``node.logs``), as the API
server would serve a deleted pod's log. A job is known by its pods' controller
reference."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from phalanx.client.interface import ObjectList
from phalanx.node.logs import LogProvider
from phalanx.node.names import check_dns_label, check_dns_subdomain
from phalanx.node.podrecords import PodRecords
from phalanx.objects.errors import NotFound


class _FromDisk:
    """The object API as the state directory shows it with no server: no pod is live;
    a job is the newest controller of its pods that the records name."""

    def __init__(self, home: Path) -> None:
        self.records = PodRecords(home)

    async def get(self, kind: str, name: str, namespace: str | None = None) -> dict:
        if kind != "Pod":
            owners = [r.job_owner for r in self.records.scan(namespace)
                      if r.job_owner and r.job_owner.get("kind") == kind and r.job_owner.get("name") == name]
            if owners:
                return {"kind": kind, "metadata": {"name": name, "namespace": namespace,
                                                   "uid": owners[-1].get("uid", "")}}
            raise NotFound(kind.lower() + "s", name)
        raise NotFound("pods", name)

    async def list(self, kind: str, namespace: str | None = None, **_: Any) -> ObjectList:
        return ObjectList([], "")


def read_offline(home: Path, namespace: str, kind: str, name: str, container: str | None, previous: bool,
                 tail: int | None) -> str:
    """A pod's (``kind`` Pod) or a job's logs from disk; NotFound when none are stored,
    ValueError for a name that is not a valid one (checked before any path is built)."""
    check_dns_label(namespace, "namespace")
    check_dns_subdomain(name, "name")
    if container is not None:
        check_dns_label(container, "container")
    provider = LogProvider(home, _FromDisk(home))

    async def read() -> str:
        if kind == "Pod":
            return await provider.read(namespace, name, container, previous=previous, tail_lines=tail)
        return "".join([chunk async for chunk in provider.job_logs(namespace, kind, name, container,
                                                                  tail_lines=tail)])

    return asyncio.run(read())
