"""Finding the node for a task without looking at every node.

Nodes whose state is identical for every predicate and score — same
allocatable, same used/releasing/pipelined amounts, same non-zero requests,
same labels/taints/unschedulable flag, same "pod slots full" — form a *class*.
A class is checked and scored once per task; its members differ only by
name, and the tie-break is the smallest name (deterministic, where Volcano
picks at random), so the class offers its first member.

What is computed, exactly (Volcano allocate.go + util/predicate_helper.go):
1. Classes are visited fullest first (cpu + memory utilisation, descending).
2. A class is feasible when the task's InitResreq fits the node's FutureIdle
   (Idle + Releasing - Pipelined) and every predicate passes.
3. The visit stops once the feasible classes hold ``numNodesToFind`` nodes
   (Volcano's sampling rule: all nodes up to 100, then 5-50 % of them). With
   at most 100 nodes this is the exact best over all nodes; beyond, Volcano
   scores a round-robin window of the node list and Phalanx the fullest
   feasible nodes instead.
4. Nodes whose Idle fits (gradient 1) are preferred to nodes that fit only
   once releasing resources are freed (gradient 2); within a gradient the
   highest sum of plugin scores wins, then the smallest node name.
5. When nothing fits, every class contributes its first failing reason, times
   its size, to the task's FitErrors ("0/N nodes are unavailable: ...").

Cost per task is O(classes visited), not O(nodes): a cluster of identical
nodes filled by identical pods has a handful of classes whatever its size.
"""
from __future__ import annotations

import bisect
from typing import Any, Callable, Iterable

from phalanx.scheduler import resources as R
from phalanx.scheduler.fit_errors import FitErrors, insufficient
from phalanx.scheduler.info import ClassKey, JobInfo, NodeInfo, TaskInfo, fullness

EPS = R.EPS

Predicate = Callable[[TaskInfo, NodeInfo], str | None]
Score = Callable[[TaskInfo, NodeInfo], float]


class NodeIndex:
    """The session's nodes filed by class. ``predicate`` and ``score`` are the
    session's combined plugin verdicts; ``label_keys`` the node labels any
    task's constraints mention; ``num_to_find`` Volcano's sampling bound."""

    def __init__(self, nodes: list[NodeInfo], dims: R.Dims, num_to_find: int, label_keys: Iterable[str],
                 predicate: Predicate, score: Score) -> None:
        self.nodes = nodes
        self.dims = dims
        self.predicate = predicate
        self.score = score
        self.members: dict[ClassKey, list[int]] = {}
        self.order: list[tuple[float, ClassKey]] = []  # sorted (-fullness, class key)
        self._sort_key: dict[ClassKey, tuple[float, ClassKey]] = {}
        self._sigs: dict[tuple[Any, ...], int] = {}
        self._alloc_keys: dict[int, tuple[Any, ...]] = {}
        self._pred_cache: dict[tuple[int, int, bool], str | None] = {}
        self._score_cache: dict[tuple[int, ClassKey], float] = {}
        self.num_to_find = num_to_find
        keys = sorted(label_keys)
        for n in self.nodes:
            # Only the labels some pod's constraints mention tell nodes apart
            # (every node has its own kubernetes.io/hostname).
            sig = (n.unschedulable, tuple((k, n.labels.get(k)) for k in keys), n.taints)
            n.sig_id = self._sigs.setdefault(sig, len(self._sigs))
            self._alloc_keys[n.idx] = (n.sig_id, n.max_pods, *n.allocatable)
            key = self._key(n)
            n.class_key = key
            self._add(n.idx, key, n)

    # ---- class bookkeeping ----
    def _key(self, n: NodeInfo) -> ClassKey:
        return (self._alloc_keys[n.idx], n.ntasks >= n.max_pods, n.nz_cpu, n.nz_mem,
                *n.used, *n.releasing, *n.pipelined)

    def _add(self, idx: int, key: ClassKey, n: NodeInfo) -> None:
        lst = self.members.get(key)
        if lst is None:
            self.members[key] = [idx]
            sk = (-fullness(n), key)
            self._sort_key[key] = sk
            bisect.insort(self.order, sk)
        else:
            bisect.insort(lst, idx)

    def _remove(self, idx: int, key: ClassKey) -> None:
        lst = self.members[key]
        if len(lst) == 1:
            del self.members[key]
            sk = self._sort_key.pop(key)
            i = bisect.bisect_left(self.order, sk)
            del self.order[i]
        else:
            i = bisect.bisect_left(lst, idx)
            del lst[i]

    def update(self, n: NodeInfo) -> None:
        """Re-file a node after its accounting changed."""
        key = self._key(n)
        old = n.class_key
        if key == old:
            return
        self._remove(n.idx, old)  # type: ignore[arg-type]
        n.class_key = key
        self._add(n.idx, key, n)

    @property
    def class_count(self) -> int:
        return len(self.members)

    # ---- search ----
    def _predicate(self, task: TaskInfo, rep: NodeInfo) -> str | None:
        ck = (task.spec_key, rep.sig_id, rep.ntasks >= rep.max_pods)
        try:
            return self._pred_cache[ck]
        except KeyError:
            r = self._pred_cache[ck] = self.predicate(task, rep)
            return r

    def _score(self, task: TaskInfo, rep: NodeInfo, key: ClassKey) -> float:
        ck = (task.spec_key, key)
        try:
            return self._score_cache[ck]
        except KeyError:
            s = self._score_cache[ck] = self.score(task, rep)
            return s

    def find(self, task: TaskInfo) -> tuple[NodeInfo, bool] | FitErrors:
        """The best node for the task and whether it fits Idle now (False:
        only once releasing resources are freed), or why nothing fits."""
        need = task.init_resreq
        nodes = self.nodes
        n_dims = len(need)
        best: tuple[float, int] | None = None          # gradient 1: fits Idle
        best_future: tuple[float, int] | None = None   # gradient 2: fits FutureIdle only
        found = 0
        for sk in self.order:
            key = sk[1]
            members = self.members[key]
            rep = nodes[members[0]]
            idle = rep.idle
            fits_idle = True
            ok = True
            for i in range(n_dims):
                x = need[i]
                if x - idle[i] >= EPS:
                    fits_idle = False
                    if x - (idle[i] + rep.releasing[i] - rep.pipelined[i]) >= EPS:
                        ok = False
                        break
            if not ok:
                continue
            if task.per_node:
                passing = [m for m in members if not self.predicate(task, nodes[m])]
                if not passing:
                    continue
                first, count = passing[0], len(passing)
            else:
                if self._predicate(task, rep) is not None:
                    continue
                first, count = members[0], len(members)
            score = self._score(task, rep, key)
            if fits_idle:
                if best is None or score > best[0] or (score == best[0] and first < best[1]):
                    best = (score, first)
            elif best_future is None or score > best_future[0] or (score == best_future[0] and first < best_future[1]):
                best_future = (score, first)
            found += count
            if found >= self.num_to_find:
                break
        if best is not None:
            return nodes[best[1]], True
        if best_future is not None:
            return nodes[best_future[1]], False
        return self.fit_errors(task)

    def fit_errors(self, task: TaskInfo) -> FitErrors:
        fe = FitErrors()
        need = task.init_resreq
        names = self.dims.names
        for key, members in self.members.items():
            rep = self.nodes[members[0]]
            fut = rep.future_idle()
            short = [i for i in range(len(need)) if need[i] - fut[i] >= EPS]
            if short:
                fe.add(insufficient(names[short[0]]), len(members))
                continue
            if task.per_node:
                for m in members:
                    fe.add(self.predicate(task, self.nodes[m]) or "node(s) resource fit failed")
                continue
            reason = self._predicate(task, rep)
            fe.add(reason or "node(s) resource fit failed", len(members))
        return fe


def referenced_label_keys(jobs: Iterable[JobInfo]) -> set[str]:
    """Node label keys named by the nodeSelector or node affinity of any task."""
    keys: set[str] = set()
    seen: set[int] = set()
    for job in jobs:
        for t in job.tasks.values():
            if t.spec_key in seen:
                continue
            seen.add(t.spec_key)
            spec = t.pod.get("spec") or {}
            sel = spec.get("nodeSelector")
            if isinstance(sel, dict):
                keys.update(str(k) for k in sel)
            aff = (spec.get("affinity") or {}).get("nodeAffinity") or {}
            if not isinstance(aff, dict):
                continue
            terms = list(((aff.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")) or [])
            terms += [(p or {}).get("preference") or {}
                      for p in aff.get("preferredDuringSchedulingIgnoredDuringExecution") or [] if isinstance(p, dict)]
            for term in terms:
                if isinstance(term, dict):
                    for e in term.get("matchExpressions") or []:
                        if isinstance(e, dict):
                            keys.add(str(e.get("key", "")))
    return keys
