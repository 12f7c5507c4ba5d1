"""A pod's volumes as its worker sets them up: mounted before the first container starts, retried with a
back-off while a ConfigMap is missing (FailedMount events), rewritten when a mounted ConfigMap changes.
"""
from __future__ import annotations

import logging
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Awaitable, Callable

from phalanx.client.interface import Client
from phalanx.node.volumes import VolumePlan, materialise, refresh_config_maps
from phalanx.objects.clock import Clock
from phalanx.objects.errors import NotFound

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Record = Callable[[Obj, str, str, str], Awaitable[None]]  # (object, type, reason, message): an event

# A volume that cannot be set up (its ConfigMap is missing) is tried again on
# the next sync: at once when the ConfigMap appears, else after this back-off.
MOUNT_RETRY_BASE = 1.0
MOUNT_RETRY_CAP = 16.0


class PodMounts:
    """The volumes of one pod (``plan``, set by the worker once the spec is read)."""

    def __init__(self, client: Client, clock: Clock, pod_directory: Path, namespace: str, what: str,
                 record: Record) -> None:
        self.client = client
        self.clock = clock
        self.pod_directory = pod_directory
        self.namespace = namespace
        self.what = what  # "node <n>: pod <ns>/<name>", in log lines
        self.record = record
        self.plan: VolumePlan | None = None
        self.mounted = False
        self.retry_at: datetime | None = None
        self.dirty = False  # a mounted ConfigMap changed since it was read
        self._failures = 0
        self._versions: dict[str, str] = {}  # ConfigMap name -> resourceVersion last read

    def config_map_changed(self, name: str, version: str) -> bool:
        """Note a ConfigMap event; True when this pod mounts it and should look again."""
        if self.plan is None or name not in self.plan.config_maps:
            return False
        if self._versions.get(name) == version and version:
            return False
        self.dirty = True
        return True

    async def mount(self, pod: Obj) -> bool:
        """Before the pod's first container starts: set its volumes up. False
        (a FailedMount event, a retry later) when one cannot be yet."""
        if self.mounted or not self.plan:
            self.mounted = True
            return True
        now = self.clock.now()
        if self.retry_at is not None and now < self.retry_at and not self.dirty:
            return False
        self.dirty = False
        cms = await self._read_config_maps(self.plan.config_maps)
        errors = materialise(self.pod_directory, self.plan, cms, now)
        if not errors:
            self.mounted = True
            self._failures = 0
            self.retry_at = None
            return True
        self._failures += 1
        delay = min(MOUNT_RETRY_BASE * 2 ** min(self._failures - 1, 16), MOUNT_RETRY_CAP)
        self.retry_at = now + timedelta(seconds=delay)
        for e in errors:
            log.info("%s: %s", self.what, e.event_message)
            await self.record(pod, "Warning", "FailedMount", e.event_message)
        return False

    async def refresh(self) -> None:
        """A mounted ConfigMap changed: rewrite its volumes (as the kubelet's sync does)."""
        self.dirty = False
        if not self.plan:
            return
        cms = await self._read_config_maps(self.plan.config_maps)
        done = refresh_config_maps(self.pod_directory, self.plan, cms, self.clock.now())
        if done:
            log.info("%s: volumes %s updated", self.what, ", ".join(done))

    async def _read_config_maps(self, names: list[str]) -> dict[str, Obj | None]:
        out: dict[str, Obj | None] = {}
        for n in names:
            cm: Obj | None
            try:
                cm = await self.client.get("ConfigMap", n, self.namespace)
            except NotFound:
                cm = None
            out[n] = cm
            self._versions[n] = str(((cm or {}).get("metadata") or {}).get("resourceVersion") or "")
        return out
