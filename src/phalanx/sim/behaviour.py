"""How a simulated container behaves: from the pod's annotations, else from its command.

Annotations (on the pod template; the job controller copies them to the pods):

- ``sim.phalanx.dev/duration``: how long a run lasts (``30s``, ``2h``; ``inf``: until killed);
- ``sim.phalanx.dev/exit-code``: what it exits with (default 0);
- ``sim.phalanx.dev/fail-after``: failing runs last this long and exit with
  ``exit-code`` (1 when that is 0), ``sim.phalanx.dev/failures`` times (default:
  every run), after which runs last ``duration`` and exit 0;
- ``sim.phalanx.dev/startup``: seconds from start to running (default: the simulation's);
- ``sim.phalanx.dev/replica-<index>``: the same keys for one replica index only,
  as ``"fail-after=10s exit-code=1"``.

They apply to the regular containers. Without them, the command is read
(``phalanx.sim.script``): the seeds' ``sh -c`` scripts run as written, with the
container's environment (RANK, POD_NAME from a fieldRef, ...). Init containers
always follow their command; the PyTorch workers' wait for the master is a
``WaitFor``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from phalanx.api.constants import LABEL_REPLICA_INDEX
from phalanx.sim.script import Outcome, WaitFor, evaluate, wait_for
from phalanx.sim.units import DurationError, parse_duration

PREFIX = "sim.phalanx.dev/"
DURATION = PREFIX + "duration"
EXIT_CODE = PREFIX + "exit-code"
FAIL_AFTER = PREFIX + "fail-after"
FAILURES = PREFIX + "failures"
STARTUP = PREFIX + "startup"
REPLICA = PREFIX + "replica-"
KEYS = ("duration", "exit-code", "fail-after", "failures", "startup")


class BehaviourError(ValueError):
    """An annotation that does not say what a run does; names the annotation."""


@dataclass(frozen=True)
class Behaviour:
    """What the runs of one container do. ``attempt`` counts the runs of that
    container in that pod slot (restarts in place and recreated pods alike)."""

    duration: float | None = None      # None: from the command
    exit_code: int | None = None
    fail_after: float | None = None
    failures: int | None = None        # None with fail_after: every run fails
    startup: float | None = None

    def outcome(self, attempt: int, command: Outcome) -> Outcome:
        if self.fail_after is not None and (self.failures is None or attempt < self.failures):
            code = self.exit_code if self.exit_code not in (None, 0) else 1
            return Outcome(self.fail_after, code)
        duration = self.duration if self.duration is not None else command.duration
        if self.fail_after is not None:  # the failures are over: a clean run
            return Outcome(duration, 0)
        code = self.exit_code if self.exit_code is not None else command.exit_code
        return Outcome(duration, code)


def _parse(values: Mapping[str, str], where: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, raw in values.items():
        name = f"{where}{key}"
        try:
            if key == "duration":
                out["duration"] = math.inf if str(raw).strip() in ("inf", "infinity") else parse_duration(raw)
            elif key == "fail-after":
                out["fail_after"] = parse_duration(raw)
            elif key == "startup":
                out["startup"] = parse_duration(raw)
            elif key in ("exit-code", "failures"):
                v = int(str(raw).strip())
                if key == "exit-code" and not 0 <= v <= 255:
                    raise ValueError("must be 0..255")
                if key == "failures" and v < 0:
                    raise ValueError("must be >= 0")
                out[key.replace("-", "_")] = v
        except (DurationError, ValueError) as e:
            raise BehaviourError(f"{name}: Invalid value: {raw!r}: {e}") from None
    return out


def _pairs(text: str, where: str) -> dict[str, str]:
    """``"fail-after=10s exit-code=1"`` (spaces or commas between pairs)."""
    out: dict[str, str] = {}
    for part in text.replace(",", " ").split():
        key, sep, val = part.partition("=")
        if not sep or key not in KEYS:
            raise BehaviourError(f"{where}: Invalid value: {part!r}: expected key=value with key one of "
                                 f"{', '.join(KEYS)}")
        out[key] = val
    return out


def behaviour_of(pod: Mapping[str, Any]) -> Behaviour:
    """The pod's behaviour annotations, the replica-index ones applied last."""
    meta = pod.get("metadata") or {}
    anns = meta.get("annotations") or {}
    if not any(isinstance(k, str) and k.startswith(PREFIX) for k in anns):
        return Behaviour()
    values = {k[len(PREFIX):]: v for k, v in anns.items() if isinstance(k, str) and k[len(PREFIX):] in KEYS}
    fields = _parse(values, PREFIX)
    index = (meta.get("labels") or {}).get(LABEL_REPLICA_INDEX)
    if index is not None and REPLICA + str(index) in anns:
        key = REPLICA + str(index)
        fields.update(_parse(_pairs(str(anns[key]), key), key + ":"))
    return Behaviour(**fields)


def container_env(pod: Mapping[str, Any], container: Mapping[str, Any]) -> dict[str, str]:
    """The environment a script would see: literal values and the pod fieldRefs."""
    meta = pod.get("metadata") or {}
    env: dict[str, str] = {}
    for e in container.get("env") or []:
        if not isinstance(e, dict) or not isinstance(e.get("name"), str):
            continue
        if "value" in e:
            env[e["name"]] = str(e.get("value") if e.get("value") is not None else "")
            continue
        ref = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if ref in ("metadata.name", "metadata.namespace", "metadata.uid"):
            env[e["name"]] = str(meta.get(ref.split(".", 1)[1]) or "")
        elif ref == "spec.nodeName":
            env[e["name"]] = str((pod.get("spec") or {}).get("nodeName") or "")
        elif isinstance(ref, str) and ref.startswith(("metadata.labels['", "metadata.annotations['")):
            which = "labels" if ".labels[" in ref else "annotations"
            key = ref.split("['", 1)[1].rstrip("']")
            env[e["name"]] = str((meta.get(which) or {}).get(key, ""))
    return env


def run_of(pod: Mapping[str, Any], container: Mapping[str, Any], init: bool, attempt: int,
           behaviour: Behaviour) -> Outcome | WaitFor:
    """What run number ``attempt`` of ``container`` does."""
    if init:
        w = wait_for(container)
        if w is not None:
            return w
        return evaluate(container, container_env(pod, container))
    if behaviour.fail_after is not None and (behaviour.failures is None or attempt < behaviour.failures):
        return behaviour.outcome(attempt, Outcome(0.0))
    if behaviour.duration is not None and (behaviour.exit_code is not None or behaviour.fail_after is not None):
        return behaviour.outcome(attempt, Outcome(0.0))
    return behaviour.outcome(attempt, evaluate(container, container_env(pod, container)))
