"""Restarts counted by the job (SEMANTICS S2/S3/S6), kept in its status.

The original reads ``restartCount`` back from pods that are Running, so
restarts of a recreated pod are lost and ExitCode retries are unlimited. Here
every failure that leads to a restart is counted once, in the job's status:

- ``status.restartCount``: the total, compared with ``backoffLimit``;
- ``status.replicaStatuses[<type>].restarts``: the same, per replica type;
- ``status.podRestarts``: ``{<pod>: {uid, containers: {<name>: n}, failureCounted}}``,
  the last ``restartCount`` seen per container of the pod with that uid, so an
  in-place restart is counted once, and whether the pod's own failure (a Failed
  pod deleted and recreated) was counted.

A restart after a clean exit (``Always``) is not a failure and is not counted.
"""
from __future__ import annotations

import copy

from .fields import as_dict, as_int, as_str, container_statuses, name, pod_phase, spec, uid


def is_retryable_exit_code(code: int | None) -> bool:
    """S6: 130, 137, 138, 143 and any other 129-255 retryable; 1, 2, 126-128,
    139 and 3-125 permanent; a container that never terminated is retryable."""
    if code is None:
        return True
    return code >= 129 and code != 139


def exit_code(pod: dict, container: str) -> int | None:
    """Exit code of ``container`` if it is terminated, else None (the original's 0xbeef)."""
    for cs in container_statuses(pod):
        if cs.get("name") == container:
            term = as_dict(as_dict(cs.get("state")).get("terminated"))
            if term:
                return as_int(term.get("exitCode"))
    return None


def restart_counts(pod: dict) -> dict[str, int]:
    """``restartCount`` per container name, init containers included."""
    out: dict[str, int] = {}
    for cs in container_statuses(pod, init=True) + container_statuses(pod):
        n = as_int(cs.get("restartCount"), 0) or 0
        cname = as_str(cs.get("name"))
        if cname and n > 0:
            out[cname] = n
    return out


def _last_exit_clean(cs: dict) -> bool:
    term = as_dict(as_dict(cs.get("lastState")).get("terminated"))
    return bool(term) and as_int(term.get("exitCode")) == 0


def _new_failures(seen: dict, pod: dict) -> tuple[int, dict[str, int]]:
    """(failure restarts since ``seen``, the new per-container ``restartCount``s)."""
    seen = dict(seen)
    counted = 0
    for cs in container_statuses(pod, init=True) + container_statuses(pod):
        cname = as_str(cs.get("name"))
        n = as_int(cs.get("restartCount"), 0) or 0
        before = as_int(seen.get(cname), 0) or 0
        if not cname or n <= before:
            continue
        delta = n - before
        if _last_exit_clean(cs):
            delta -= 1  # the latest restart followed a clean exit (Always)
        counted += max(0, delta)
        seen[cname] = n
    return counted, dict(sorted(seen.items()))


class RestartBook:
    """The restart counters of one job, read from and written back to its status."""

    def __init__(self, status: dict) -> None:
        status = as_dict(status)
        self.total = max(0, as_int(status.get("restartCount"), 0) or 0)
        self.per_type: dict[str, int] = {}
        for rtype, rs in as_dict(status.get("replicaStatuses")).items():
            n = as_int(as_dict(rs).get("restarts"), 0) or 0
            if n > 0:
                self.per_type[rtype] = n
        self.entries: dict[str, dict] = {
            k: copy.deepcopy(v) for k, v in as_dict(status.get("podRestarts")).items() if isinstance(v, dict)
        }

    def _entry(self, pod: dict) -> dict:
        e = self.entries.get(name(pod))
        if e is None or e.get("uid") != uid(pod):
            e = {"uid": uid(pod), "containers": {}}
        return e

    def _store(self, pod: dict, e: dict) -> None:
        if as_dict(e.get("containers")) or e.get("failureCounted"):
            self.entries[name(pod)] = e
        else:
            self.entries.pop(name(pod), None)

    def _add(self, rtype: str, n: int) -> None:
        if n > 0:
            self.total += n
            self.per_type[rtype] = self.per_type.get(rtype, 0) + n

    def observe(self, pod: dict, rtype: str) -> int:
        """Count the in-place restarts of ``pod`` not seen before; returns how many."""
        e = self._entry(pod)
        counted, seen = _new_failures(as_dict(e.get("containers")), pod)
        self._store(pod, {**e, "containers": seen})
        self._add(rtype, counted)
        return counted

    def count_failure(self, pod: dict, rtype: str) -> bool:
        """Count a Failed pod the operator will delete and recreate, once per pod uid."""
        e = self._entry(pod)
        if e.get("failureCounted"):
            return False
        e = {**e, "failureCounted": True}
        self._store(pod, e)
        self._add(rtype, 1)
        return True

    def failed_since(self, pod: dict) -> bool:
        """Whether ``pod`` restarted since the book was last written, the latest
        time after a failure (the book of a finished job no longer moves, so
        only the latest exit can be judged)."""
        seen = as_dict(self._entry(pod).get("containers"))
        for cs in container_statuses(pod, init=True) + container_statuses(pod):
            n = as_int(cs.get("restartCount"), 0) or 0
            if n > (as_int(seen.get(as_str(cs.get("name"))), 0) or 0) and not _last_exit_clean(cs):
                return True
        return False

    def prune(self, live_pods: set[str]) -> None:
        for k in list(self.entries):
            if k not in live_pods:
                del self.entries[k]

    def write(self, status: dict) -> None:
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


def would_restart(pod: dict, book: RestartBook) -> bool:
    """S5: a kept pod of a finished job that failed and is being (or was) restarted
    in place. A restart after a clean exit (Always) cannot be told apart here
    from a pod that keeps running; stopping those needs the node agent."""
    policy = as_str(spec(pod).get("restartPolicy")) or "Always"
    if policy == "Never" or pod_phase(pod) in ("Succeeded", "Failed"):
        return False
    for cs in container_statuses(pod):
        state = as_dict(cs.get("state"))
        term = as_dict(state.get("terminated"))
        if term and as_int(term.get("exitCode")) != 0:
            return True
        if as_dict(state.get("waiting")).get("reason") == "CrashLoopBackOff" and not _last_exit_clean(cs):
            return True
    return book.failed_since(pod)
