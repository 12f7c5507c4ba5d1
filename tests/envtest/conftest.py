"""Fixtures of the envtest suite: ``envtest``, a real kube-apiserver (with etcd and
kube-controller-manager) on loopback for the session, and its admin client.

Binaries come from KUBEBUILDER_ASSETS or `make envtest`'s folder; when they are missing every test
here fails saying to run `make envtest`. A failing test shows the components' logs.
"""
from __future__ import annotations

import pytest

from phalanx.client.kube import KubeClient
from phalanx.client.kubeconfig import from_kubeconfig
from tests.envtest.controlplane import ControlPlane, EnvtestError, find_assets


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


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    plane = getattr(item, "funcargs", {}).get("envtest")
    if report.failed and isinstance(plane, ControlPlane):
        report.sections.append(("envtest logs", plane.logs()))
