"""The log janitor: pod directories go when no one can ask for them any more.

Logs of a deleted pod stay readable while its job exists. So a
pod directory is removed when its pod is gone and either its controller job
is gone too (matched by uid, from the pod's record) or it had no job. The
janitor acts on the DELETED events of the job kinds and of Pods, and sweeps
everything once at start for what a crash left behind. Before removing it asks
the API whether the owner and the pod still exist, as the watch may lag.
"""
from __future__ import annotations

import asyncio
import logging
import shutil
from typing import Any

from phalanx.api.registry import JOB_KINDS
from phalanx.client.interface import Client, Obj
from phalanx.node.podrecords import PodRecord, PodRecords
from phalanx.objects.errors import NotFound
from phalanx.runtime.informer import Informer

log = logging.getLogger(__name__)


def _uid_only(obj: Obj) -> Obj:
    meta = obj.get("metadata") or {}
    return {"kind": obj.get("kind"), "metadata": {k: meta[k] for k in ("name", "namespace", "uid") if k in meta}}


class LogJanitor:
    """Removes the pod directories (logs, working directory) of deleted pods
    whose job is deleted too, or that had no job."""

    def __init__(self, client: Client, state_dir: Any, job_kinds: tuple[str, ...] = JOB_KINDS) -> None:
        self.client = client
        self.records = PodRecords(state_dir)
        self.job_kinds = tuple(job_kinds)
        self.informers = {k: Informer(client, k, transform=_uid_only) for k in (*self.job_kinds, "Pod")}
        for kind, inf in self.informers.items():
            inf.add_handler(self._handler(kind))
        self._queue: asyncio.Queue[tuple[str, str]] = asyncio.Queue()
        self._stopping = False
        self.removed = 0  # directories removed (observability, tests)

    # ------------------------------------------------------------------ lifecycle

    async def run(self) -> None:
        """Watch, sweep once (crash leftovers), then act on deletions until stopped."""
        for inf in self.informers.values():
            await inf.start()
        for inf in self.informers.values():
            if not await inf.wait_synced():
                return  # stopped before the caches were whole
        try:
            await self.sweep()
        except Exception:  # a failed sweep must not stop the janitor
            log.exception("log janitor: start-up sweep failed")
        while not self._stopping:
            what, uid = await self._queue.get()
            if what == "stop":
                return
            try:
                if what == "job":
                    await self.job_deleted(uid)
                else:
                    await self.pod_deleted(uid)
            except Exception:
                log.exception("log janitor: clean-up after %s %s failed", what, uid)

    async def stop(self) -> None:
        self._stopping = True
        for inf in self.informers.values():
            await inf.stop()
        self._queue.put_nowait(("stop", ""))

    def _handler(self, kind: str) -> Any:
        what = "pod" if kind == "Pod" else "job"

        def on_event(type_: str, obj: Obj, old: Obj | None) -> None:
            uid = (obj.get("metadata") or {}).get("uid")
            if type_ == "DELETED" and isinstance(uid, str) and uid:
                self._queue.put_nowait((what, uid))

        return on_event

    # ------------------------------------------------------------------ decisions

    async def job_deleted(self, job_uid: str) -> int:
        """The job is gone: remove its pods' directories, except those of pods
        still being deleted (their own DELETED event comes later)."""
        n = 0
        for rec in self.records.scan():
            if (rec.controller or {}).get("uid") == job_uid and not await self._pod_exists(rec):
                n += await self._remove(rec)
        return n

    async def pod_deleted(self, pod_uid: str) -> int:
        """The pod is gone: remove its directory unless its job still exists."""
        rec = self.records.by_uid(pod_uid)
        if rec is None or (rec.job_owner is not None and await self._owner_exists(rec)):
            return 0
        return await self._remove(rec)

    async def sweep(self) -> int:
        """Remove every directory whose pod is gone and whose job is gone or absent."""
        n = 0
        for rec in self.records.scan():
            if await self._pod_exists(rec):
                continue
            if rec.job_owner is not None and await self._owner_exists(rec):
                continue
            n += await self._remove(rec)
        return n

    async def _pod_exists(self, rec: PodRecord) -> bool:
        if rec.name_truncated:
            return True  # no record and a cut name: it cannot be looked up, keep it
        return await self._exists("Pod", rec.name, rec.namespace, rec.uid)

    async def _owner_exists(self, rec: PodRecord) -> bool:
        owner = rec.job_owner or {}
        return await self._exists(owner.get("kind", ""), owner.get("name", ""), rec.namespace, owner.get("uid", ""))

    async def _exists(self, kind: str, name: str, namespace: str, uid: str) -> bool:
        """Whether that object (that uid) exists; when unsure, yes."""
        try:
            obj = await self.client.get(kind, name, namespace)
        except NotFound:
            return False
        except Exception as e:
            log.debug("log janitor: cannot tell whether %s %s/%s exists: %s", kind, namespace, name, e)
            return True
        return (obj.get("metadata") or {}).get("uid") == uid

    async def _remove(self, rec: PodRecord) -> int:
        d = rec.dir
        if d.is_symlink() or d.parent != self.records.root:
            return 0
        await asyncio.to_thread(shutil.rmtree, d, True)
        self.records.forget(rec)
        if d.exists():
            log.warning("log janitor: could not remove %s", d)
            return 0
        log.info("log janitor: removed the logs of pod %s/%s (uid %s)", rec.namespace, rec.name, rec.uid)
        self.removed += 1
        return 1
