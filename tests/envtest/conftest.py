"""Fixtures of the envtest suite: ``envtest``, a real kube-apiserver (with etcd and
kube-controller-manager) on loopback for the session, its admin client, ``installed`` (`phalanx
install` applied once), ``controllers`` (`phalanx operator` and `phalanx scheduler` running) and
``kubelet`` (fake Nodes and the KubeletStub playing their kubelet).

Binaries come from KUBEBUILDER_ASSETS or `make envtest`'s folder; when they are missing every test
here fails saying to run `make envtest`. A failing test shows the components' logs.
"""
from __future__ import annotations

import subprocess

import pytest

from phalanx.client.kube import KubeClient
from phalanx.client.kubeconfig import from_kubeconfig
from tests.envtest.controlplane import ControlPlane, EnvtestError, find_assets
from tests.envtest.kubelet_stub import KubeletStub, add_nodes, fake_node
from tests.envtest.phalanx_procs import INSTALL, Controllers, phalanx


@pytest.fixture(scope="session")
def envtest(tmp_path_factory):
    problem = None
    try:
        assets = find_assets(("etcd", "kube-apiserver", "kube-controller-manager", "kubectl"))
    except EnvtestError as e:
        problem = str(e)
    if problem is not None:
        pytest.fail(problem, pytrace=False)
    plane = ControlPlane(tmp_path_factory.mktemp("envtest"), assets)
    try:
        try:
            plane.start()
        except EnvtestError as e:
            problem = str(e)
        if problem is not None:
            pytest.fail(problem, pytrace=False)
        yield plane
    finally:
        plane.stop()


@pytest.fixture
async def admin(envtest):
    c = KubeClient(from_kubeconfig(envtest.kubeconfig), qps=0)
    try:
        yield c
    finally:
        await c.close()


@pytest.fixture(scope="session")
def installed(envtest: ControlPlane) -> subprocess.CompletedProcess:
    """`phalanx install | kubectl apply -f -` on the envtest cluster (once per session); once the
    CRDs are Established, kube-controller-manager restarted so its garbage collector deletes what
    a deleted job owned from the start."""
    applied = envtest.kubectl("apply", "-f", "-", input=phalanx(*INSTALL).stdout, check=False)
    if applied.returncode == 0:
        envtest.kubectl("wait", "--for=condition=Established", "--timeout=30s", "crd", "--all")
        envtest.restart_controller_manager()
    return applied


@pytest.fixture
def controllers(envtest, installed):
    assert installed.returncode == 0, installed.stderr
    c = Controllers(envtest)
    try:
        c.start_both()
        yield c
    finally:
        c.stop()


@pytest.fixture
async def kubelet(admin):
    """Nodes node-1 and node-2 (made once, kept), and the stub kubelet of both, running."""
    await add_nodes(admin, [fake_node("node-1"), fake_node("node-2")])
    stub = KubeletStub(admin)
    await stub.start()
    try:
        yield stub
    finally:
        await stub.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    plane = getattr(item, "funcargs", {}).get("envtest")
    if report.failed and isinstance(plane, ControlPlane):
        report.sections.append(("envtest logs", plane.logs()))
