"""The node agent's pod state machine: what to do next and what to report. Pure.

Given a Pod (dict), what the runtime observed of its containers and ``now``,
``decide`` returns the actions (start / restart a container, kill the pod,
delete the pod object), the Kubernetes-shaped ``status`` to write and when to
look again. The rules are the kubelet's: init containers in order, restart
policy applied in place with CrashLoopBackOff back-off, phase and conditions as
``getPhase`` and the condition generators compute them.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Mapping, Union

from phalanx.api.constants import (
    ANNOTATION_NO_RESTART,
    ANNOTATION_NO_RESTART_ON_FAILURE,
    CONDITION_DISRUPTION_TARGET,
    NODE_SHUTDOWN_MESSAGE,
    NODE_SHUTDOWN_REASON,
    REASON_TERMINATION_BY_KUBELET,
)
from phalanx.objects.clock import format_time, parse_time

Obj = dict[str, Any]

ALWAYS = "Always"
ON_FAILURE = "OnFailure"
NEVER = "Never"
RESTART_POLICIES = (ALWAYS, ON_FAILURE, NEVER)

PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
TERMINAL_PHASES = (SUCCEEDED, FAILED)

# Waiting / terminated reasons as the kubelet spells them.
CONTAINER_CREATING = "ContainerCreating"
POD_INITIALIZING = "PodInitializing"
CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
COMPLETED = "Completed"
ERROR = "Error"
OOM_KILLED = "OOMKilled"
CONTAINER_CANNOT_RUN = "ContainerCannotRun"
CONTAINER_STATUS_UNKNOWN = "ContainerStatusUnknown"
DEADLINE_EXCEEDED = "DeadlineExceeded"
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"

DEFAULT_GRACE_SECONDS = 30


@dataclass(frozen=True)
class BackoffConfig:
    """CrashLoopBackOff timing. Kubelet defaults: 10 s doubling to 5 min; the
    back-off is forgotten once a run lasted ``reset_after`` (2 x cap = 10 min)."""

    base: float = 10.0
    cap: float = 300.0
    reset_after: float = 600.0

    def delay(self, n: int) -> float:
        """Delay before the restart that follows ``n`` consecutive restarts.

        The first restart after a failure is immediate (the kubelet has no
        back-off entry yet); then base, 2*base, ... up to cap.
        """
        if n <= 0:
            return 0.0
        # Avoid float overflow for absurd n: the cap is reached long before.
        if n > 64:
            return float(self.cap)
        return float(min(self.base * 2 ** (n - 1), self.cap))


@dataclass(frozen=True)
class Termination:
    """How one container instance ended."""

    exit_code: int
    finished_at: datetime
    started_at: datetime | None = None
    reason: str = ""  # "" -> Completed / Error from the exit code
    message: str = ""
    container_id: str = ""
    permanent: bool = False  # restarting cannot help (e.g. no command): never restarted

    @property
    def effective_reason(self) -> str:
        if self.reason:
            return self.reason
        return COMPLETED if self.exit_code == 0 else ERROR

    def to_state(self) -> Obj:
        t: Obj = {"exitCode": self.exit_code, "reason": self.effective_reason}
        if self.message:
            t["message"] = self.message
        t["startedAt"] = format_time(self.started_at or self.finished_at)
        t["finishedAt"] = format_time(self.finished_at)
        if self.container_id:
            t["containerID"] = self.container_id
        return {"terminated": t}


@dataclass(frozen=True)
class ContainerObservation:
    """What the runtime knows of one container (its current instance).

    Not started: ``started_at`` and ``terminated`` both None. Running:
    ``started_at`` set, ``terminated`` None. Exited: ``terminated`` set.
    ``backoff_count`` is the number of restarts since the back-off was last
    reset; the agent stores what ``StartContainer.backoff_count`` says.
    """

    name: str
    container_id: str = ""
    started_at: datetime | None = None
    terminated: Termination | None = None
    last_termination: Termination | None = None
    restart_count: int = 0
    backoff_count: int = 0

    @property
    def not_started(self) -> bool:
        return self.started_at is None and self.terminated is None

    @property
    def running(self) -> bool:
        return self.started_at is not None and self.terminated is None


@dataclass(frozen=True)
class StartContainer:
    """Start (or, with ``restart``, start again) a container."""

    name: str
    init: bool = False
    restart: bool = False
    backoff_count: int = 0


@dataclass(frozen=True)
class KillPod:
    """Stop every process of the pod: SIGTERM, ``grace_seconds``, SIGKILL."""

    grace_seconds: float
    reason: str  # "Deleted" | DEADLINE_EXCEEDED | "Terminal"


@dataclass(frozen=True)
class DeletePod:
    """Everything stopped and the pod is being deleted: remove it (grace 0)."""


Action = Union[StartContainer, KillPod, DeletePod]


@dataclass
class Decision:
    actions: list[Action]
    status: Obj
    next_wakeup: datetime | None
    phase: str
    # Container names waiting in CrashLoopBackOff -> their current back-off (s).
    backing_off: dict[str, float] = field(default_factory=dict)


# --------------------------------------------------------------------------- helpers


def go_duration(seconds: float) -> str:
    """Format like Go's time.Duration.String(): 10s, 1m20s, 5m0s, 100ms."""
    ns = int(round(seconds * 1e9))
    if ns == 0:
        return "0s"
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    if ns < 1_000:
        return f"{sign}{ns}ns"
    if ns < 1_000_000:
        return f"{sign}{_frac(ns, 1_000)}µs"
    if ns < 1_000_000_000:
        return f"{sign}{_frac(ns, 1_000_000)}ms"
    hours, rem = divmod(ns, 3600 * 10**9)
    minutes, rem = divmod(rem, 60 * 10**9)
    out = sign
    if hours:
        out += f"{hours}h"
    if hours or minutes:
        out += f"{minutes}m"
    return out + f"{_frac(rem, 10**9)}s"


def _frac(value: int, unit: int) -> str:
    whole, frac = divmod(value, unit)
    if frac == 0:
        return str(whole)
    digits = str(frac).rjust(len(str(unit)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"


def pod_ref(pod: Obj) -> str:
    """``name_namespace(uid)``: the kubelet's format.Pod, used in messages."""
    m = pod.get("metadata") or {}
    return f"{m.get('name', '')}_{m.get('namespace', '')}({m.get('uid', '')})"


def restart_policy(pod: Obj) -> str:
    """The pod's restartPolicy, except Never once the job controller marked the
    pod of a finished job not to restart (annotation phalanx.dev/no-restart)."""
    if ((pod.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_NO_RESTART) == "true":
        return "Never"
    return (pod.get("spec") or {}).get("restartPolicy") or ALWAYS


def restarts_failures(pod: Obj) -> bool:
    """False once the job controller marked the pod because its job's backoffLimit
    leaves no restart (annotation phalanx.dev/no-restart-on-failure): a
    container that exits non-zero is then not restarted in place."""
    anns = (pod.get("metadata") or {}).get("annotations") or {}
    return anns.get(ANNOTATION_NO_RESTART_ON_FAILURE) != "true"


def grace_seconds(pod: Obj) -> float:
    """Deletion grace: deletionGracePeriodSeconds, else the pod's
    terminationGracePeriodSeconds, else 30."""
    m = pod.get("metadata") or {}
    v = m.get("deletionGracePeriodSeconds")
    if v is None:
        v = (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        return float(DEFAULT_GRACE_SECONDS)
    return float(v)


def pod_problem(pod: Obj) -> str | None:
    """Why the agent cannot run this pod (field path and rule), or None.

    Admission validates pods; this guards the agent against anything that
    slipped through so it never crashes on a weird object.
    """
    if not isinstance(pod, dict):
        return "pod: must be an object"
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return "spec: Required value"
    policy = spec.get("restartPolicy")
    if policy is not None and policy not in RESTART_POLICIES:
        return f'spec.restartPolicy: Unsupported value: "{policy}": supported values: "Always", "OnFailure", "Never"'
    seen: set[str] = set()
    for field_name in ("initContainers", "containers"):
        items = spec.get(field_name)
        if items is None and field_name == "initContainers":
            continue
        if not isinstance(items, list) or (field_name == "containers" and not items):
            return f"spec.{field_name}: Required value: must be a non-empty list"
        for i, c in enumerate(items):
            path = f"spec.{field_name}[{i}]"
            if not isinstance(c, dict):
                return f"{path}: must be an object"
            name = c.get("name")
            if not isinstance(name, str) or not name:
                return f"{path}.name: Required value"
            if name in seen:
                return f'{path}.name: Duplicate value: "{name}"'
            seen.add(name)
    return None


# --------------------------------------------------------------------------- decide


@dataclass
class _Eval:
    """Per-container outcome of one decision round."""

    state: Obj
    last_state: Obj
    ready: bool
    started: bool
    will_restart: bool = False
    succeeded: bool = False  # terminated with exit 0 (current instance)
    failed_final: bool = False  # terminated non-zero and will not restart
    has_run: bool = False


def decide(
    pod: Obj,
    observations: Mapping[str, ContainerObservation],
    now: datetime,
    *,
    pod_ip: str | None = None,
    host_ip: str = "127.0.0.1",
    backoff: BackoffConfig = BackoffConfig(),
) -> Decision:
    """One round of the kubelet's syncPod, without the side effects."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    old_status: Obj = pod.get("status") or {}
    containers: list[Obj] = list(spec.get("containers") or [])
    inits: list[Obj] = list(spec.get("initContainers") or [])
    policy = restart_policy(pod)
    failures_restart = restarts_failures(pod)

    old_phase = old_status.get("phase")
    frozen = old_phase in TERMINAL_PHASES
    deleting = bool(meta.get("deletionTimestamp"))

    def obs(name: str) -> ContainerObservation:
        return observations.get(name) or ContainerObservation(name=name)

    # After an agent restart the runtime knows nothing of a finished pod: keep
    # what was reported; never run a terminal pod again.
    if frozen and all(obs(c.get("name", "")).not_started and obs(c.get("name", "")).restart_count == 0
                      for c in inits + containers):
        kept = copy.deepcopy(old_status)
        return Decision([DeletePod()] if deleting else [], kept, None, str(old_phase))

    start_time = parse_time(old_status.get("startTime")) or now
    deadline = _active_deadline(spec, start_time)
    exceeded = deadline is not None and now >= deadline
    stopping = deleting or exceeded or frozen

    actions: list[Action] = []
    wakeups: list[datetime] = []
    backing_off: dict[str, float] = {}
    has_init = bool(inits)

    def evaluate(c: Obj, o: ContainerObservation, init: bool, may_start: bool) -> _Eval:
        name = c.get("name", "")
        waiting_reason = POD_INITIALIZING if has_init else CONTAINER_CREATING
        last = o.last_termination.to_state() if o.last_termination else {}
        if o.not_started:
            if may_start and not stopping:
                actions.append(StartContainer(name=name, init=init, restart=o.restart_count > 0,
                                              backoff_count=o.backoff_count))
            return _Eval({"waiting": {"reason": waiting_reason}}, last, ready=False, started=False)
        if o.running:
            assert o.started_at is not None
            return _Eval({"running": {"startedAt": format_time(o.started_at)}}, last,
                         ready=not init, started=True, has_run=True)
        t = o.terminated
        assert t is not None
        eff_policy = (NEVER if policy == NEVER else ON_FAILURE) if init else policy
        restartable = (eff_policy == ALWAYS) or (eff_policy == ON_FAILURE and t.exit_code != 0)
        if t.exit_code != 0 and not failures_restart:
            restartable = False
        will_restart = restartable and not t.permanent and not stopping
        ev = _Eval(t.to_state(), last, ready=init and t.exit_code == 0, started=False,
                   will_restart=will_restart, succeeded=t.exit_code == 0,
                   failed_final=t.exit_code != 0 and not will_restart, has_run=True)
        if not will_restart:
            return ev
        ran = (t.finished_at - t.started_at).total_seconds() if t.started_at else 0.0
        n = 0 if ran >= backoff.reset_after else o.backoff_count
        delay = backoff.delay(n)
        due = t.finished_at + timedelta(seconds=delay)
        # As the kubelet does: the exit is reported first (Error), the back-off
        # on the next round (CrashLoopBackOff), which lasts until the restart.
        reported = _termination_reported(old_status, name, init, t)
        msg = f"back-off {go_duration(delay)} restarting failed container={name} pod={pod_ref(pod)}"
        if now >= due:
            actions.append(StartContainer(name=name, init=init, restart=True, backoff_count=n + 1))
        else:
            wakeups.append(due)
            if reported:
                backing_off[name] = delay
        if reported and delay > 0:
            ev.state = {"waiting": {"reason": CRASH_LOOP_BACK_OFF, "message": msg}}
            ev.last_state = t.to_state()
        return ev

    # Init containers, in order: each must exit 0 before the next starts.
    init_evals: dict[str, _Eval] = {}
    init_done = True
    init_failed = False
    incomplete: list[str] = []
    for c in inits:
        name = c.get("name", "")
        o = obs(name)
        if not init_done:
            # Later init containers wait for the current one.
            ev = _Eval({"waiting": {"reason": POD_INITIALIZING}},
                       o.last_termination.to_state() if o.last_termination else {}, False, False)
        else:
            ev = evaluate(c, o, init=True, may_start=True)
            if not (o.terminated is not None and o.terminated.exit_code == 0):
                init_done = False
                init_failed = ev.failed_final
        if not ev.ready:
            incomplete.append(name)
        init_evals[name] = ev

    evals: dict[str, _Eval] = {}
    for c in containers:
        name = c.get("name", "")
        o = obs(name)
        if init_done:
            evals[name] = evaluate(c, o, init=False, may_start=True)
        else:
            last = o.last_termination.to_state() if o.last_termination else {}
            if o.not_started:
                evals[name] = _Eval({"waiting": {"reason": POD_INITIALIZING}}, last, False, False)
            else:  # seen after an agent restart: report what is known, start nothing
                evals[name] = evaluate(c, o, init=False, may_start=False)

    any_running = any(e.started for e in list(init_evals.values()) + list(evals.values()))
    any_regular_run = any(e.has_run for e in evals.values())

    # Phase (kubelet getPhase, with "will restart" made explicit).
    reason = message = None
    if exceeded:
        phase = FAILED
        reason, message = DEADLINE_EXCEEDED, DEADLINE_MESSAGE
    elif init_failed and not any_regular_run:
        phase = FAILED
    elif not init_done and not any_regular_run:
        phase = PENDING
    else:
        regs = list(evals.values())
        if any(not e.has_run for e in regs):
            phase = PENDING
        elif any(e.started for e in regs):
            phase = RUNNING
        elif any(e.will_restart for e in regs):
            phase = RUNNING
        elif all(e.succeeded for e in regs):
            phase = SUCCEEDED
        else:
            phase = FAILED
    if frozen:
        phase = str(old_phase)  # a terminal phase
        reason, message = old_status.get("reason"), old_status.get("message")
    terminal = phase in TERMINAL_PHASES

    if stopping and any_running:
        kill_reason = "Deleted" if deleting else (DEADLINE_EXCEEDED if exceeded else "Terminal")
        grace = grace_seconds(pod) if deleting else _termination_grace(spec)
        actions = [KillPod(grace_seconds=grace, reason=kill_reason)]
    elif stopping:
        actions = [DeletePod()] if deleting else []
    if stopping:
        wakeups = []
        backing_off = {}
    elif deadline is not None and not terminal:
        wakeups.append(deadline)

    # Conditions.
    initialized = init_done or any_regular_run
    unready = [c.get("name", "") for c in containers if not evals[c.get("name", "")].ready]
    old_conds = {c.get("type"): c for c in old_status.get("conditions") or [] if isinstance(c, dict)}

    def cond(ctype: str, ok: bool, r: str | None = None, m: str | None = None) -> Obj:
        status_s = "True" if ok else "False"
        prev = old_conds.get(ctype)
        ltt = prev.get("lastTransitionTime") if prev and prev.get("status") == status_s else None
        out: Obj = {"type": ctype, "status": status_s, "lastProbeTime": None,
                    "lastTransitionTime": ltt or format_time(now)}
        if r:
            out["reason"] = r
        if m:
            out["message"] = m
        return out

    sandbox = cond("PodReadyToStartContainers", not terminal and not (stopping and not any_running))
    if phase == SUCCEEDED:
        init_c = cond("Initialized", True, "PodCompleted")
    elif initialized:
        init_c = cond("Initialized", True)
    else:
        init_c = cond("Initialized", False, "ContainersNotInitialized",
                      f"containers with incomplete status: [{' '.join(incomplete)}]")
    if phase == SUCCEEDED:
        ready_args: tuple[bool, str | None, str | None] = (False, "PodCompleted", None)
    elif phase == FAILED:
        ready_args = (False, "PodFailed", None)
    elif unready:
        ready_args = (False, "ContainersNotReady", f"containers with unready status: [{' '.join(unready)}]")
    else:
        ready_args = (True, None, None)
    scheduled = old_conds.get("PodScheduled") or cond("PodScheduled", True)
    # A PodCondition holds scalars only: a flat copy is a whole one.
    conditions = [sandbox, init_c, cond("Ready", *ready_args), cond("ContainersReady", *ready_args),
                  dict(scheduled)]
    # Conditions the agent does not own (DisruptionTarget, ...) are kept.
    conditions += [dict(c) for t, c in old_conds.items() if t not in _OWN_CONDITIONS]

    # Status, in the kubelet's key order; fields we do not own are kept.
    status: Obj = {}
    status["hostIP"] = host_ip
    status["hostIPs"] = [{"ip": host_ip}]
    if pod_ip:
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    status["startTime"] = format_time(start_time)
    status["phase"] = phase
    if reason:
        status["reason"] = reason
    if message:
        status["message"] = message
    status["conditions"] = conditions
    if inits:
        status["initContainerStatuses"] = [_container_status(c, obs(c.get("name", "")), init_evals[c.get("name", "")])
                                           for c in inits]
    status["containerStatuses"] = [_container_status(c, obs(c.get("name", "")), evals[c.get("name", "")])
                                   for c in containers]
    owned = set(status) | {"reason", "message", "podIP", "podIPs", "initContainerStatuses"}
    for k, v in old_status.items():
        if k not in owned:
            status[k] = copy.deepcopy(v)

    return Decision(actions, status, min(wakeups) if wakeups else None, phase, backing_off)


def _termination_reported(old_status: Obj, name: str, init: bool, t: Termination) -> bool:
    """Whether the last written status already shows this termination (as the
    current state, or as lastState of the back-off that followed)."""
    key = "initContainerStatuses" if init else "containerStatuses"
    finished = format_time(t.finished_at)
    for st in old_status.get(key) or []:
        if not isinstance(st, dict) or st.get("name") != name:
            continue
        for shown in ((st.get("state") or {}).get("terminated"), (st.get("lastState") or {}).get("terminated")):
            if isinstance(shown, dict) and shown.get("finishedAt") == finished \
                    and shown.get("containerID", "") == t.container_id:
                return True
    return False


def _container_status(c: Obj, o: ContainerObservation, ev: _Eval) -> Obj:
    s: Obj = {"name": c.get("name", ""), "ready": ev.ready, "restartCount": o.restart_count, "started": ev.started}
    if o.container_id:
        s["containerID"] = o.container_id
    s["state"] = ev.state
    s["lastState"] = ev.last_state
    s["image"] = c.get("image") or ""
    s["imageID"] = ""
    return s


def _active_deadline(spec: Obj, start: datetime) -> datetime | None:
    v = spec.get("activeDeadlineSeconds")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
        return None
    return start + timedelta(seconds=v)


def _termination_grace(spec: Obj) -> float:
    v = spec.get("terminationGracePeriodSeconds")
    if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
        return float(DEFAULT_GRACE_SECONDS)
    return float(v)


_OWN_CONDITIONS = ("PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled")


def shutdown_status(pod: Obj, now: datetime) -> Obj:
    """The status of a pod stopped because its node shuts down (kubelet's
    graceful node shutdown): Failed, reason Terminated, DisruptionTarget True."""
    old = pod.get("status")
    status: Obj = copy.deepcopy(old) if isinstance(old, dict) else {}
    status["phase"] = FAILED
    status["reason"] = NODE_SHUTDOWN_REASON
    status["message"] = NODE_SHUTDOWN_MESSAGE
    conds = [c for c in status.get("conditions") or []
             if isinstance(c, dict) and c.get("type") != CONDITION_DISRUPTION_TARGET]
    conds.append({"type": CONDITION_DISRUPTION_TARGET, "status": "True", "lastProbeTime": None,
                  "lastTransitionTime": format_time(now), "reason": REASON_TERMINATION_BY_KUBELET,
                  "message": NODE_SHUTDOWN_MESSAGE})
    status["conditions"] = conds
    return status


def rejected_status(pod: Obj, now: datetime, reason: str, message: str, *,
                    pod_ip: str | None = None, host_ip: str = "127.0.0.1") -> Obj:
    """Status for a pod the agent refuses to run: phase Failed with a reason."""
    reported = pod.get("status")
    old: Obj = reported if isinstance(reported, dict) else {}
    status: Obj = {"hostIP": host_ip, "hostIPs": [{"ip": host_ip}]}
    if pod_ip:
        status.update(podIP=pod_ip, podIPs=[{"ip": pod_ip}])
    status["startTime"] = old.get("startTime") or format_time(now)
    status["phase"] = FAILED
    status["reason"] = reason
    status["message"] = message
    conds = [c for c in old.get("conditions") or [] if isinstance(c, dict) and c.get("type") == "PodScheduled"]
    status["conditions"] = conds
    return status
