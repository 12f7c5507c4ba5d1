"""The podgroup-controller shell: a pod informer -> work queue -> pure ``decide``
-> create the PodGroup, then annotate the pod with its name.

Level-triggered and idempotent: the group's name is a function of the pod, so
AlreadyExists on create is success, and the annotation is a merge patch that
carries the pod's uid (a pod replaced under the same name refuses it with a
Conflict; its own event brings it here again). Only pods that still need a
group are queued: the pods of a job, which carry their group from birth, cost
one dictionary look-up per watch event.
"""
from __future__ import annotations

import logging
from typing import Iterable

from phalanx.api.constants import ANNOTATION_GROUP_NAME
from phalanx.client.interface import Client, Obj
from phalanx.controller.podgroup.core import decide, needs_group
from phalanx.objects.errors import AlreadyExists, Conflict, NotFound
from phalanx.runtime.controller import Controller, Result
from phalanx.runtime.informer import SharedInformers

log = logging.getLogger(__name__)

Key = tuple[str, str]  # (namespace, pod name)


class PodGroupController:
    """Gives every served pod without a PodGroup one of its own (Volcano's pg-controller)."""

    def __init__(self, client: Client, scheduler_names: Iterable[str], workers: int = 4,
                 informers: SharedInformers | None = None) -> None:
        self.client = client
        self.scheduler_names = frozenset(scheduler_names)
        if not self.scheduler_names:
            raise ValueError("scheduler_names: must name at least one scheduler")
        self.controller: Controller[Key] = Controller("podgroup-controller", self.reconcile, workers=workers)
        self.pods = (informers if informers is not None else SharedInformers(client)).informer("Pod")
        self.pods.add_handler(self._on_pod)
        self.created = 0  # PodGroups this controller created (observability, tests)

    def _on_pod(self, event_type: str, obj: Obj, old: Obj | None) -> None:
        if event_type == "DELETED" or not needs_group(obj, self.scheduler_names):
            return
        meta = obj.get("metadata") or {}
        self.controller.enqueue((meta.get("namespace") or "default", meta.get("name") or ""))

    async def run(self) -> None:
        await self.pods.start()
        if await self.pods.wait_synced():
            await self.controller.run()

    async def stop(self) -> None:
        for target in (self.controller, self.pods):
            await target.stop()

    async def reconcile(self, key: Key) -> Result | None:
        ns, name = key
        pod = self.pods.get(ns, name)
        try:
            plan = decide(pod, self.scheduler_names)
        except ValueError as e:
            log.warning("podgroup-controller: pod %s/%s left alone: %s", ns, name, e)
            return None
        if plan is None:
            return None
        try:
            await self.client.create(plan.podgroup)
            self.created += 1
        except AlreadyExists:
            pass
        patch = {"metadata": {"uid": plan.pod_uid, "annotations": {ANNOTATION_GROUP_NAME: plan.group_name}}}
        try:
            await self.client.patch("Pod", name, ns, patch)
        except (NotFound, Conflict) as e:
            # Gone or replaced: the group goes with its owner; a new pod has its own event.
            log.info("podgroup-controller: pod %s/%s not annotated: %s", ns, name, e)
        return None
