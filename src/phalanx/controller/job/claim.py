"""Claiming the objects of a job's names (docs/SEMANTICS.md S14): use, adopt (ControllerRefManager) or wait.

Pods, Services, the PodGroup and the framework's other objects (MPI's ConfigMap) have names the
job derives from its own; one of them is the job's only when its controller ownerReference names
the job's uid. One controlled by another uid (a job of the same name deleted a moment ago whose
objects the garbage collector has not removed yet, another kind's job of that name) is never used,
changed or deleted: its name is blocked, the job says so (a Warning ``ErrResourceExists`` event,
the mpi-operator's wording, and the Created condition's message) and goes on once it is gone (its
events enqueue the job: ``Claimants``). An orphan (no controller reference) that the job's selector
matches is adopted: the job's controller reference is added to its ownerReferences, with the
resourceVersion read as the precondition. The selector: the job's operator-name and job-name labels
for pods and Services, the name for the PodGroup and the other objects (they carry no such labels).
An orphan being deleted, or a pod or Service of the job's name without its labels, blocks the name.
"""
from __future__ import annotations

import copy
import logging
from datetime import datetime
from typing import Callable, Iterable, NamedTuple

from phalanx.api.constants import LABEL_JOB_NAME
from phalanx.client.interface import Client
from phalanx.controller.conditions import CREATED, get_condition, is_finished
from phalanx.controller.fields import as_list, as_str, namespace, owner_reference, status
from phalanx.controller.frameworks.base import Framework
from phalanx.controller.job.plan import Plan
from phalanx.controller.job.pods import job_labels
from phalanx.objects.clock import format_time
from phalanx.objects.errors import ApiError, Conflict, NotFound
from phalanx.objects.meta import (
    Obj,
    controller_ref,
    controller_uid,
    is_deleting,
    labels_of,
    match_labels,
    metadata_of,
    name_of,
    namespace_of,
    uid_of,
)

log = logging.getLogger(__name__)

OWNER_INDEX = "controller-uid"
ORPHAN_INDEX = "orphan-of-job"
EXISTS_REASON = "ErrResourceExists"
WAITING = " Waiting for "  # what the Created condition's message says while a name is blocked
LISTED = 3  # blocked objects the condition's message names; the rest are counted

Lookup = Callable[[str, str, str], "Obj | None"]  # (kind, namespace, name) -> the cached object


class Blocked(NamedTuple):
    """An object of one of the job's names the job may not take, and why (``held``)."""

    kind: str
    name: str
    held: str  # "controlled by <Kind> <name>, uid <uid>", or what keeps an orphan from being adopted

    @property
    def token(self) -> str:
        return f'{self.kind} "{self.name}"'


def owner_index(obj: Obj) -> list[str]:
    """The OWNER_INDEX values of an object: its controller's uid, if any."""
    uid = controller_uid(obj)
    return [uid] if uid else []


def orphan_index(obj: Obj) -> list[str]:
    """The ORPHAN_INDEX values of an object: ``<namespace>/<job-name label>`` when it has no controller."""
    job = labels_of(obj).get(LABEL_JOB_NAME)
    if controller_ref(obj) is not None or not isinstance(job, str) or not job:
        return []
    return [f"{namespace_of(obj) or ''}/{job}"]


def controlled_by(obj: Obj | None, job_uid: str) -> bool:
    return bool(job_uid) and isinstance(obj, dict) and controller_uid(obj) == job_uid


def claim(job: Obj, fw: Framework, plan: Plan, cached: Lookup, orphans: Iterable[Obj], now: datetime) -> list[Blocked]:
    """Fit ``plan`` to what the caches hold under the job's names: every orphan of ``orphans``
    (pods and Services labelled with the job's name) that the job's selector matches goes into
    ``plan.adopt``; a planned create (or apply) of a name already taken is dropped: the orphan
    the job adopts instead, or an object it may not take, returned (and reported by ``report``)."""
    ns, juid, selector = namespace(job), uid_of(job), job_labels(fw, job)
    adopting: set[tuple[str, str]] = set()
    for o in orphans:
        key = (as_str(o.get("kind")), name_of(o))
        if key not in adopting and _adoptable(o, selector):
            adopting.add(key)
            plan.adopt.append(o)
    blocked: list[Blocked] = []

    def free(want: Obj) -> bool:
        kind, n = as_str(want.get("kind")), name_of(want)
        have = cached(kind, ns, n)
        if have is None or controlled_by(have, juid):
            return True  # not there, or ours already (a cache behind our own write)
        if (kind, n) in adopting:
            return False
        ref = controller_ref(have)
        if ref is not None:
            held = f"controlled by {as_str(ref.get('kind'))} {as_str(ref.get('name'))}, uid {as_str(ref.get('uid'))}"
        elif _adoptable(have, selector if kind in ("Pod", "Service") else None):
            adopting.add((kind, n))
            plan.adopt.append(have)
            return False
        else:
            held = "no controller, being deleted" if is_deleting(have) else "no controller, not the job's labels"
        blocked.append(Blocked(kind, n, held))
        return False

    if plan.podgroup_create is not None and not free(plan.podgroup_create):
        plan.podgroup_create = None
    plan.apply_objects = [o for o in plan.apply_objects if free(o)]
    plan.create_services = [o for o in plan.create_services if free(o)]
    plan.create_pods = [o for o in plan.create_pods if free(o)]
    report(job, fw, plan, blocked, now)
    return blocked


def _adoptable(obj: Obj, selector: dict[str, str] | None) -> bool:
    if controller_ref(obj) is not None or is_deleting(obj):
        return False
    return selector is None or match_labels(selector, {k: v for k, v in labels_of(obj).items() if isinstance(v, str)})


def report(job: Obj, fw: Framework, plan: Plan, blocked: list[Blocked], now: datetime) -> None:
    """While names are blocked the Created condition's message names them (and says so no more
    once none is); each blocked object it did not name yet gets a Warning event on the job."""
    base = plan.status if plan.status is not None else status(job)
    if is_finished(base):
        return  # a finished job's conditions are frozen, and it creates nothing
    created = f"{fw.kind} {name_of(job)} is created."
    cond = get_condition(base, CREATED)
    old = as_str(cond.get("message")) if cond is not None else ""
    message = created
    if blocked:
        listed = "; ".join(f"{b.token} ({b.held})" for b in blocked[:LISTED])
        more = f" and {len(blocked) - LISTED} more" if len(blocked) > LISTED else ""
        message = f"{created}{WAITING}objects of its names that it does not manage to be deleted: {listed}{more}"
    elif not old.startswith(created + WAITING):
        return  # nothing blocked, and the message says nothing of it
    if cond is None or message == old:
        return
    new = copy.deepcopy(base)
    for c in as_list(new.get("conditions")):
        if isinstance(c, dict) and c.get("type") == CREATED:
            c.update(message=message, lastUpdateTime=format_time(now))
    plan.status = new if new != status(job) else None
    for b in blocked:
        if b.token not in old:
            plan.events.append(("Warning", EXISTS_REASON,
                                f"Resource \"{b.name}\" of Kind \"{b.kind}\" already exists and is not managed by "
                                f"this {fw.kind} (uid {uid_of(job)}): {b.held}; waiting for it to be deleted"))


async def adopt(client: Client, job: Obj, orphan: Obj, conflict_retry: float, error_retry: float) -> float | None:
    """Add the job's controller reference to ``orphan``'s ownerReferences (a merge patch on the
    resourceVersion read); the delay of a retry when that failed (``conflict_retry``: the orphan
    changed or went meanwhile, decided again on what the caches show then)."""
    kind, n, ns = as_str(orphan.get("kind")), name_of(orphan), namespace(orphan)
    mine = owner_reference(job)
    refs = [r for r in as_list(metadata_of(orphan).get("ownerReferences"))
            if isinstance(r, dict) and r.get("uid") != mine["uid"]]
    patch = {"metadata": {"ownerReferences": [*refs, mine],
                          "resourceVersion": metadata_of(orphan).get("resourceVersion")}}
    try:
        await client.patch(kind, n, ns, patch, "merge")
    except (Conflict, NotFound):
        return conflict_retry
    except ApiError as e:
        log.warning("adopting %s %s/%s: %s", kind, ns, n, e.message)
        return error_retry
    log.info("%s %s/%s adopted %s %s", as_str(job.get("kind")), ns, name_of(job), kind, n)
    return None


class Claimants:
    """Which jobs an owned object's event concerns beyond its controller's: the jobs of its name
    (the PodGroup's name, a pod's or Service's job-name label: an orphan to adopt, an object of
    another owner showing up after the job's create of that name found it), and the jobs waiting
    for it to go (``wait``: an object that blocks a name, whatever its kind and labels)."""

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, str, str], set[str]] = {}
        self._by_job: dict[str, set[tuple[str, str, str]]] = {}

    def wait(self, job_key: str, ns: str, blocked: Iterable[Blocked]) -> None:
        """``job_key`` waits for exactly ``blocked`` (in ``ns``) now."""
        now = {(b.kind, ns, b.name) for b in blocked}
        for obj in self._by_job.pop(job_key, set()) - now:
            keys = self._waiting.get(obj, set())
            keys.discard(job_key)
            if not keys:
                self._waiting.pop(obj, None)
        for obj in now:
            self._waiting.setdefault(obj, set()).add(job_key)
        if now:
            self._by_job[job_key] = now

    def keys(self, event_type: str, obj: Obj, named: Callable[[str, str], list[str]]) -> set[str]:
        """The keys of the jobs ``obj``'s event concerns (``named(ns, name)``: the keys of the
        cached jobs of that name)."""
        kind, ns, n = as_str(obj.get("kind")), namespace(obj), name_of(obj)
        out = set(self._waiting.get((kind, ns, n), ()))
        if event_type == "DELETED":
            for k in out:
                self._by_job.get(k, set()).discard((kind, ns, n))
            self._waiting.pop((kind, ns, n), None)
        job = n if kind == "PodGroup" else labels_of(obj).get(LABEL_JOB_NAME)
        if isinstance(job, str) and job:
            out.update(named(ns, job))
        return out

