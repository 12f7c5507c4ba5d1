"""The job's PodGroup (reference §7, SEMANTICS S8) and quantity sums."""
from __future__ import annotations

from fractions import Fraction

import pytest

from phalanx.controller.frameworks import get_framework
from phalanx.controller.job import podgroup as pg
from phalanx.controller.job.quantity import format_quantity, parse, same_resources
from tests.unit.test_job_world import pytorch_job, tf_job

PYTORCH = get_framework("PyTorchJob")
TF = get_framework("TFJob")


def test_s8_podgroup_spec_of_the_seed_job():
    # SCENARIOS P1: MINMEMBER 4, queue default, minResources from limits (no requests).
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


@pytest.mark.parametrize("text, value", [
    ("1", 1), ("500m", Fraction(1, 2)), ("100Mi", 100 * 2**20), ("1Gi", 2**30), ("1e3", 1000), ("1E", 10**18),
    ("2k", 2000), (".5", Fraction(1, 2)), (3, 3), (0.25, Fraction(1, 4)),
])
def test_quantity_parse(text, value):
    assert parse(text)[0] == value


@pytest.mark.parametrize("value, fmt, text", [
    (4, "DecimalSI", "4"), (Fraction(3, 2), "DecimalSI", "1500m"), (2000, "DecimalSI", "2k"),
    (400 * 2**20, "BinarySI", "400Mi"), (1536 * 2**20, "BinarySI", "1536Mi"), (2**30, "BinarySI", "1Gi"),
    (512, "BinarySI", "512"), (Fraction(1, 2), "BinarySI", "500m"), (0, "BinarySI", "0"),
    (3000, "DecimalExponent", "3e3"), (Fraction(1, 10**10), "DecimalSI", "1n"),
])
def test_quantity_format(value, fmt, text):
    assert format_quantity(Fraction(value), fmt) == text


def test_quantities_compare_by_value():
    assert same_resources({"cpu": "1000m", "memory": "1Gi"}, {"cpu": "1", "memory": "1073741824"})
    assert not same_resources({"cpu": "1"}, {"cpu": "2"})
    assert not same_resources({"cpu": "1"}, {"cpu": "1", "memory": "1"})
