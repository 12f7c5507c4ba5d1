"""Ending container processes: a container runtime's kill (SIGTERM, grace, SIGKILL to the group and its strays),
what shims still run for pods that are gone, and the pid files of the runtime before shims.
"""
from __future__ import annotations

import asyncio
import logging
import os
import signal
import time
from datetime import datetime

import psutil

from phalanx.node import execctx
from phalanx.node import instancefiles as files
from phalanx.node.instances import (
    Instance,
    cgroup_from,
    descendants,
    kill,
    killpg,
    pgid,
    refresh_pid,
    same_process,
    signal_process,
    wait_all,
)
from phalanx.node.logs import mark_pod_finished
from phalanx.node.shim import start_ticks

log = logging.getLogger(__name__)


async def kill_instances(insts: list[Instance], grace: float) -> None:
    """SIGTERM to each running instance's main process, ``grace`` seconds, then
    SIGKILL to its process group; returns once all have exited (or 10 s more)."""
    if not insts:
        return
    for i in insts:
        if i.pid is None:
            refresh_pid(i)
    live = [i for i in insts if i.pid is not None and same_process(i)]
    # Descendants that left the process group (setsid, setpgid) would
    # escape killpg: remember them now, kill the survivors at the end.
    strays = [p for i in live for p in descendants(i.pid or 0) if pgid(p.pid) != i.pid]
    # Processes exec'd into the containers (and theirs) die with them:
    # SIGTERM with the container's main process, SIGKILL at the end.
    exec_roots = {i.container_id: execctx.exec_roots(i.log_path.parent, i.container_id) for i in live}
    execs = {cid: execctx.with_descendants(roots) for cid, roots in exec_roots.items()}
    # As a container runtime does: SIGTERM to the container's main process
    # only (its children are killed when it exits, by the shim). Signalling
    # the whole group would change what a trapping shell reports: with its
    # `sleep & wait` child killed too, `trap exit TERM` exits 0, not 143.
    for i in live:
        kill(i.pid or 0, signal.SIGTERM)
        execctx.signal_processes(exec_roots[i.container_id], signal.SIGTERM)
    pending = [i for i in insts if not i.done.is_set()]
    if pending and grace > 0:
        await wait_all(pending, grace)
    for i in insts:
        if not i.done.is_set() and i.pid is not None and same_process(i):
            killpg(i.pid, signal.SIGKILL)
    for p in strays:
        signal_process(p, signal.SIGKILL)
    for i in live:
        execctx.kill_execs(i.log_path.parent, i.container_id, also=execs[i.container_id])
    await wait_all([i for i in insts if not i.done.is_set()], 10.0)


async def kill_orphans(orphans: list[files.FoundInstance], wait: float, now: datetime, node_name: str) -> int:
    """Kill what shims still run for pods that are gone; drop their records."""
    killed = 0
    live = []
    for f in orphans:
        if files.shim_alive(f.path):
            status = files.read_json(files.status_path(f.log_path)) or {}
            if isinstance(status.get("pid"), int) and start_ticks(status["pid"]) == status.get("startTicks"):
                for p in descendants(status["pid"]):
                    signal_process(p, signal.SIGKILL)
                killpg(status["pid"], signal.SIGKILL)
                killed += 1
            live.append(f)
    deadline = time.monotonic() + wait
    while live and time.monotonic() < deadline:
        live = [f for f in live if files.shim_alive(f.path)]
        if live:
            await asyncio.sleep(0.05)
    pod_dirs = set()
    for f in orphans:
        cg = cgroup_from(f.record.get("cgroup"))
        if cg is not None:
            cg.remove()
        execctx.forget_container(f.log_path.parent)
        files.remove_instance_files(f.log_path)
        pod_dirs.add(f.log_path.parent.parent)
    for d in pod_dirs:
        mark_pod_finished(d, now)
    if killed:
        log.info("node %s: killed %d containers of pods that no longer exist", node_name, killed)
    return killed


def reap_legacy(f: files.FoundInstance) -> int:
    """A pid file of the runtime before shims: kill its group if it is still that process."""
    killed = 0
    try:
        pid, ctime = int(f.record["pid"]), float(f.record["createTime"])
        proc = psutil.Process(pid)
        if abs(proc.create_time() - ctime) < 1.0 and os.getpgid(pid) == pid:
            killpg(pid, signal.SIGKILL)
            killed = 1
    except (OSError, ValueError, KeyError, TypeError, psutil.Error):
        pass
    try:
        f.path.unlink()
    except OSError:
        pass
    return killed
