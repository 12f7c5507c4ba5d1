"""The RBAC authorizer's pure core: Roles, ClusterRoles and their bindings compiled into an index, and decisions.

Semantics as Kubernetes' RBAC authorizer (plugin/pkg/auth/authorizer/rbac): ClusterRoleBindings apply
everywhere, RoleBindings in their namespace (to a Role there or a ClusterRole); a rule allows when verb,
API group, resource (``*``, ``pods/status``, ``*/status``) and resourceNames match, or verb and a
non-resource URL (``/apis/*`` matches by prefix); subjects are Users, Groups and ServiceAccounts
(``system:serviceaccount:<ns>:<name>``). A denial carries the reason the kube-apiserver gives (the
missing roles a binding refers to). ``system:masters`` bypasses it all, as there.

The default bootstrap policy is built in, not stored: ``cluster-admin`` (bound to ``system:masters``),
``system:discovery``, ``system:basic-user`` and ``system:public-info-viewer`` (bound to
``system:authenticated``; unlike the kube-apiserver, nothing is granted to ``system:unauthenticated``:
Phalanx's API answers no one without a credential). A stored role or binding of the same name replaces
the built-in one. ``aggregationRule`` is ignored: a ClusterRole grants its own ``rules`` only.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from phalanx.server.requestinfo import RequestInfo

MASTERS = "system:masters"
AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
SERVICE_ACCOUNTS = "system:serviceaccounts"
SA_PREFIX = "system:serviceaccount:"
RBAC_GROUP = "rbac.authorization.k8s.io"


@dataclass(frozen=True)
class UserInfo:
    """Who a request comes from (user.Info)."""

    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


ANONYMOUS = UserInfo("system:anonymous", (UNAUTHENTICATED,))


def service_account_username(namespace: str, name: str) -> str:
    return f"{SA_PREFIX}{namespace}:{name}"


def service_account_user(namespace: str, name: str, uid: str = "",
                         extra: Mapping[str, tuple[str, ...]] | None = None) -> UserInfo:
    return UserInfo(service_account_username(namespace, name),
                    (SERVICE_ACCOUNTS, f"{SERVICE_ACCOUNTS}:{namespace}", AUTHENTICATED), uid, dict(extra or {}))


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""


def _strings(value: Any) -> frozenset[str]:
    if not isinstance(value, list):
        return frozenset()
    return frozenset(v for v in value if isinstance(v, str))


@dataclass(frozen=True)
class Rule:
    """A PolicyRule, compiled. Shapes that are not lists of strings grant nothing."""

    verbs: frozenset[str]
    api_groups: frozenset[str] = frozenset()
    resources: frozenset[str] = frozenset()
    resource_names: frozenset[str] = frozenset()
    non_resource_urls: frozenset[str] = frozenset()

    @classmethod
    def of(cls, raw: Any) -> Rule | None:
        if not isinstance(raw, dict):
            return None
        return cls(_strings(raw.get("verbs")), _strings(raw.get("apiGroups")), _strings(raw.get("resources")),
                   _strings(raw.get("resourceNames")), _strings(raw.get("nonResourceURLs")))

    def allows(self, req: RequestInfo) -> bool:
        if req.verb not in self.verbs and "*" not in self.verbs:
            return False
        if not req.resource_request:
            return self._url_matches(req.path)
        if req.api_group not in self.api_groups and "*" not in self.api_groups:
            return False
        if not self._resource_matches(req.resource, req.subresource):
            return False
        return not self.resource_names or req.name in self.resource_names

    def _resource_matches(self, resource: str, subresource: str) -> bool:
        combined = f"{resource}/{subresource}" if subresource else resource
        if "*" in self.resources or combined in self.resources:
            return True
        return bool(subresource) and f"*/{subresource}" in self.resources

    def _url_matches(self, path: str) -> bool:
        for url in self.non_resource_urls:
            if url == "*" or url == path or (url.endswith("*") and path.startswith(url.rstrip("*"))):
                return True
        return False


def _rules(obj: Mapping[str, Any]) -> tuple[Rule, ...]:
    raw = obj.get("rules")
    compiled = (Rule.of(r) for r in raw) if isinstance(raw, list) else ()
    return tuple(r for r in compiled if r is not None)


# ---------------------------------------------------------------- the built-in bootstrap policy

_DISCOVERY_URLS = ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*",
                   "/readyz", "/version", "/version/"]
_PUBLIC_URLS = ["/healthz", "/livez", "/readyz", "/version", "/version/"]


def _cluster_role(name: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole", "metadata": {"name": name}, "rules": rules}


def _group_binding(name: str, role: str, group: str) -> dict[str, Any]:
    return {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRoleBinding", "metadata": {"name": name},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
            "subjects": [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": group}]}


BOOTSTRAP_CLUSTER_ROLES: tuple[dict[str, Any], ...] = (
    _cluster_role("cluster-admin", [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
                                    {"nonResourceURLs": ["*"], "verbs": ["*"]}]),
    _cluster_role("system:discovery", [{"nonResourceURLs": _DISCOVERY_URLS, "verbs": ["get"]}]),
    _cluster_role("system:public-info-viewer", [{"nonResourceURLs": _PUBLIC_URLS, "verbs": ["get"]}]),
    _cluster_role("system:basic-user", [
        {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
         "verbs": ["create"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}]),
)
BOOTSTRAP_CLUSTER_ROLE_BINDINGS: tuple[dict[str, Any], ...] = (
    _group_binding("cluster-admin", "cluster-admin", MASTERS),
    _group_binding("system:discovery", "system:discovery", AUTHENTICATED),
    _group_binding("system:public-info-viewer", "system:public-info-viewer", AUTHENTICATED),
    _group_binding("system:basic-user", "system:basic-user", AUTHENTICATED),
)


def _with_bootstrap(stored: Iterable[Mapping[str, Any]], builtin: tuple[dict[str, Any], ...]) -> list[Mapping[str, Any]]:
    objs = list(stored)
    names = {_meta(o).get("name") for o in objs}
    return [b for b in builtin if b["metadata"]["name"] not in names] + objs


# ---------------------------------------------------------------- the index

def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _describe_subject(subject: Mapping[str, Any], binding_namespace: str) -> str:
    kind, name = subject.get("kind"), subject.get("name")
    if kind == "ServiceAccount":
        return f'{kind} "{name}/{subject.get("namespace") or binding_namespace}"'
    return f'{kind} "{name}"'


def _subject_key(subject: Any, binding_namespace: str) -> tuple[str, str] | None:
    """("User"|"Group", name) the subject matches, or None for a subject nothing can match."""
    if not isinstance(subject, dict) or not isinstance(subject.get("name"), str):
        return None
    kind, name = subject.get("kind"), subject["name"]
    if kind in ("User", "Group"):
        return (kind, name)
    if kind == "ServiceAccount":
        ns = subject.get("namespace") or binding_namespace
        return ("User", service_account_username(ns, name)) if isinstance(ns, str) and ns else None
    return None


@dataclass(frozen=True)
class _Grant:
    order: int  # the binding's place in evaluation order
    subject: int  # the first of its subjects that matched
    source: str  # 'ClusterRoleBinding "b" of ClusterRole "r" to Group "g"'
    rules: tuple[Rule, ...]
    error: str  # the role it refers to is missing


class Policy:
    """Every binding, indexed by the subjects it names; ``authorize`` answers from the index."""

    def __init__(self, cluster_roles: Iterable[Mapping[str, Any]] = (),
                 cluster_role_bindings: Iterable[Mapping[str, Any]] = (),
                 roles: Iterable[Mapping[str, Any]] = (), role_bindings: Iterable[Mapping[str, Any]] = (),
                 *, bootstrap: bool = True) -> None:
        if bootstrap:
            cluster_roles = _with_bootstrap(cluster_roles, BOOTSTRAP_CLUSTER_ROLES)
            cluster_role_bindings = _with_bootstrap(cluster_role_bindings, BOOTSTRAP_CLUSTER_ROLE_BINDINGS)
        self._cluster_roles = {str(_meta(r).get("name")): _rules(r) for r in cluster_roles}
        self._roles = {(str(_meta(r).get("namespace")), str(_meta(r).get("name"))): _rules(r) for r in roles}
        # (namespace or "" for cluster bindings, subject kind, subject name) -> grants
        self._index: dict[tuple[str, str, str], list[_Grant]] = {}
        order = 0
        for binding in sorted(cluster_role_bindings, key=lambda b: str(_meta(b).get("name"))):
            self._add(binding, "", order)
            order += 1
        for binding in sorted(role_bindings, key=lambda b: (str(_meta(b).get("namespace")),
                                                           str(_meta(b).get("name")))):
            ns = _meta(binding).get("namespace")
            if isinstance(ns, str) and ns:
                self._add(binding, ns, order)
                order += 1

    def _role_rules(self, ref: Any, namespace: str) -> tuple[tuple[Rule, ...], str]:
        ref = ref if isinstance(ref, dict) else {}
        kind, name = ref.get("kind"), ref.get("name")
        if kind == "ClusterRole":
            rules = self._cluster_roles.get(str(name))
            return (rules, "") if rules is not None else ((), f'clusterrole.{RBAC_GROUP} "{name}" not found')
        if kind == "Role":
            rules = self._roles.get((namespace, str(name)))
            return (rules, "") if rules is not None else ((), f'role.{RBAC_GROUP} "{name}" not found')
        return (), f'unsupported role reference kind: "{kind}"'

    def _add(self, binding: Mapping[str, Any], namespace: str, order: int) -> None:
        name = _meta(binding).get("name")
        ref = binding.get("roleRef")
        rules, error = self._role_rules(ref, namespace)
        ref_desc = f'{ref.get("kind")} "{ref.get("name")}"' if isinstance(ref, dict) else '<nil> ""'
        what = f'ClusterRoleBinding "{name}"' if not namespace else f'RoleBinding "{name}/{namespace}"'
        subjects = binding.get("subjects")
        for i, subject in enumerate(subjects if isinstance(subjects, list) else []):
            key = _subject_key(subject, namespace)
            if key is None:
                continue
            source = f"{what} of {ref_desc} to {_describe_subject(subject, namespace)}"
            self._index.setdefault((namespace, *key), []).append(_Grant(order, i, source, rules, error))

    def grants(self, user: UserInfo, namespace: str) -> list[_Grant]:
        """The bindings that apply to ``user`` for a request in ``namespace``, in evaluation order."""
        found: dict[int, _Grant] = {}
        scopes = ("", namespace) if namespace else ("",)
        for scope in scopes:
            for key in (("User", user.name), *(("Group", g) for g in user.groups)):
                for grant in self._index.get((scope, *key), ()):
                    seen = found.get(grant.order)
                    if seen is None or grant.subject < seen.subject:
                        found[grant.order] = grant
        return [found[k] for k in sorted(found)]

    def authorize(self, user: UserInfo, req: RequestInfo) -> Decision:
        if MASTERS in user.groups:
            return Decision(True)
        errors: list[str] = []
        for grant in self.grants(user, req.namespace if req.resource_request else ""):
            if grant.error:
                errors.append(grant.error)
                continue
            if any(rule.allows(req) for rule in grant.rules):
                return Decision(True, f"RBAC: allowed by {grant.source}")
        return Decision(False, f"RBAC: {_aggregate(errors)}" if errors else "")


def _aggregate(errors: list[str]) -> str:
    """utilerrors.NewAggregate's text: one error as is, several deduplicated in brackets."""
    unique = list(dict.fromkeys(errors))
    return unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"


# ---------------------------------------------------------------- the denial, in the apiserver's words

def forbidden_message(user: UserInfo, req: RequestInfo, reason: str = "") -> str:
    """``<resource> ["<name>"] is forbidden: User "<u>" cannot <verb> ...`` (responsewriters.Forbidden)."""
    if not req.resource_request:
        msg = f'forbidden: User "{user.name}" cannot {req.verb} path "{req.path}"'
    else:
        resource = f"{req.resource}/{req.subresource}" if req.subresource else req.resource
        scope = f'in the namespace "{req.namespace}"' if req.namespace else "at the cluster scope"
        what = f"{req.resource}.{req.api_group}" if req.api_group else req.resource
        if req.name:
            what += f' "{req.name}"'
        msg = (f'{what} is forbidden: User "{user.name}" cannot {req.verb} resource "{resource}" '
               f'in API group "{req.api_group}" {scope}')
    return f"{msg}: {reason}" if reason else msg


def forbidden_status(user: UserInfo, req: RequestInfo, reason: str = "") -> dict[str, Any]:
    """The 403 Status body (apierrors.NewForbidden of the request's group-resource and name)."""
    details: dict[str, Any] = {}
    if req.resource_request and req.resource:
        if req.name:
            details["name"] = req.name
        if req.api_group:
            details["group"] = req.api_group
        details["kind"] = req.resource
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": forbidden_message(user, req, reason), "reason": "Forbidden", "details": details,
            "code": 403}
