"""Against a real kube-apiserver and kube-controller-manager (envtest): `phalanx operator`, with the
ServiceAccount and ClusterRole `phalanx install` makes, gives an elastic PyTorchJob with metrics its
HorizontalPodAutoscaler as training-operator v1.9 does (named after the job, controlled by it, targeting
its scale subresource); the real HPA controller reads the job's scale through the CRD (AbleToScale
SucceededGetScale; no metrics API here, so it cannot compute a count); the HPA is deleted while the job
is suspended."""
from __future__ import annotations

import pytest

from tests.e2e.test_hpa import JOB
from tests.scenarios.conftest import wait_until
from tests.scenarios.test_failures import get

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]


def conditions(hpa: dict) -> dict:
    return {c["type"]: (c["status"], c["reason"]) for c in (hpa.get("status") or {}).get("conditions") or []}


async def test_s15_the_operator_makes_the_hpa_and_kube_controller_manager_reads_the_jobs_scale(envtest, controllers, admin):
    job = await admin.create({**JOB, "metadata": {"name": "burn", "namespace": "default"}})
    try:
        hpa = await wait_until(lambda: get(admin, "HorizontalPodAutoscaler", "burn"), 30, "the job's HPA")
        assert hpa["metadata"]["ownerReferences"] == [
            {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "burn", "uid": job["metadata"]["uid"],
             "controller": True, "blockOwnerDeletion": True}]
        assert hpa["spec"] == {"scaleTargetRef": {"kind": "PyTorchJob", "name": "burn", "apiVersion": "kubeflow.org/v1"},
                               "minReplicas": 1, "maxReplicas": 3, "metrics": JOB["spec"]["elasticPolicy"]["metrics"]}

        async def scale_read():
            got = await get(admin, "HorizontalPodAutoscaler", "burn")
            return got if got and conditions(got).get("AbleToScale") == ("True", "SucceededGetScale") else None
        seen = await wait_until(scale_read, 30, "kube-controller-manager reading the job's scale")
        assert seen["status"]["currentReplicas"] == 1
        assert conditions(seen)["ScalingActive"][0] == "False"  # no metrics API in envtest

        await admin.patch("PyTorchJob", "burn", "default", {"spec": {"runPolicy": {"suspend": True}}})

        async def gone():
            return await get(admin, "HorizontalPodAutoscaler", "burn") is None
        await wait_until(gone, 30, "the HPA deleted while the job is suspended")
    finally:
        await admin.delete("PyTorchJob", "burn", "default")
    log = controllers.envtest.log("operator").read_text()
    assert "forbidden" not in log.lower(), log[-3000:]
