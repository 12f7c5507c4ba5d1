"""A pod status a previous agent reported, read back as container observations (the inverse of ``decide``).

Used for the containers a restarted agent finds no trace of on disk. Pure.
"""
from __future__ import annotations

from datetime import datetime
from typing import Any

from phalanx.node.podstate import CONTAINER_STATUS_UNKNOWN, ContainerObservation, Termination
from phalanx.objects.clock import parse_time

Obj = dict[str, Any]

_LOST_MESSAGE = "The container could not be located when the agent restarted. The container used to be Running"


def observations_from_status(pod: Obj, now: datetime) -> dict[str, ContainerObservation]:
    """What a previous agent reported, as observations, for containers of which
    this agent finds no trace: no shim record on disk (the runtime adopts the
    others with their real state, see processes.ProcessRuntime.adopt).

    Finished containers stay finished (a completed init container is not run
    again); a container reported running is lost: it counts as terminated with
    137 / ContainerStatusUnknown, and the restart policy decides what follows.
    """
    status = pod.get("status") or {}
    out: dict[str, ContainerObservation] = {}
    for key in ("initContainerStatuses", "containerStatuses"):
        for st in status.get(key) or []:
            if not isinstance(st, dict) or not isinstance(st.get("name"), str):
                continue
            state = st.get("state") or {}
            last = _termination_from((st.get("lastState") or {}).get("terminated"))
            count = st.get("restartCount")
            restarts = count if isinstance(count, int) else 0
            cid = st.get("containerID") or ""
            current: Termination | None = None
            if "running" in state:
                started = parse_time((state.get("running") or {}).get("startedAt")) or now
                current = Termination(exit_code=137, finished_at=now, started_at=started,
                                      reason=CONTAINER_STATUS_UNKNOWN, message=_LOST_MESSAGE, container_id=cid)
            elif "terminated" in state:
                current = _termination_from(state.get("terminated"))
            elif "waiting" in state and last is not None:
                current, last = last, None  # backing off after that termination
            if current is None:
                if restarts == 0 and last is None:
                    continue
                out[st["name"]] = ContainerObservation(name=st["name"], last_termination=last,
                                                       restart_count=restarts, backoff_count=restarts)
                continue
            out[st["name"]] = ContainerObservation(
                name=st["name"], container_id=cid, started_at=current.started_at, terminated=current,
                last_termination=last, restart_count=restarts, backoff_count=restarts)
    return out


def _termination_from(t: Any) -> Termination | None:
    if not isinstance(t, dict):
        return None
    finished = parse_time(t.get("finishedAt"))
    if finished is None:
        return None
    exit_code = t.get("exitCode")
    code = exit_code if isinstance(exit_code, int) else 0
    return Termination(exit_code=code, finished_at=finished, started_at=parse_time(t.get("startedAt")),
                       reason=t.get("reason") or "", message=t.get("message") or "",
                       container_id=t.get("containerID") or "")
