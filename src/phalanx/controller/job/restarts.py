"""Restarts counted by the job, kept in its status; backoffLimit N grants N restarts.

The original reads ``restartCount`` back from pods that are Running, so
restarts of a recreated pod are lost and ExitCode retries are unlimited. Here
every failure that leads to a restart is counted once, in the job's status:

- ``status.restartCount``: the total, compared with ``backoffLimit``;
- ``status.replicaStatuses[<type>].restarts``: the same, per replica type;
- ``status.podRestarts``: ``{<pod>: {uid, containers: {<name>: n}, failing: [<name>],
  failureCounted, deletedByJob, preempted}}`` for every pod of the job seen alive: the last
  ``restartCount`` seen per container (an in-place restart is counted once), the
  containers whose current failure (exited non-zero, about to be restarted in
  place) is already counted, whether the pod's own failure or deletion was
  counted, whether the job controller deleted it on purpose, and the message of
  the scheduler's eviction mark when the pod was preempted.

A failure is counted when it is seen — an exited container waiting for its
in-place restart included — so the failure past ``backoffLimit`` fails the job
before the node agent restarts it (a restart that was granted runs, no
other starts). A pod that disappears (or is being deleted) without the job
controller having deleted it was deleted from outside: one restart. A
restart after a clean exit (``Always``) is not a failure and is not counted,
nor is the end of a pod the scheduler evicted (preempted, reclaimed).
"""
from __future__ import annotations

import copy
from typing import Callable

from phalanx.api.constants import ANNOTATION_NO_RESTART
from phalanx.controller.fields import as_dict, as_int, as_list, as_str, container_statuses, pod_phase, spec
from phalanx.objects.meta import Obj, is_deleting, metadata_of, name_of, uid_of


def is_retryable_exit_code(code: int | None) -> bool:
    """ExitCode classes: 130, 137, 138, 143 and any other 129-255 retryable; 1, 2, 126-128,
    139 and 3-125 permanent; a container that never terminated is retryable."""
    if code is None:
        return True
    return code >= 129 and code != 139


def exit_code(pod: Obj, container: str) -> int | None:
    """Exit code of ``container`` if it is terminated, else None (the original's 0xbeef)."""
    for cs in container_statuses(pod):
        if cs.get("name") == container:
            term = as_dict(as_dict(cs.get("state")).get("terminated"))
            if term:
                return as_int(term.get("exitCode"))
    return None


def _last_exit_clean(cs: Obj) -> bool:
    term = as_dict(as_dict(cs.get("lastState")).get("terminated"))
    return bool(term) and as_int(term.get("exitCode")) == 0


def _last_exit_failed(cs: Obj) -> bool:
    term = as_dict(as_dict(cs.get("lastState")).get("terminated"))
    return bool(term) and as_int(term.get("exitCode")) != 0


def failing_now(cs: Obj) -> bool:
    """The container's current instance exited non-zero and it has not been
    restarted yet: terminated, or waiting in CrashLoopBackOff after that exit."""
    state = as_dict(cs.get("state"))
    term = as_dict(state.get("terminated"))
    if term:
        return as_int(term.get("exitCode")) != 0
    return as_dict(state.get("waiting")).get("reason") == "CrashLoopBackOff" and _last_exit_failed(cs)


def restarts_in_place(pod: Obj) -> bool:
    """Whether the node agent restarts ``pod``'s failed containers in place:
    restartPolicy OnFailure/Always, not finished, not being deleted, not marked
    never to restart. (A pod marked not to restart failures, when no restart is left, may
    still show one it restarts: the mark can arrive after the failure.)"""
    if as_str(metadata_of(pod).get("deletionTimestamp")) or pod_phase(pod) in ("Succeeded", "Failed"):
        return False
    if as_dict(metadata_of(pod).get("annotations")).get(ANNOTATION_NO_RESTART) == "true":
        return False
    return (as_str(spec(pod).get("restartPolicy")) or "Always") in ("OnFailure", "Always")


def _new_failures(seen: Obj, failing: set[str], pod: Obj) -> tuple[int, dict[str, int], set[str]]:
    """(failures not counted yet, the new per-container ``restartCount``s, the
    containers whose current failure is now counted)."""
    seen = dict(seen)
    failing = set(failing)
    in_place = restarts_in_place(pod)
    counted = 0
    for cs in container_statuses(pod, init=True) + container_statuses(pod):
        cname = as_str(cs.get("name"))
        if not cname:
            continue
        n = as_int(cs.get("restartCount"), 0) or 0
        before = as_int(seen.get(cname), 0) or 0
        if n > before:
            delta = n - before
            if cname in failing:
                delta -= 1  # the first of these restarts followed the failure counted already
                failing.discard(cname)
            if delta > 0 and _last_exit_clean(cs):
                delta -= 1  # the latest restart followed a clean exit (Always)
            counted += max(0, delta)
            seen[cname] = n
        if in_place and failing_now(cs) and cname not in failing:
            counted += 1
            failing.add(cname)
    return counted, dict(sorted((k, v) for k, v in seen.items() if v > 0)), failing


class RestartBook:
    """The restart counters of one job, read from and written back to its status."""

    def __init__(self, status: Obj) -> None:
        status = as_dict(status)
        self.total = max(0, as_int(status.get("restartCount"), 0) or 0)
        self.per_type: dict[str, int] = {}
        for rtype, rs in as_dict(status.get("replicaStatuses")).items():
            n = as_int(as_dict(rs).get("restarts"), 0) or 0
            if n > 0:
                self.per_type[rtype] = n
        self.entries: dict[str, Obj] = {
            k: copy.deepcopy(v) for k, v in as_dict(status.get("podRestarts")).items() if isinstance(v, dict)
        }
        # Replica types that lost a pod to a deletion from outside in this round.
        self.deleted_types: list[str] = []
        # Preempted pods that vanished in this round: (name, eviction message).
        self.preempted_gone: list[tuple[str, str]] = []

    def _entry(self, pod: Obj) -> Obj:
        e = self.entries.get(name_of(pod))
        if e is None or e.get("uid") != uid_of(pod):
            e = {"uid": uid_of(pod)}
        return e

    @staticmethod
    def _expected_gone(e: Obj) -> bool:
        """The pod's end is accounted for: its failure was counted (it is
        being recreated), the job controller deleted it on purpose, or the scheduler evicted it."""
        return bool(e.get("failureCounted") or e.get("deletedByJob") or as_list(e.get("failing"))
                    or "preempted" in e)

    def _store(self, pod: Obj, e: Obj) -> None:
        e = {k: v for k, v in e.items() if v not in (None, False, {}, [])}
        self.entries[name_of(pod)] = e

    def _add(self, rtype: str, n: int) -> None:
        if n > 0:
            self.total += n
            self.per_type[rtype] = self.per_type.get(rtype, 0) + n

    def _deleted_from_outside(self, rtype: str) -> None:
        self._add(rtype, 1)
        if rtype not in self.deleted_types:
            self.deleted_types.append(rtype)

    def observe(self, pod: Obj, rtype: str) -> int:
        """Count what ``pod`` shows that was not counted before: in-place
        restarts, a failure about to be restarted in place, the end of a
        previous pod of the same name, a deletion from outside. Returns how many."""
        total_before = self.total
        old = self.entries.get(name_of(pod))
        if old is not None and old.get("uid") != uid_of(pod) and not self._expected_gone(old):
            self._deleted_from_outside(rtype)  # the previous pod vanished unseen
        if is_deleting(pod):
            # Counted once, and only for a pod seen alive before: one first seen
            # deleting went before we knew it (deleted by us, e.g. on suspend).
            if old is None or old.get("uid") != uid_of(pod):
                self.entries.pop(name_of(pod), None)
            elif not self._expected_gone(old):
                self._deleted_from_outside(rtype)
                self._store(pod, {**old, "failureCounted": True})
            return self.total - total_before
        e = self._entry(pod)
        counted, seen, failing = _new_failures(as_dict(e.get("containers")), set(as_list(e.get("failing"))), pod)
        self._store(pod, {**e, "containers": seen, "failing": sorted(failing)})
        self._add(rtype, counted)
        return self.total - total_before

    def restart_pending(self, pod: Obj) -> bool:
        """A failure of ``pod`` was counted and its in-place restart (granted) has not happened yet."""
        e = self.entries.get(name_of(pod))
        return e is not None and e.get("uid") == uid_of(pod) and bool(as_list(e.get("failing")))

    def count_failure(self, pod: Obj, rtype: str) -> bool:
        """Count a Failed pod the operator will delete and recreate, once per pod
        uid (not again if its last failure was already counted as it happened)."""
        e = self._entry(pod)
        if e.get("failureCounted"):
            return False
        new = not as_list(e.get("failing"))
        self._store(pod, {**e, "failureCounted": True})
        if new:
            self._add(rtype, 1)
        return new

    def deleted_by_job(self, pod: Obj) -> None:
        """The job controller deletes ``pod`` on purpose (scale-down): its end is no restart."""
        e = self._entry(pod)
        if name_of(pod) in self.entries and not self._expected_gone(e):
            self._store(pod, {**e, "deletedByJob": True})

    def preempted(self, pod: Obj, rtype: str, message: str) -> None:
        """The scheduler evicted ``pod`` (``message``: its eviction mark): its end, whatever
        its exit, is no restart. Call before ``observe``; a previous pod of the same
        name that vanished unseen still counts."""
        old = self.entries.get(name_of(pod))
        if old is not None and old.get("uid") != uid_of(pod) and not self._expected_gone(old):
            self._deleted_from_outside(rtype)
        e = self._entry(pod)
        if e.get("preempted") != message:
            self._store(pod, {**e, "preempted": message})

    def preempted_unseen(self, pod_name: str, uid: str, message: str) -> None:
        """A pod seen deleted with the scheduler's eviction mark (the shell remembers
        the last state of deleted pods): if the book knows it under ``uid``, its end is no restart."""
        e = self.entries.get(pod_name)
        if e is not None and e.get("uid") == uid and not self._expected_gone(e):
            self.entries[pod_name] = {**e, "preempted": message}

    def vanished(self, live_pods: set[str], rtype_of: Callable[[str], str | None]) -> list[str]:
        """Forget the pods that no longer exist; a pod that vanished without its
        end being accounted for was deleted from outside: one restart of its
        replica type (``rtype_of(pod name)``, None when unknown). Returns their names."""
        gone = []
        for k in list(self.entries):
            if k in live_pods:
                continue
            e = self.entries.pop(k)
            rtype = rtype_of(k)
            if "preempted" in e:
                self.preempted_gone.append((k, as_str(e.get("preempted"))))
            elif rtype is not None and not self._expected_gone(e):
                self._deleted_from_outside(rtype)
                gone.append(k)
        return gone

    def forget_all(self) -> None:
        """The job deleted all its pods on purpose (suspend): none of them is a restart."""
        self.entries.clear()

    def write(self, status: Obj) -> None:
        if self.total:
            status["restartCount"] = self.total
        else:
            status.pop("restartCount", None)
        if self.entries:
            status["podRestarts"] = {k: self.entries[k] for k in sorted(self.entries)}
        else:
            status.pop("podRestarts", None)
        rs = status.get("replicaStatuses")
        if not isinstance(rs, dict):
            rs = status["replicaStatuses"] = {}
        for rtype, n in self.per_type.items():
            entry = rs.get(rtype)
            if not isinstance(entry, dict):
                entry = rs[rtype] = {}
            entry["restarts"] = n


def _exited(cs: Obj) -> bool:
    """The container's current instance exited: terminated, or waiting in CrashLoopBackOff after that exit."""
    state = as_dict(cs.get("state"))
    return bool(as_dict(state.get("terminated"))) or as_dict(state.get("waiting")).get("reason") == "CrashLoopBackOff"


def _exited_to_restart(cs: Obj, clean_too: bool) -> bool:
    """The container exited and the node agent is to start it again: in
    CrashLoopBackOff, or terminated non-zero (with 0 too when ``clean_too``: Always)."""
    state = as_dict(cs.get("state"))
    term = as_dict(state.get("terminated"))
    if term:
        return as_int(term.get("exitCode")) != 0 or clean_too
    return as_dict(state.get("waiting")).get("reason") == "CrashLoopBackOff"


def awaits_restart(pod: Obj) -> bool:
    """Nothing of ``pod`` runs: it only waits for the node agent to restart a
    container that exited — a failed init container, or every regular container
    exited and one of them is to start again. Its phase still reads Running
    (Pending for an init container); a pod that is not restarted ends at once,
    Failed (Succeeded when every exit was clean)."""
    policy = as_str(spec(pod).get("restartPolicy")) or "Always"
    if policy == "Never" or pod_phase(pod) in ("Succeeded", "Failed") or is_deleting(pod):
        return False
    inits, regular = container_statuses(pod, init=True), container_statuses(pod)
    if any("running" in as_dict(cs.get("state")) for cs in inits + regular):
        return False
    if any(_exited_to_restart(cs, clean_too=False) for cs in inits):
        return True
    return bool(regular) and all(_exited(cs) for cs in regular) \
        and any(_exited_to_restart(cs, clean_too=policy == "Always") for cs in regular)
