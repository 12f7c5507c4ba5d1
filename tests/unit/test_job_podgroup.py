"""The job's PodGroup (docs/REFERENCE.md §7, docs/SEMANTICS.md S8)."""
from __future__ import annotations

import pytest

from phalanx.controller.frameworks import get_framework
from phalanx.controller.job import podgroup as pg
from tests.unit.test_job_world import pytorch_job, tf_job

PYTORCH = get_framework("PyTorchJob")
TF = get_framework("TFJob")


def test_s8_podgroup_spec_of_the_seed_job():
    # docs/REFERENCE.md P1: MINMEMBER 4, queue default, minResources from limits (no requests).
    assert pg.new_podgroup(pytorch_job(), PYTORCH)["spec"] == {
        "minMember": 4, "queue": "default", "minResources": {"cpu": "4", "memory": "400Mi"}}
    assert pg.new_podgroup(tf_job(), TF)["spec"]["minMember"] == 4


def test_s8_requests_win_over_limits_and_init_containers_are_ignored():
    job = pytorch_job()
    w = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]
    w["containers"][0]["resources"] = {"requests": {"cpu": "500m", "memory": "1Gi", "nvidia.com/gpu": 1},
                                       "limits": {"cpu": "2", "memory": "2Gi"}}
    w["initContainers"] = [{"name": "i", "resources": {"requests": {"cpu": "8"}}}]
    assert pg.min_resources(job, PYTORCH, 4) == {"cpu": "2500m", "memory": "3172Mi", "nvidia.com/gpu": "3"}


def test_s8_min_available_counts_pods_in_the_fixed_replica_order():
    job = pytorch_job(schedulingPolicy={"minAvailable": 2, "queue": "research", "priorityClass": "high"})
    job["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"cpu": "4", "memory": "1Gi"}}
    spec = pg.new_podgroup(job, PYTORCH)["spec"]
    assert spec == {"minMember": 2, "queue": "research", "priorityClassName": "high",
                    "minResources": {"cpu": "5", "memory": "1124Mi"}}  # master + one worker


def test_s8_explicit_min_resources_are_used_as_given():
    job = pytorch_job(schedulingPolicy={"minResources": {"cpu": "3"}})
    assert pg.new_podgroup(job, PYTORCH)["spec"]["minResources"] == {"cpu": "3"}


def test_podgroup_metadata_copies_job_annotations_but_not_kubectls_last_applied():
    job = pytorch_job()
    job["metadata"]["annotations"] = {"kubectl.kubernetes.io/last-applied-configuration": "{...}",
                                      "team": "vision"}
    meta = pg.new_podgroup(job, PYTORCH)["metadata"]
    assert meta["annotations"] == {"team": "vision"}
    assert meta["ownerReferences"][0]["controller"] is True and meta["ownerReferences"][0]["kind"] == "PyTorchJob"


def test_an_existing_non_empty_queue_wins():
    existing = {"metadata": {"name": "pytest"}, "spec": {"minMember": 4, "queue": "old",
                                                        "minResources": {"cpu": "4", "memory": "400Mi"}}}
    assert pg.updated_podgroup(pytorch_job(), PYTORCH, existing) is None


def test_update_keeps_fields_we_do_not_own():
    existing = {"metadata": {"name": "pytest", "resourceVersion": "9"},
                "spec": {"minMember": 3, "queue": "default", "minTaskMember": {"worker": 1}},
                "status": {"phase": "Running"}}
    upd = pg.updated_podgroup(pytorch_job(), PYTORCH, existing)
    assert upd["spec"] == {"minMember": 4, "queue": "default", "minTaskMember": {"worker": 1},
                           "minResources": {"cpu": "4", "memory": "400Mi"}}
    assert upd["metadata"]["resourceVersion"] == "9" and upd["status"] == {"phase": "Running"}
    assert existing["spec"]["minMember"] == 3  # the input is not changed


@pytest.mark.parametrize("phase, ok", [(None, False), ("", False), ("Pending", False), ("Inqueue", True),
                                       ("Running", True), ("Unknown", True), ("Completed", True)])
def test_s8_pods_only_once_admitted(phase, ok):
    group = {"metadata": {"name": "x"}, "status": {} if phase is None else {"phase": phase}}
    assert pg.admitted(group) is ok
    assert pg.admitted(None) is False


@pytest.mark.parametrize("policy, workers, want", [
    (None, 3, 4),  # not elastic: every replica
    ({"minReplicas": 2, "maxReplicas": 4}, 3, 3),  # the master and two workers
    ({"minReplicas": 1, "maxReplicas": 4}, 4, 2),
    ({"maxReplicas": 2}, 2, 3),  # min defaults to max: the whole job
    ({"minReplicas": 3, "maxReplicas": 4}, 3, 4),  # at its minimum: every replica
    ({"minReplicas": 5, "maxReplicas": 6}, 3, 4),  # below its minimum (not admitted): never more than exist
    ({}, 3, 4),  # neither bound (defaulting sets both): every replica
])
def test_s8_an_elastic_pytorchjobs_gang_is_its_minimum(policy, workers, want):
    job = pytorch_job()
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = workers
    if policy is not None:
        job["spec"]["elasticPolicy"] = policy
    spec = pg.new_podgroup(job, PYTORCH)["spec"]
    assert spec["minMember"] == want
    assert spec["minResources"] == pg.min_resources(job, PYTORCH, want)
    job["spec"]["runPolicy"]["schedulingPolicy"] = {"minAvailable": 1}
    assert pg.new_podgroup(job, PYTORCH)["spec"]["minMember"] == 1  # minAvailable still wins
