"""Request attributes as the kube-apiserver's RequestInfoFactory reads them (verb, group, resource,
subresource, namespace, name; non-resource paths)."""
from __future__ import annotations

import pytest

from phalanx.server.requestinfo import RequestInfo, parse


def res(verb, resource, ns="", name="", sub="", group="", version="v1", path="") -> RequestInfo:
    return RequestInfo(verb, path, True, group, version, resource, sub, ns, name)


@pytest.mark.parametrize("method, path, query, want", [
    # Core group: collections, items, subresources
    ("GET", "/api/v1/namespaces/default/pods", {}, res("list", "pods", "default")),
    ("GET", "/api/v1/namespaces/default/pods", {"watch": ["true"]}, res("watch", "pods", "default")),
    ("GET", "/api/v1/namespaces/default/pods", {"watch": ["1"]}, res("watch", "pods", "default")),
    ("GET", "/api/v1/namespaces/default/pods", {"watch": ["false"]}, res("list", "pods", "default")),
    ("GET", "/api/v1/namespaces/default/pods", {"watch": ["0"]}, res("list", "pods", "default")),
    ("GET", "/api/v1/pods", {"watch": ["True"]}, res("watch", "pods")),
    ("HEAD", "/api/v1/pods", {}, res("list", "pods")),
    ("GET", "/api/v1/namespaces/default/pods/p1", {}, res("get", "pods", "default", "p1")),
    ("POST", "/api/v1/namespaces/default/pods", {}, res("create", "pods", "default")),
    ("PUT", "/api/v1/namespaces/default/pods/p1", {}, res("update", "pods", "default", "p1")),
    ("PATCH", "/api/v1/namespaces/default/pods/p1", {}, res("patch", "pods", "default", "p1")),
    ("DELETE", "/api/v1/namespaces/default/pods/p1", {}, res("delete", "pods", "default", "p1")),
    ("DELETE", "/api/v1/namespaces/default/pods", {}, res("deletecollection", "pods", "default")),
    ("POST", "/api/v1/namespaces/default/pods/p1/binding", {}, res("create", "pods", "default", "p1", "binding")),
    ("PUT", "/api/v1/namespaces/default/pods/p1/status", {}, res("update", "pods", "default", "p1", "status")),
    ("GET", "/api/v1/namespaces/default/pods/p1/log", {}, res("get", "pods", "default", "p1", "log")),
    ("POST", "/api/v1/namespaces/default/pods/p1/exec", {}, res("create", "pods", "default", "p1", "exec")),
    ("GET", "/api/v1/namespaces/default/pods/p1/exec", {}, res("get", "pods", "default", "p1", "exec")),
    ("POST", "/api/v1/namespaces/ns/serviceaccounts/sa/token", {},
     res("create", "serviceaccounts", "ns", "sa", "token")),
    # Namespaces are their own namespace; status and finalize are their subresources
    ("GET", "/api/v1/namespaces", {}, res("list", "namespaces")),
    ("GET", "/api/v1/namespaces/team", {}, res("get", "namespaces", "team", "team")),
    ("PUT", "/api/v1/namespaces/team/status", {}, res("update", "namespaces", "team", "team", "status")),
    ("PUT", "/api/v1/namespaces/team/finalize", {}, res("update", "namespaces", "team", "team", "finalize")),
    ("DELETE", "/api/v1/namespaces/team", {}, res("delete", "namespaces", "team", "team")),
    # Cluster-scoped kinds
    ("GET", "/api/v1/nodes/n1", {}, res("get", "nodes", name="n1")),
    ("POST", "/apis/scheduling.volcano.sh/v1beta1/queues", {},
     res("create", "queues", group="scheduling.volcano.sh", version="v1beta1")),
    ("PUT", "/apis/scheduling.volcano.sh/v1beta1/queues/default/status", {},
     res("update", "queues", name="default", sub="status", group="scheduling.volcano.sh", version="v1beta1")),
    # Named groups
    ("GET", "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs", {},
     res("list", "pytorchjobs", "default", group="kubeflow.org")),
    ("PATCH", "/apis/kubeflow.org/v1/namespaces/default/pytorchjobs/j/status", {},
     res("patch", "pytorchjobs", "default", "j", "status", group="kubeflow.org")),
    ("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", {},
     res("create", "selfsubjectaccessreviews", group="authorization.k8s.io")),
    # A list or watch of one object by field selector is about that object
    ("GET", "/apis/coordination.k8s.io/v1/namespaces/ns/leases", {"fieldSelector": ["metadata.name=lock"]},
     res("list", "leases", "ns", "lock", group="coordination.k8s.io")),
    ("GET", "/api/v1/pods", {"fieldSelector": ["spec.nodeName=n1,metadata.name==p"], "watch": ["1"]},
     res("watch", "pods", name="p")),
    ("GET", "/api/v1/pods", {"fieldSelector": ["metadata.name!=p"]}, res("list", "pods")),
    ("GET", "/api/v1/pods", {"fieldSelector": ["metadata.name=a/b"]}, res("list", "pods")),
    # The legacy watch prefix
    ("GET", "/api/v1/watch/namespaces/default/pods", {}, res("watch", "pods", "default")),
    ("GET", "/api/v1/watch/namespaces/default/pods/p1", {}, res("watch", "pods", "default", "p1")),
])
def test_resource_requests(method, path, query, want):
    got = parse(method, path, query)
    assert got == RequestInfo(want.verb, path, True, want.api_group, want.api_version, want.resource,
                              want.subresource, want.namespace, want.name)


@pytest.mark.parametrize("method, path, verb", [
    ("GET", "/version", "get"), ("GET", "/healthz", "get"), ("GET", "/api", "get"), ("GET", "/api/v1", "get"),
    ("GET", "/apis", "get"), ("GET", "/apis/kubeflow.org", "get"), ("GET", "/apis/kubeflow.org/v1", "get"),
    ("GET", "/openapi/v3/apis/kubeflow.org/v1", "get"), ("POST", "/nope/a/b", "post"), ("GET", "/", "get"),
    ("PUT", "/version", "put"),
])
def test_non_resource_requests_keep_the_method_as_verb(method, path, verb):
    assert parse(method, path) == RequestInfo(verb, path)


def test_a_special_verb_without_a_resource_has_no_verb():
    assert parse("GET", "/api/v1/watch") == RequestInfo("", "/api/v1/watch", True, "", "v1")


def test_an_unknown_method_has_no_verb():
    assert parse("OPTIONS", "/api/v1/pods").verb == ""
