"""Taking over what the shims of a previous agent of this node run or recorded (a restarted agent's adoption).

Reads instance files only: an instance as its files describe it, and what adoption found.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from phalanx.node import instancefiles as files
from phalanx.node.instances import (
    CANNOT_RUN_EXIT_CODE,
    SHIM_LOST_MESSAGE,
    Instance,
    cgroup_from,
    end_execs,
    exec_error,
    from_wall,
    gpu_list,
    in_cgroup,
    int_field,
    kill_recorded,
)
from phalanx.node.podstate import CONTAINER_CANNOT_RUN, CONTAINER_STATUS_UNKNOWN, OOM_KILLED, Termination
from phalanx.node.reap import reap_legacy
from phalanx.objects.clock import Clock

START_RECORD_WAIT = 1.0  # seconds a starting shim takes at most to record its container (it takes ms)

Found = dict[str, dict[str, dict[int, files.FoundInstance]]]  # uid -> container -> restart count -> files


@dataclass
class Adoption:
    """What ``adopt`` found: pod uid -> container names running / exited
    meanwhile, and how many orphaned containers it killed."""

    running: dict[str, list[str]] = field(default_factory=dict)
    exited: dict[str, list[str]] = field(default_factory=dict)
    orphans_killed: int = 0

    def note(self, what: str, uid: str, container: str) -> None:
        """Count a container of pod ``uid`` as ``what`` ("running" or "exited")."""
        (self.running if what == "running" else self.exited).setdefault(uid, []).append(container)


def found_instances(state_dir: Path, node_name: str, report: Adoption) -> Found:
    """The instance files of this node's pods; pid files of the runtime before
    shims are reaped on the way (counted as orphans killed)."""
    found: Found = {}
    for f in files.scan(state_dir, node_name):
        if f.legacy:
            report.orphans_killed += reap_legacy(f)
            continue
        found.setdefault(f.uid, {}).setdefault(f.container, {})[f.restart_count] = f
    return found


def load_instance(f: files.FoundInstance, report: Adoption | None, uid: str, clock: Clock) -> Instance:
    """One instance as its files describe it: running (adopted, watched by
    polling), exited (its real termination), or lost with its shim."""
    rec = f.record
    inst = Instance(container=f.container, container_id=str(rec.get("containerID") or ""),
                    restart_count=f.restart_count, backoff_count=int_field(rec.get("backoffCount")),
                    log_path=f.log_path, memory_limit=rec.get("memoryLimit") if isinstance(
                        rec.get("memoryLimit"), int) else None,
                    cgroup=cgroup_from(rec.get("cgroup")), gpus=gpu_list(rec.get("gpus")))
    status_file = files.status_path(f.log_path)
    status = files.read_json(status_file) or {}
    alive = files.shim_alive(f.path)
    if alive and "pid" not in status and "startError" not in status:
        deadline = time.monotonic() + START_RECORD_WAIT
        while alive and time.monotonic() < deadline and "pid" not in status:
            time.sleep(0.02)
            status = files.read_json(status_file) or {}
            alive = files.shim_alive(f.path)
    if isinstance(status.get("pid"), int):
        inst.pid = status["pid"]
        inst.start_ticks = int_field(status.get("startTicks"))
        inst.started_at = from_wall(clock, status.get("startedAt"))
    if isinstance(status.get("exitCode"), int):
        code, reason = int(status["exitCode"]), ""
        if files.oom_path(f.log_path).exists() or \
                (inst.cgroup is not None and inst.cgroup.oom_killed() and code == 137):
            code, reason = 137, OOM_KILLED
        inst.termination = Termination(exit_code=code, finished_at=from_wall(clock, status.get("finishedAt")),
                                       started_at=inst.started_at, reason=reason,
                                       container_id=inst.container_id)
        if inst.cgroup is not None:
            inst.cgroup.remove()
        end_execs(inst)
        _note(report, "exited", uid, f.container)
    elif isinstance(status.get("startError"), dict):
        err = status["startError"]
        finished = from_wall(clock, status.get("finishedAt"))
        inst.termination = Termination(
            exit_code=CANNOT_RUN_EXIT_CODE, finished_at=finished, started_at=finished,
            reason=CONTAINER_CANNOT_RUN, container_id=inst.container_id,
            message=exec_error(str(status.get("argv0") or rec.get("argv0") or ""),
                               OSError(int_field(err.get("errno")), str(err.get("strerror") or "")),
                               str(err.get("step") or "")))
        _note(report, "exited", uid, f.container)
    elif alive:
        inst.adopted = True
        if inst.started_at is None:
            inst.started_at = clock.now()
        enforced = inst.cgroup is not None and inst.cgroup.memory_dir is not None and inst.pid is not None \
            and in_cgroup(inst.cgroup, inst.pid)
        inst.watchdog = inst.memory_limit is not None and not enforced
        _note(report, "running", uid, f.container)
        inst.done.clear()
        return inst
    elif inst.started_at is not None:
        # The shim died without recording the exit (killed): the container is lost.
        kill_recorded(status)
        inst.termination = Termination(exit_code=137, finished_at=clock.now(), started_at=inst.started_at,
                                       reason=CONTAINER_STATUS_UNKNOWN, message=SHIM_LOST_MESSAGE,
                                       container_id=inst.container_id)
        end_execs(inst)
        _note(report, "exited", uid, f.container)
    # else: never started (the agent stopped before its shim ran it): the slot starts again
    inst.done.set()
    return inst


def _note(report: Adoption | None, what: str, uid: str, container: str) -> None:
    if report is not None:
        report.note(what, uid, container)
