"""`phalanx run`: apply a job, stream kubectl `-w` rows, exit on its end.

Uses the running control plane if one is up, else starts an embedded one
in-process (serving the API too, so other terminals can `phalanx get`).
"""
from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from rich.console import Console

from phalanx.api import registry
from phalanx.api.admission import admit
from phalanx.cli import printers
from phalanx.cli.cmdutil import api_error_text
from phalanx.cli.cmdutil import ref as resource_ref
from phalanx.cli.controlplane import AlreadyServed, RunLease, ServedCluster, export_line, running_endpoint
from phalanx.cli.controlplane import home as phalanx_home_dir
from phalanx.client.http import HttpClient
from phalanx.client.interface import Client
from phalanx.objects.errors import ApiError, NotFound
from phalanx.objects.watch import WatchEvent

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


def _suspended_by_run(job: dict) -> bool:
    return ((job.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_STOPPED_BY_RUN) == "true" \
        and bool(((job.get("spec") or {}).get("runPolicy") or {}).get("suspend"))


EXIT_SUCCEEDED, EXIT_FAILED, EXIT_INVALID, EXIT_COULD_NOT_RUN, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
LOG_TAIL = 20
CONTROL_PLANE_LOST_AFTER = 10.0  # seconds without an answer before a run gives up (exit 3)
# Set with runPolicy.suspend by a run interrupted while others share its control
# plane: its job's pods stop (not a failure); `phalanx run` of it again resumes it.
ANNOTATION_STOPPED_BY_RUN = "phalanx.dev/stopped-by-run"


def _job_ref(obj: dict) -> str:
    return resource_ref(registry.by_kind(obj["kind"]), obj.get("metadata", {}).get("name", ""))


async def apply_doc(client: Client, doc: dict) -> str:
    """kubectl-apply-like: create, or update the spec/labels/annotations."""
    rt = registry.by_kind(doc["kind"])
    md = doc.get("metadata", {})
    ns = md.get("namespace") or ("default" if rt.namespaced else None)
    if rt.namespaced:
        md["namespace"] = ns
    try:
        cur = await client.get(doc["kind"], md["name"], ns)
    except NotFound:
        await client.create(doc)
        return "created"
    new = dict(cur)
    new_md = dict(cur["metadata"])
    for k in ("labels", "annotations"):
        if k in md:
            new_md[k] = md[k]
    new["metadata"] = new_md
    for k, v in doc.items():
        if k not in ("metadata", "status", "apiVersion", "kind"):
            new[k] = v
    if admit(json.loads(json.dumps(new)), cur) == admit(json.loads(json.dumps(cur)), cur):
        return "unchanged"
    await client.update(new)
    return "configured"


async def _connect_or_host(home, err: Console) -> tuple[Any, ServedCluster | None]:
    """The control plane serving ``home`` (asked through its API), or one
    started in-process; when another run is starting one at the same moment,
    that one (the home's lock decides)."""
    ep = await asyncio.to_thread(running_endpoint, home, 5.0)
    if ep is not None:
        return ep, None
    served = ServedCluster(home, lock_wait=0.0)
    try:
        ep = await served.start()
    except AlreadyServed:
        deadline = time.monotonic() + 60.0
        while time.monotonic() < deadline:
            ep = await asyncio.to_thread(running_endpoint, home, 1.0)
            if ep is not None:
                return ep, None
            await asyncio.sleep(0.1)
        raise
    err.print(f"started an embedded control plane (state in {home}); `phalanx get ...` and kubectl "
              f"(after `{export_line(home)}`) work from another terminal while this runs", markup=False)
    return ep, served


async def run_job(docs: list[dict], job: dict, source: str, timeout: float | None,
                  out: Console, err: Console) -> int:
    home = phalanx_home_dir()
    lease = RunLease(home, f"{job['kind'].lower()}/{job['metadata']['name']}")
    try:
        ep, served = await _connect_or_host(home, err)
    except (AlreadyServed, OSError) as e:
        lease.release()
        err.print(f"error: could not start or reach a control plane: {e}", markup=False)
        return EXIT_COULD_NOT_RUN
    client = ep.client()
    kind = job["kind"]
    name = job["metadata"]["name"]
    ns = job["metadata"].get("namespace") or "default"
    ref = f"{kind.lower()}/{name}"
    interrupted = False
    try:
        uid = None
        try:
            cur = await client.get(kind, name, ns)
            state = _finished(cur)
            if state is not None:  # replaced, so `run` can be repeated
                await client.delete(kind, name, ns)
                err.print(f"replacing the finished {_job_ref(cur)} ({state})", markup=False)
                await _wait_gone(client, kind, name, ns, cur["metadata"]["uid"])
            elif _suspended_by_run(cur):
                anns = {ANNOTATION_STOPPED_BY_RUN: None}
                await client.patch(kind, name, ns, {"metadata": {"annotations": anns},
                                                    "spec": {"runPolicy": {"suspend": False}}})
                err.print(f"resuming {_job_ref(cur)}, stopped by an interrupted run", markup=False)
                uid = cur["metadata"]["uid"]
            else:
                err.print(f"{_job_ref(cur)} exists and has not finished: following it (delete it to run the file "
                          "anew)", markup=False)
                uid = cur["metadata"]["uid"]
        except NotFound:
            pass
        if uid is None:
            err.print(IMAGE_NOTE, markup=False)
            for d in docs:
                try:
                    verb = await apply_doc(client, d)
                except ApiError as e:
                    err.print(api_error_text(e, "creating", source), markup=False)
                    return EXIT_INVALID if e.code in (400, 403, 404, 422) else EXIT_FAILED
                out.print(f"{_job_ref(d)} {verb}", markup=False)
            uid = (await client.get(kind, name, ns))["metadata"]["uid"]
        outcome = await _stream(client, kind, name, ns, uid, out, timeout)
        if outcome.state == "Failed":
            await _explain_failure(client, kind, name, ns, outcome, err)
        if served is not None:
            await _stop_leftovers(client, ns, uid, outcome, err)
        if outcome.state == "Lost":
            return EXIT_COULD_NOT_RUN
        return EXIT_SUCCEEDED if outcome.state == "Succeeded" else EXIT_FAILED
    except asyncio.CancelledError:
        interrupted = True
        others = lease.others()
        if served is None or others:
            # Others share this control plane: stop only this run's job.
            await _stop_own_job(client, kind, name, ns, err)
        if served is not None and not others:
            err.print(f"interrupted: stopping this control plane and its pods; {ref} is not failed and carries on "
                      "at the next `phalanx up` or `phalanx run`", markup=False)
        if served is not None and others:
            err.print(f"still serving {len(others)} other run(s) ({', '.join(others)}); Ctrl-C again stops "
                      "them too (their jobs carry on at the next start)", markup=False)
            await _serve_others(lease)
        return EXIT_INTERRUPTED
    finally:
        try:
            if served is not None and not interrupted:
                others = lease.others()
                if others:
                    err.print(f"{ref} is done; this control plane keeps serving {len(others)} other run(s) "
                              f"({', '.join(others)})", markup=False)
                    await _serve_others(lease)
        finally:
            await client.close()
            lease.release()
            if served is not None:
                await served.stop(kill_pods=True)


async def _serve_others(lease: "RunLease") -> None:
    while lease.others():
        await asyncio.sleep(0.2)


async def _stop_own_job(client: Client, kind: str, name: str, ns: str, err: Console) -> None:
    """Suspend the job (its pods stop, nothing is counted as a failure); `phalanx run` of it again resumes it."""
    try:
        await client.patch(kind, name, ns, {"metadata": {"annotations": {ANNOTATION_STOPPED_BY_RUN: "true"}},
                                            "spec": {"runPolicy": {"suspend": True}}})
        err.print(f"{kind.lower()}/{name} stopped (suspended: its pods are stopped, nothing counted as a "
                  "failure); `phalanx run` of the same file resumes it", markup=False)
    except (ApiError, OSError) as e:
        err.print(f"could not stop {kind.lower()}/{name}: {e}", markup=False)


async def _explain_failure(client: HttpClient, kind: str, name: str, ns: str, outcome: "Outcome", err: Console) -> None:
    """The failing condition's reason and message, then the end of each failed container's log."""
    try:
        job = await client.get(kind, name, ns)
    except ApiError:
        job = outcome.job or {}
    cond = next((c for c in reversed(job.get("status", {}).get("conditions") or [])
                 if c.get("type") == "Failed" and c.get("status") == "True"), None)
    if cond is not None:
        err.print(f"{kind.lower()}/{name} failed: {cond.get('reason', '')}: {cond.get('message', '')}", markup=False)
    for pod, container in outcome.failed_containers:
        chunks = []
        try:
            async for chunk in client.logs(ns, pod, container=container, tail=LOG_TAIL):
                chunks.append(chunk)
        except ApiError as e:
            err.print(f"--- {pod}/{container}: log not available ({e.message})", markup=False)
            continue
        text = b"".join(chunks).decode("utf-8", "replace").rstrip("\n")
        err.print(f"--- last {LOG_TAIL} lines of {pod}/{container}:", markup=False)
        if text:
            err.print(text, markup=False)


async def _stop_leftovers(client: Client, ns: str, uid: str, outcome: "Outcome", err: Console) -> None:
    """Pods of the finished job still running when this in-process control plane stops: said, then stopped."""
    live = sorted(n for n, running in outcome.live_pods.items() if running)
    if live:
        err.print(f"stopping the pods of the finished job still running: {', '.join(live)}", markup=False)


async def _wait_gone(client: Client, kind: str, name: str, ns: str, uid: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            await client.get(kind, name, ns)
        except NotFound:
            pods = await client.list("Pod", ns, label_selector={"training.kubeflow.org/job-name": name})
            if not pods.items:
                return
        await asyncio.sleep(0.05)


@dataclass
class Outcome:
    state: str | None = None
    job: dict | None = None
    live_pods: dict[str, bool] = field(default_factory=dict)
    failed_containers: list[tuple[str, str]] = field(default_factory=list)  # (pod, container), first seen first


def _note_failures(pod: dict, outcome: Outcome) -> None:
    name = pod["metadata"]["name"]
    st = pod.get("status") or {}
    for cs in (st.get("initContainerStatuses") or []) + (st.get("containerStatuses") or []):
        term = (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get("terminated") or {}
        key = (name, cs.get("name", ""))
        if term and term.get("exitCode") not in (0, None) and key not in outcome.failed_containers:
            outcome.failed_containers.append(key)


async def _stream(client: Client, kind: str, name: str, ns: str, uid: str, out: Console, timeout: float | None) -> Outcome:
    """Print the job's, its PodGroup's and its pods' rows until the job has finished."""
    printer = MultiKindWatchPrinter(out, wide=True)
    queue: asyncio.Queue[tuple[str, WatchEvent]] = asyncio.Queue()
    outcome = Outcome()

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
                    unreachable.pop(k, None)
                async for ev in client.watch(k, ns, resource_version=rv):
                    if ev.type == "BOOKMARK":
                        rv = ev.object.get("metadata", {}).get("resourceVersion", rv)
                        continue
                    rv = ev.object.get("metadata", {}).get("resourceVersion", rv)
                    await queue.put((k, ev))
            except asyncio.CancelledError:
                raise
            except Exception:  # 410 Gone, a hiccup, or the control plane went away: relist
                rv = None
                unreachable.setdefault(k, time.monotonic())
                await asyncio.sleep(0.2)

    unreachable: dict[str, float] = {}  # kind -> since when its watch fails
    tasks = [asyncio.create_task(pump(k)) for k in (kind, "PodGroup", "Pod")]
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while True:
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                out.print(f"timed out after {timeout:.0f}s", markup=False)
                return outcome
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
                if outcome.state:
                    break
                if unreachable and time.monotonic() - min(unreachable.values()) > CONTROL_PLANE_LOST_AFTER:
                    outcome.state = "Lost"
                    out.print("the control plane went away (stopped or killed); the job carries on when one "
                              "starts again", markup=False)
                    return outcome
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
                outcome.job = o
                outcome.state = _finished(o) or outcome.state
                if ev.type == "DELETED":
                    outcome.state = outcome.state or "Deleted"
            if k == "Pod":
                phase = o.get("status", {}).get("phase")
                outcome.live_pods[o["metadata"]["name"]] = ev.type != "DELETED" and phase not in ("Succeeded", "Failed")
                _note_failures(o, outcome)
            # Finished: the rows already sent (the last pod states) are printed, then it returns.
            if outcome.state and queue.empty():
                await asyncio.sleep(0.2)
                if queue.empty():
                    break
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
    out.print(f"{kind.lower()}/{name} {outcome.state}", markup=False)
    return outcome
