"""The RBAC authorizer's pure core: rule matching, bindings and subjects, the bootstrap policy, the
reasons and the kube-apiserver's denial messages."""
from __future__ import annotations

import itertools

import pytest

from phalanx.deploy.rbac import OPERATOR_RULES, SCHEDULER_RULES
from phalanx.server.rbac import (
    ANONYMOUS,
    Decision,
    Policy,
    Rule,
    UserInfo,
    forbidden_message,
    forbidden_status,
    service_account_user,
)
from phalanx.server.requestinfo import RequestInfo

ALL_VERBS = ["get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"]
OPERATOR = service_account_user("phalanx-system", "phalanx-operator")
ALICE = UserInfo("alice", ("devs", "system:authenticated"))


def req(verb: str, resource: str, ns: str = "", name: str = "", sub: str = "", group: str = "") -> RequestInfo:
    return RequestInfo(verb, "", True, group, "v1", resource, sub, ns, name)


def url(verb: str, path: str) -> RequestInfo:
    return RequestInfo(verb, path)


def cluster_role(name: str, *rules: dict) -> dict:
    return {"kind": "ClusterRole", "metadata": {"name": name}, "rules": list(rules)}


def role(ns: str, name: str, *rules: dict) -> dict:
    return {"kind": "Role", "metadata": {"namespace": ns, "name": name}, "rules": list(rules)}


def binding(name: str, role_name: str, *subjects: dict, ns: str = "", kind: str = "ClusterRole") -> dict:
    meta = {"name": name, **({"namespace": ns} if ns else {})}
    return {"kind": "RoleBinding" if ns else "ClusterRoleBinding", "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role_name},
            "subjects": list(subjects)}


def sa(name: str, ns: str | None = None) -> dict:
    return {"kind": "ServiceAccount", "name": name, **({"namespace": ns} if ns else {})}


def user(name: str) -> dict:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}


def group(name: str) -> dict:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": name}


# ---------------------------------------------------------------- rules


@pytest.mark.parametrize("verbs, verb, ok", [
    (["get"], "get", True), (["get"], "list", False), (["*"], "deletecollection", True), ([], "get", False),
    (["GET"], "get", False),
])
def test_rule_verbs(verbs, verb, ok):
    assert Rule.of({"apiGroups": [""], "resources": ["pods"], "verbs": verbs}).allows(req(verb, "pods")) is ok


@pytest.mark.parametrize("groups, group_, ok", [
    ([""], "", True), ([""], "apps", False), (["*"], "kubeflow.org", True), (["apps"], "apps", True), ([], "", False),
])
def test_rule_api_groups(groups, group_, ok):
    rule = Rule.of({"apiGroups": groups, "resources": ["*"], "verbs": ["get"]})
    assert rule.allows(req("get", "x", group=group_)) is ok


@pytest.mark.parametrize("resources, resource, sub, ok", [
    (["pods"], "pods", "", True),
    (["pods"], "pods", "status", False),  # a subresource is granted by name only
    (["pods/status"], "pods", "status", True),
    (["pods/status"], "pods", "", False),
    (["*"], "pods", "", True),
    (["*"], "pods", "binding", True),
    (["*/status"], "pods", "status", True),
    (["*/status"], "pytorchjobs", "status", True),
    (["*/status"], "pods", "", False),
    (["*/status"], "pods", "log", False),
    (["*/log"], "pods", "status", False),
    (["pods/*"], "pods", "status", False),  # no wildcard after the slash
    (["services"], "pods", "", False),
])
def test_rule_resources_and_subresources(resources, resource, sub, ok):
    rule = Rule.of({"apiGroups": [""], "resources": resources, "verbs": ["get"]})
    assert rule.allows(req("get", resource, sub=sub)) is ok


@pytest.mark.parametrize("names, verb, name, ok", [
    ([], "get", "a", True), (["a"], "get", "a", True), (["a"], "get", "b", False),
    (["a"], "list", "", False),  # a collection has no name: resourceNames never grant it
    (["a"], "create", "", False), (["a"], "watch", "a", True),  # a watch of one (fieldSelector metadata.name)
])
def test_rule_resource_names(names, verb, name, ok):
    rule = Rule.of({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": names,
                    "verbs": ["*"]})
    assert rule.allows(req(verb, "leases", "ns", name, group="coordination.k8s.io")) is ok


@pytest.mark.parametrize("urls, path, ok", [
    (["/healthz"], "/healthz", True), (["/healthz"], "/healthz/etcd", False), (["/healthz*"], "/healthz/etcd", True),
    (["/apis/*"], "/apis/kubeflow.org/v1", True), (["/apis/*"], "/apis", False), (["*"], "/anything", True),
    (["/api"], "/apis", False),
])
def test_rule_non_resource_urls(urls, path, ok):
    assert Rule.of({"nonResourceURLs": urls, "verbs": ["get"]}).allows(url("get", path)) is ok


def test_resource_rules_never_grant_paths_and_url_rules_never_grant_resources():
    resource_rule = Rule.of({"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]})
    url_rule = Rule.of({"nonResourceURLs": ["*"], "verbs": ["*"]})
    assert not resource_rule.allows(url("get", "/version"))
    assert not url_rule.allows(req("get", "pods"))


@pytest.mark.parametrize("raw", [None, "rule", {"verbs": "get"}, {"verbs": ["get"], "resources": "pods"},
                                 {"verbs": [1], "apiGroups": [""], "resources": ["pods"]}])
def test_malformed_rules_grant_nothing(raw):
    rule = Rule.of(raw)
    assert rule is None or not rule.allows(req("get", "pods"))


# ---------------------------------------------------------------- bindings and subjects

READ_PODS = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}


def test_cluster_role_binding_applies_in_every_namespace_and_at_the_cluster_scope():
    p = Policy([cluster_role("reader", READ_PODS)], [binding("b", "reader", user("alice"))])
    for ns in ("", "default", "other"):
        assert p.authorize(ALICE, req("list", "pods", ns)).allowed
    assert not p.authorize(ALICE, req("delete", "pods", "default", "p")).allowed


def test_role_binding_applies_in_its_namespace_only():
    p = Policy([], [], [role("team", "reader", READ_PODS)], [binding("b", "reader", user("alice"), ns="team",
                                                                      kind="Role")])
    assert p.authorize(ALICE, req("list", "pods", "team")).allowed
    assert not p.authorize(ALICE, req("list", "pods", "other")).allowed
    assert not p.authorize(ALICE, req("list", "pods")).allowed


def test_role_binding_to_a_cluster_role_grants_it_in_the_binding_namespace():
    p = Policy([cluster_role("reader", READ_PODS)], [], [], [binding("b", "reader", group("devs"), ns="team")])
    assert p.authorize(ALICE, req("get", "pods", "team", "p")).allowed
    assert not p.authorize(ALICE, req("get", "pods", "default", "p")).allowed


def test_a_role_binding_cannot_use_a_role_of_another_namespace():
    p = Policy([], [], [role("other", "reader", READ_PODS)],
               [binding("b", "reader", user("alice"), ns="team", kind="Role")])
    d = p.authorize(ALICE, req("get", "pods", "team", "p"))
    assert d == Decision(False, 'RBAC: role.rbac.authorization.k8s.io "reader" not found')


@pytest.mark.parametrize("subject, who, ok", [
    (user("alice"), ALICE, True),
    (user("bob"), ALICE, False),
    (group("devs"), ALICE, True),
    (group("system:authenticated"), ALICE, True),
    (group("system:serviceaccounts"), OPERATOR, True),
    (group("system:serviceaccounts:phalanx-system"), OPERATOR, True),
    (group("system:serviceaccounts:other"), OPERATOR, False),
    (sa("phalanx-operator", "phalanx-system"), OPERATOR, True),
    (sa("phalanx-operator", "other"), OPERATOR, False),
    (sa("phalanx-scheduler", "phalanx-system"), OPERATOR, False),
    (user("system:serviceaccount:phalanx-system:phalanx-operator"), OPERATOR, True),
    (sa("phalanx-operator"), OPERATOR, False),  # no namespace in a ClusterRoleBinding: matches no one
    ({"kind": "Robot", "name": "alice"}, ALICE, False),
    ({"kind": "User"}, ALICE, False),
    ("alice", ALICE, False),
])
def test_subjects_of_a_cluster_role_binding(subject, who, ok):
    p = Policy([cluster_role("reader", READ_PODS)], [binding("b", "reader", subject)])
    assert p.authorize(who, req("list", "pods", "default")).allowed is ok


def test_a_service_account_subject_without_namespace_defaults_to_the_role_binding_namespace():
    p = Policy([cluster_role("reader", READ_PODS)], [], [], [binding("b", "reader", sa("phalanx-operator"),
                                                                     ns="phalanx-system")])
    assert p.authorize(OPERATOR, req("list", "pods", "phalanx-system")).allowed
    other = service_account_user("default", "phalanx-operator")
    assert not p.authorize(other, req("list", "pods", "default")).allowed


def test_masters_bypass_everything_even_an_empty_policy():
    admin = UserInfo("admin", ("system:masters",))
    p = Policy(bootstrap=False)
    for verb in ALL_VERBS:
        assert p.authorize(admin, req(verb, "anything", "ns", group="x")).allowed
    assert p.authorize(admin, url("delete", "/whatever")).allowed


def test_anonymous_gets_nothing_from_the_bootstrap_policy():
    p = Policy()
    for path in ("/version", "/healthz", "/api", "/apis/kubeflow.org/v1", "/openapi/v3"):
        assert not p.authorize(ANONYMOUS, url("get", path)).allowed
    assert not p.authorize(ANONYMOUS, req("list", "pytorchjobs", "default", group="kubeflow.org")).allowed


@pytest.mark.parametrize("path", ["/api", "/api/v1", "/apis", "/apis/kubeflow.org", "/apis/kubeflow.org/v1",
                                  "/version", "/version/", "/healthz", "/livez", "/readyz", "/openapi/v2",
                                  "/openapi/v3", "/openapi/v3/apis/kubeflow.org/v1"])
def test_any_authenticated_user_may_discover(path):
    d = Policy().authorize(OPERATOR, url("get", path))
    assert d.allowed and d.reason.startswith('RBAC: allowed by ClusterRoleBinding "system:')


def test_discovery_is_read_only_and_other_paths_are_refused():
    p = Policy()
    assert not p.authorize(OPERATOR, url("post", "/api")).allowed
    assert not p.authorize(OPERATOR, url("get", "/metrics")).allowed
    assert not p.authorize(OPERATOR, url("get", "/")).allowed


def test_any_authenticated_user_may_review_its_own_access():
    p = Policy()
    assert p.authorize(OPERATOR, req("create", "selfsubjectaccessreviews", group="authorization.k8s.io")).allowed
    assert p.authorize(OPERATOR, req("create", "selfsubjectreviews", group="authentication.k8s.io")).allowed
    assert not p.authorize(OPERATOR, req("create", "tokenreviews", group="authentication.k8s.io")).allowed


def test_cluster_admin_can_be_bound_and_a_stored_role_replaces_a_builtin_one():
    p = Policy([], [binding("ops", "cluster-admin", user("alice"))])
    assert p.authorize(ALICE, req("deletecollection", "pods", "default")).allowed
    assert p.authorize(ALICE, url("get", "/metrics")).allowed
    narrowed = Policy([cluster_role("system:discovery", {"nonResourceURLs": ["/version"], "verbs": ["get"]})])
    assert narrowed.authorize(ALICE, url("get", "/version")).allowed
    assert not narrowed.authorize(ALICE, url("get", "/api")).allowed


# ---------------------------------------------------------------- the generated RBAC, verb by verb

OPERATOR_BINDING = binding("phalanx-operator", "phalanx-operator", sa("phalanx-operator", "phalanx-system"))
SCHEDULER = service_account_user("phalanx-system", "phalanx-scheduler")
GENERATED = Policy([cluster_role("phalanx-operator", *OPERATOR_RULES), cluster_role("phalanx-scheduler",
                                                                                    *SCHEDULER_RULES)],
                   [OPERATOR_BINDING, binding("phalanx-scheduler", "phalanx-scheduler",
                                              sa("phalanx-scheduler", "phalanx-system"))])


def _expected(rules: list[dict], verb: str, group_: str, resource: str) -> bool:
    return any(group_ in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules)


@pytest.mark.parametrize("who, rules", [(OPERATOR, OPERATOR_RULES), (SCHEDULER, SCHEDULER_RULES)])
def test_the_generated_roles_grant_exactly_their_rules(who, rules):
    """Every verb on every resource either role names (and their subresources): allowed iff a rule says so."""
    resources = {(g, r) for rs in (OPERATOR_RULES, SCHEDULER_RULES) for rule in rs for g in rule["apiGroups"]
                 for r in rule["resources"]} | {("", "nodes/status"), ("", "secrets"), ("apps", "deployments")}
    for (g, r), verb, ns in itertools.product(sorted(resources), ALL_VERBS, ("", "default")):
        resource, _, sub = r.partition("/")
        got = GENERATED.authorize(who, req(verb, resource, ns, "x" if sub else "", sub, g)).allowed
        assert got is _expected(rules, verb, g, r), (who.name, verb, g, r, ns)


# ---------------------------------------------------------------- reasons and messages


def test_allowed_reason_names_the_binding_the_role_and_the_subject():
    d = GENERATED.authorize(OPERATOR, req("list", "pods", "default"))
    assert d == Decision(True, 'RBAC: allowed by ClusterRoleBinding "phalanx-operator" of ClusterRole '
                               '"phalanx-operator" to ServiceAccount "phalanx-operator/phalanx-system"')
    p = Policy([cluster_role("reader", READ_PODS)], [], [], [binding("b", "reader", sa("phalanx-operator"),
                                                                     ns="phalanx-system")])
    assert p.authorize(OPERATOR, req("get", "pods", "phalanx-system", "x")).reason == (
        'RBAC: allowed by RoleBinding "b/phalanx-system" of ClusterRole "reader" to ServiceAccount '
        '"phalanx-operator/phalanx-system"')


def test_the_first_matching_subject_of_a_binding_is_named():
    p = Policy([cluster_role("reader", READ_PODS)], [binding("b", "reader", group("devs"), user("alice"))])
    assert p.authorize(ALICE, req("get", "pods", "x", "y")).reason.endswith('to Group "devs"')
    p = Policy([cluster_role("reader", READ_PODS)], [binding("b", "reader", user("alice"), group("devs"))])
    assert p.authorize(ALICE, req("get", "pods", "x", "y")).reason.endswith('to User "alice"')


def test_denial_reasons_name_the_missing_roles_of_bindings_that_apply():
    p = Policy([], [binding("a", "gone", user("alice")), binding("b", "gone", group("devs")),
                    binding("c", "also-gone", user("bob"))])
    d = p.authorize(ALICE, req("get", "pods", "default", "p"))
    assert d == Decision(False, 'RBAC: clusterrole.rbac.authorization.k8s.io "gone" not found')
    p = Policy([], [binding("a", "gone", user("alice"))], [],
               [binding("r", "missing", user("alice"), ns="default", kind="Role")])
    assert p.authorize(ALICE, req("get", "pods", "default", "p")).reason == (
        'RBAC: [clusterrole.rbac.authorization.k8s.io "gone" not found, '
        'role.rbac.authorization.k8s.io "missing" not found]')
    odd = Policy([], [{"kind": "ClusterRoleBinding", "metadata": {"name": "x"},
                       "roleRef": {"kind": "Thing", "name": "t"}, "subjects": [user("alice")]}])
    assert odd.authorize(ALICE, req("get", "pods")).reason == 'RBAC: unsupported role reference kind: "Thing"'


def test_a_missing_role_does_not_hide_a_grant():
    p = Policy([cluster_role("reader", READ_PODS)], [binding("a", "gone", user("alice")),
                                                      binding("b", "reader", user("alice"))])
    assert p.authorize(ALICE, req("get", "pods", "default", "p")).allowed


@pytest.mark.parametrize("r, message", [
    (req("list", "pods"), 'pods is forbidden: User "system:serviceaccount:phalanx-system:phalanx-operator" cannot '
                          'list resource "pods" in API group "" at the cluster scope'),
    (req("list", "pods", "default"), 'pods is forbidden: User "system:serviceaccount:phalanx-system:'
                                     'phalanx-operator" cannot list resource "pods" in API group "" in the '
                                     'namespace "default"'),
    (req("create", "pods", "default", "p1", "binding"),
     'pods "p1" is forbidden: User "system:serviceaccount:phalanx-system:phalanx-operator" cannot create resource '
     '"pods/binding" in API group "" in the namespace "default"'),
    (req("delete", "pytorchjobs", "default", "j", group="kubeflow.org"),
     'pytorchjobs.kubeflow.org "j" is forbidden: User "system:serviceaccount:phalanx-system:phalanx-operator" '
     'cannot delete resource "pytorchjobs" in API group "kubeflow.org" in the namespace "default"'),
    (url("get", "/metrics"), 'forbidden: User "system:serviceaccount:phalanx-system:phalanx-operator" cannot get '
                             'path "/metrics"'),
])
def test_forbidden_messages_as_the_kube_apiserver(r, message):
    assert forbidden_message(OPERATOR, r) == message


def test_forbidden_status_as_golden_62_and_with_a_reason():
    r = req("list", "pytorchjobs", "default", group="kubeflow.org")
    assert forbidden_status(ANONYMOUS, r) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": 'pytorchjobs.kubeflow.org is forbidden: User "system:anonymous" cannot list resource '
                   '"pytorchjobs" in API group "kubeflow.org" in the namespace "default"',
        "reason": "Forbidden", "details": {"group": "kubeflow.org", "kind": "pytorchjobs"}, "code": 403}
    named = forbidden_status(OPERATOR, req("get", "pods", "ns", "p"), "RBAC: x")
    assert named["details"] == {"name": "p", "kind": "pods"} and named["message"].endswith('"ns": RBAC: x')
    assert forbidden_status(OPERATOR, url("get", "/"))["details"] == {}
