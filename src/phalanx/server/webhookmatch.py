"""Which admission webhooks a request is sent to: rules, scope and selectors, as the apiserver matches them.

Pure: the request's attributes and the namespace's labels in, a yes or no out
(k8s.io/apiserver pkg/admission/plugin/webhook: rules.Matcher, namespace and object matchers).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from phalanx.api.registry import ResourceType
from phalanx.api.webhookconfig import Rule, Webhook

Obj = dict[str, Any]

# Never sent to webhooks, so a bad webhook can always be removed (IsExemptAdmissionConfigurationResource).
EXEMPT_GROUP = "admissionregistration.k8s.io"


@dataclass(frozen=True)
class Attributes:
    """One request as admission sees it. ``namespace`` is the namespace's own
    name for a Namespace object and "" for other cluster-scoped kinds."""

    group: str
    version: str
    resource: str
    subresource: str
    operation: str
    namespace: str
    name: str
    kind: str  # of ``object``: the resource's kind, or e.g. Binding for pods/binding
    kind_group: str
    kind_version: str
    object: Obj | None = None
    old_object: Obj | None = None

    @classmethod
    def of(cls, rt: ResourceType, operation: str, namespace: str | None, name: str, *,
           subresource: str = "", object: Obj | None = None, old_object: Obj | None = None,
           kind: tuple[str, str, str] | None = None) -> "Attributes":
        """``kind`` (group, version, kind) when the object is not of ``rt``'s kind."""
        group, version, kind_name = kind or (rt.group, rt.version, rt.kind)
        ns = name if rt.kind == "Namespace" else (namespace or "" if rt.namespaced else "")
        return cls(rt.group, rt.version, rt.plural, subresource, operation, ns, name, kind_name, group, version,
                   object, old_object)


def exempt(attrs: Attributes) -> bool:
    return attrs.group == EXEMPT_GROUP


def rule_matches(rule: Rule, attrs: Attributes) -> bool:
    return (_scope(rule.scope, attrs) and _any(rule.operations, attrs.operation)
            and _any(rule.api_groups, attrs.group) and _any(rule.api_versions, attrs.version)
            and _resource(rule.resources, attrs))


def rules_match(hook: Webhook, attrs: Attributes) -> bool:
    """Some rule of ``hook`` names this request (before its selectors are asked)."""
    return not exempt(attrs) and any(rule_matches(r, attrs) for r in hook.rules)


def _any(allowed: tuple[str, ...], value: str) -> bool:
    return "*" in allowed or value in allowed


def _scope(scope: str, attrs: Attributes) -> bool:
    if scope == "Namespaced":  # a Namespace is cluster-scoped even though it has a namespace attribute
        return attrs.resource != "namespaces" and attrs.namespace != ""
    if scope == "Cluster":
        return attrs.resource == "namespaces" or attrs.namespace == ""
    return True


def _resource(resources: tuple[str, ...], attrs: Attributes) -> bool:
    """``pods`` is the main resource only, ``pods/*`` pods and every subresource of it,
    ``*`` every main resource, ``*/status`` every status, ``*/*`` everything."""
    for entry in resources:
        res, _, sub = entry.partition("/")
        if (res == "*" or res == attrs.resource) and (sub == "*" or sub == attrs.subresource):
            return True
    return False


def namespace_to_look_up(hook: Webhook, attrs: Attributes) -> str | None:
    """The namespace whose stored labels the namespace selector needs, or None
    (no selector, a cluster-scoped object, or a Namespace's own labels)."""
    if hook.namespace_selector.empty() or attrs.namespace == "":
        return None
    if attrs.resource == "namespaces" and attrs.subresource == "" and attrs.operation in ("CREATE", "UPDATE"):
        return None
    return attrs.namespace


def selectors_match(hook: Webhook, attrs: Attributes, namespace_labels: Mapping[str, str] | None) -> bool:
    """namespaceSelector and objectSelector. ``namespace_labels``: the stored
    namespace's labels when ``namespace_to_look_up`` named one."""
    if not hook.namespace_selector.empty() and attrs.namespace != "":
        if namespace_to_look_up(hook, attrs) is None:
            namespace_labels = _labels(attrs.object)
        if not hook.namespace_selector.matches(namespace_labels or {}):
            return False
    if hook.object_selector.empty():
        return True
    return any(o is not None and hook.object_selector.matches(_labels(o)) for o in (attrs.object, attrs.old_object))


def _labels(obj: Obj | None) -> dict[str, str]:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    labels = meta.get("labels") if isinstance(meta, dict) else None
    return labels if isinstance(labels, dict) else {}


__all__ = ["Attributes", "exempt", "namespace_to_look_up", "rule_matches", "rules_match", "selectors_match"]
