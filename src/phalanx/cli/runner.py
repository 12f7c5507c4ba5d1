"""`phalanx run`: apply a job, stream kubectl `-w` rows, exit on its end.

Uses the running control plane if one is up, else starts an embedded one
in-process (serving the API too, so other terminals can `phalanx get`).
"""
from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timezone
from typing import Any

from rich.console import Console

from ..api import registry
from ..api.errors import ApiError, NotFound
from ..client.interface import WatchEvent
from . import printers
from .controlplane import ServedCluster, export_line, home as phalanx_home_dir, read_endpoint

IMAGE_NOTE = ("note: Phalanx's local runtime does not pull images; each container's command "
              "runs as a process on this machine (the image is only recorded).")


# Columns pre-sized so rows of several kinds stay aligned as states change.
_MIN_WIDTHS = {"NAME": 28, "STATUS": 17, "STATE": 9, "IP": 11, "NODE": 8, "AGE": 5}


class MultiKindWatchPrinter:
    """Prints watch rows of several kinds like `kubectl get a,b,c -w`: a header
    the first time a kind appears, NAME as kind/name, identical rows not repeated."""

    def __init__(self, console: Console, wide: bool = True) -> None:
        self.console = console
        self.wide = wide
        self._last_row: dict[tuple[str, str], list[str]] = {}
        self._widths: dict[str, list[int]] = {}

    def print(self, obj: dict, deleted: bool = False) -> None:
        kind = obj["kind"]
        rt = registry.by_kind(kind)
        name = obj.get("metadata", {}).get("name", "")
        row = printers.row(obj, kind, self.wide, datetime.now(timezone.utc))
        row[0] = f"{rt.singular}/{name}"
        key = (kind, name)
        # Age changes on every row; compare the rest.
        cols = printers.columns(kind, self.wide)
        age_i = cols.index("AGE") if "AGE" in cols else None
        cmp = [c for i, c in enumerate(row) if i != age_i] + (["deleted"] if deleted else [])
        if self._last_row.get(key) == cmp:
            return
        self._last_row[key] = cmp
        headers = cols
        widths = self._widths.get(kind)
        if widths is None:
            widths = [max(len(h), _MIN_WIDTHS.get(h, 0)) for h in headers]
            self._widths[kind] = widths
            self.console.print(self._fmt(headers, widths), markup=False)
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))
        line = self._fmt(row, widths)
        if deleted:
            line += "   (deleted)"
        self.console.print(line, markup=False)

    @staticmethod
    def _fmt(cells: list[str], widths: list[int]) -> str:
        return "   ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()


def _finished(job: dict) -> str | None:
    for c in job.get("status", {}).get("conditions") or []:
        if c.get("type") in ("Succeeded", "Failed") and c.get("status") == "True":
            return c["type"]
    return None


async def run_job(docs: list[dict], job: dict, source: str, timeout: float | None,
                  out: Console, err: Console) -> int:
    from .main import _apply_one, _api_error_text, _ref

    home = phalanx_home_dir()
    ep = read_endpoint(home)
    served: ServedCluster | None = None
    if ep is None:
        served = ServedCluster(home)
        ep = await served.start()
        err.print(f"started an embedded control plane (state in {home}); `phalanx get ...` and kubectl "
                  f"(after `{export_line(home)}`) work from another terminal while this runs", markup=False)
    client = ep.client()
    kind = job["kind"]
    name = job["metadata"]["name"]
    ns = job["metadata"].get("namespace") or "default"
    try:
        # A finished job of the same name is replaced, so `run` can be repeated.
        try:
            cur = await client.get(kind, name, ns)
            state = _finished(cur)
            if state is None:
                err.print(f'error: {_ref(cur)} exists and is still running; delete it first', markup=False)
                return 1
            await client.delete(kind, name, ns)
            err.print(f"replacing the finished {_ref(cur)} ({state})", markup=False)
            await _wait_gone(client, kind, name, ns, cur["metadata"]["uid"])
        except NotFound:
            pass
        err.print(IMAGE_NOTE, markup=False)
        start_rv = None
        for d in docs:
            try:
                verb = await _apply_one(client, d)
            except ApiError as e:
                err.print(_api_error_text(e, "creating", source), markup=False)
                return 2 if e.code in (400, 403, 422) else 1
            out.print(f"{_ref(d)} {verb}", markup=False)
        created = await client.get(kind, name, ns)
        uid = created["metadata"]["uid"]
        return await _stream(client, kind, name, ns, uid, out, timeout)
    finally:
        await client.close()
        if served is not None:
            await served.stop(kill_pods=True)


async def _wait_gone(client, kind: str, name: str, ns: str, uid: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            await client.get(kind, name, ns)
        except NotFound:
            pods = await client.list("Pod", ns, label_selector={"training.kubeflow.org/job-name": name})
            if not pods.items:
                return
        await asyncio.sleep(0.05)


async def _stream(client, kind: str, name: str, ns: str, uid: str, out: Console, timeout: float | None) -> int:
    printer = MultiKindWatchPrinter(out, wide=True)
    queue: asyncio.Queue[tuple[str, WatchEvent]] = asyncio.Queue()

    def owned(o: dict) -> bool:
        for ref in o.get("metadata", {}).get("ownerReferences") or []:
            if ref.get("uid") == uid:
                return True
        return False

    async def pump(k: str) -> None:
        rv = None
        while True:
            try:
                if rv is None:
                    lst = await client.list(k, ns)
                    for o in sorted(lst.items, key=lambda o: o["metadata"].get("name", "")):
                        await queue.put((k, WatchEvent("ADDED", o)))
                    rv = lst.resource_version
                async for ev in client.watch(k, ns, resource_version=rv):
                    if ev.type == "BOOKMARK":
                        rv = ev.object.get("metadata", {}).get("resourceVersion", rv)
                        continue
                    rv = ev.object.get("metadata", {}).get("resourceVersion", rv)
                    await queue.put((k, ev))
            except ApiError:
                rv = None  # 410 Gone or a hiccup: relist
                await asyncio.sleep(0.1)

    tasks = [asyncio.create_task(pump(k)) for k in (kind, "PodGroup", "Pod")]
    deadline = None if timeout is None else time.monotonic() + timeout
    finished: str | None = None
    live_pods: dict[str, bool] = {}
    try:
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                out.print(f"timed out after {timeout:.0f}s", markup=False)
                return 1
            # asyncio.wait, not wait_for: on 3.11 wait_for can swallow a cancellation
            # (Ctrl-C / SIGTERM) that lands while the get completes.
            getter = asyncio.ensure_future(queue.get())
            try:
                done, _ = await asyncio.wait({getter}, timeout=0.5 if remaining is None else min(0.5, remaining))
            except asyncio.CancelledError:
                getter.cancel()
                raise
            if not done:
                getter.cancel()
                if finished and not any(live_pods.values()):
                    break
                continue
            k, ev = getter.result()
            o = ev.object
            if k == kind:
                if o["metadata"].get("name") != name or o["metadata"].get("uid") != uid:
                    continue
            elif not owned(o):
                continue
            printer.print(o, deleted=ev.type == "DELETED")
            if k == kind:
                finished = _finished(o) or finished
                if ev.type == "DELETED":
                    finished = finished or "Deleted"
            if k == "Pod":
                phase = o.get("status", {}).get("phase")
                live_pods[o["metadata"]["name"]] = ev.type != "DELETED" and phase not in ("Succeeded", "Failed")
            if finished and not any(live_pods.values()) and queue.empty():
                break
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    out.print(f"{kind.lower()}/{name} {finished}", markup=False)
    return 0 if finished == "Succeeded" else 1
