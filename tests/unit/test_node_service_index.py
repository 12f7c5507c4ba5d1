"""The node agent finds the Services selecting a pod through an index, not by
scanning every Service (a burst of N jobs made that O(N²))."""
from __future__ import annotations

from types import SimpleNamespace

from phalanx.api.constants import ANNOTATION_ADDRESS, LABEL_JOB_NAME
from phalanx.node.agent import SERVICE_INDEX, NodeAgent, service_index
from phalanx.runtime.informer import Informer


def svc(name: str, selector: dict | None, ns: str = "default", headless: bool = True) -> dict:
    spec: dict = {"clusterIP": "None" if headless else "10.0.0.1"}
    if selector is not None:
        spec["selector"] = selector
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": "1",
                         "annotations": {ANNOTATION_ADDRESS: f"127.0.0.{len(name)}"}}, "spec": spec}


def pod(labels: dict, ns: str = "default") -> dict:
    return {"metadata": {"name": "p", "namespace": ns, "labels": labels}}


def agent_with(services: list[dict]) -> SimpleNamespace:
    inf = Informer(None, "Service")  # type: ignore[arg-type]
    inf.add_index(SERVICE_INDEX, service_index)
    for s in services:
        inf._apply("ADDED", s)
    return SimpleNamespace(services=inf)


def test_index_files_services_by_the_job_their_selector_names():
    assert service_index(svc("a", {LABEL_JOB_NAME: "j1", "x": "1"})) == ["default/=j1"]
    assert service_index(svc("b", {"app": "web"}, ns="ns2")) == ["ns2/*"]
    assert service_index(svc("c", None)) == [] and service_index(svc("d", {})) == []


def test_selecting_services_matches_like_a_full_scan():
    services = [svc(f"j{i}-master-0", {LABEL_JOB_NAME: f"j{i}", "role": "master"}) for i in range(50)]
    services += [svc("web", {"app": "web"}), svc("web-other-ns", {"app": "web"}, ns="other"),
                 svc("j3-any", {LABEL_JOB_NAME: "j3"}, headless=False), svc("none", None)]
    agent = agent_with(services)
    for labels in ({LABEL_JOB_NAME: "j3", "role": "master", "app": "web"}, {LABEL_JOB_NAME: "j3", "role": "worker"},
                   {"app": "web"}, {}, {LABEL_JOB_NAME: "nope"}):
        p = pod(labels)
        fast = [s["metadata"]["name"] for s in NodeAgent.selecting_services(agent, p)]
        full = [s["metadata"]["name"] for s in NodeAgent.selecting_services(agent, p, services)]
        assert fast == full, labels
    got = [s["metadata"]["name"] for s in NodeAgent.selecting_services(
        agent, pod({LABEL_JOB_NAME: "j3", "role": "master", "app": "web"}))]
    assert got == ["j3-master-0", "web", "j3-any"]  # headless first, then by name
