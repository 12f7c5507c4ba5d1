"""Plugin predicates: may this task run on that node at all?

Volcano plugins/predicates, in its order, first failing check wins:
pod-count cap ("node(s) pod number exceeded"), NodeUnschedulable, NodeAffinity
(nodeSelector + required node affinity), TaintToleration (NoSchedule and
NoExecute taints). Resource fit is checked by the action itself. Ports,
volumes, pod (anti-)affinity and topology spread are not implemented: Phalanx
pods do not use them on a scheduling path.
"""
from __future__ import annotations

from typing import Any, Mapping

from phalanx.scheduler.fit_errors import (
    NODE_AFFINITY_MISMATCH,
    NODE_POD_NUMBER_EXCEEDED,
    NODE_UNSCHEDULABLE,
    untolerated_taint,
)
from phalanx.scheduler.info import NodeInfo, TaskInfo
from phalanx.scheduler.session import Plugin, Session

TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"


class PredicatesPlugin(Plugin):
    name = "predicates"

    def on_session_open(self, ssn: Session) -> None:
        def predicate(task: TaskInfo, node: NodeInfo) -> str | None:
            if node.ntasks >= node.max_pods:
                return NODE_POD_NUMBER_EXCEEDED
            spec = task.pod.get("spec") or {}
            tolerations = [t for t in spec.get("tolerations") or [] if isinstance(t, dict)]
            if node.unschedulable and not tolerates(tolerations, TAINT_NODE_UNSCHEDULABLE, "", "NoSchedule"):
                return NODE_UNSCHEDULABLE
            if not node_affinity_matches(spec, node):
                return NODE_AFFINITY_MISMATCH
            for key, value, effect in node.taints:
                if effect in ("NoSchedule", "NoExecute") and not tolerates(tolerations, key, value, effect):
                    return untolerated_taint(key, value)
            return None

        ssn.add_predicate_fn(predicate)


def tolerates(tolerations: list[dict], key: str, value: str, effect: str) -> bool:
    """core/v1 Toleration.ToleratesTaint."""
    for t in tolerations:
        te = t.get("effect") or ""
        if te and te != effect:
            continue
        tk = t.get("key") or ""
        op = t.get("operator") or "Equal"
        if tk and tk != key:
            continue
        if op == "Exists":
            return True
        if op == "Equal" and tk == key and (t.get("value") or "") == value:
            return True
    return False


def node_affinity_matches(spec: Mapping[str, Any], node: NodeInfo) -> bool:
    sel = spec.get("nodeSelector") or {}
    if isinstance(sel, dict):
        for k, v in sel.items():
            if node.labels.get(str(k)) != str(v):
                return False
    aff = (spec.get("affinity") or {}).get("nodeAffinity") or {}
    req = aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req:
        terms = [t for t in (req.get("nodeSelectorTerms") or []) if isinstance(t, dict)]
        return any(match_node_selector_term(t, node) for t in terms)
    return True


def match_node_selector_term(term: Mapping[str, Any], node: NodeInfo) -> bool:
    """A term matches when all its requirements do; an empty term matches nothing."""
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False
    for e in exprs:
        if not _match_requirement(e, node.labels):
            return False
    for f in fields:
        if not _match_requirement(f, {"metadata.name": node.name}):
            return False
    return True


def _match_requirement(req: Any, labels: Mapping[str, str]) -> bool:
    if not isinstance(req, dict):
        return False
    key = str(req.get("key", ""))
    op = req.get("operator")
    values = [str(v) for v in (req.get("values") or [])]
    has = key in labels
    val = labels.get(key)
    if op == "In":
        return has and val in values
    if op == "NotIn":
        return not has or val not in values
    if op == "Exists":
        return has
    if op == "DoesNotExist":
        return not has
    if op in ("Gt", "Lt"):
        if not has or len(values) != 1:
            return False
        try:
            lv, rv = int(val), int(values[0])  # type: ignore[arg-type]
        except ValueError:
            return False
        return lv > rv if op == "Gt" else lv < rv
    return False
