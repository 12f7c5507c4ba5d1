"""The podgroup controller (Volcano's pg-controller): the pure decision for bare
pods, job pods, other schedulers, deletion; and the shell over the real Store."""
from __future__ import annotations

import asyncio
import copy
import time
from typing import Any

import pytest

from phalanx.api.admission import admit
from phalanx.api.constants import ANNOTATION_GROUP_NAME, ANNOTATION_QUEUE_NAME
from phalanx.client.local import LocalClient
from phalanx.controller.podgroup.controller import PodGroupController
from phalanx.controller.podgroup.core import decide, group_name
from phalanx.objects.clock import FakeClock
from phalanx.store import Store

SERVED = frozenset({"volcano", "default-scheduler"})
POD_UID = "0b7c6f0e-1111-4a2b-9c3d-000000000001"
JOB_UID = "5d2e8a41-2222-4b3c-8d4e-000000000002"


def bare_pod(name: str = "hello", scheduler: str | None = "default-scheduler", **spec: Any) -> dict:
    pod: dict = {"apiVersion": "v1", "kind": "Pod",
                 "metadata": {"name": name, "namespace": "default", "uid": POD_UID},
                 "spec": {"containers": [{"name": "main", "image": "busybox",
                                          "resources": {"requests": {"cpu": "250m", "memory": "64Mi"}}}],
                          **spec}}
    if scheduler is not None:
        pod["spec"]["schedulerName"] = scheduler
    return pod


def job_ref(controller: bool = True) -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "pytest", "uid": JOB_UID,
            "controller": controller, "blockOwnerDeletion": True}


# ---------------------------------------------------------------- decide

def test_bare_pod_gets_a_group_of_one_named_and_owned_by_itself() -> None:
    plan = decide(bare_pod(), SERVED)
    assert plan is not None and plan.pod_uid == POD_UID
    assert plan.podgroup == {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": f"podgroup-{POD_UID}", "namespace": "default",
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "hello", "uid": POD_UID,
                                          "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"minMember": 1, "minResources": {"cpu": "250m", "memory": "64Mi"}},
        "status": {"phase": "Pending"},
    }
    assert plan.group_name == f"podgroup-{POD_UID}"


def test_a_pod_with_a_controller_owner_is_grouped_under_the_owners_uid_with_the_pods_references() -> None:
    other = {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm", "uid": "cm-uid", "controller": False}
    pod = bare_pod()
    pod["metadata"]["ownerReferences"] = [other, job_ref()]
    plan = decide(pod, SERVED)
    assert plan is not None
    assert plan.group_name == f"podgroup-{JOB_UID}"
    assert plan.podgroup["metadata"]["ownerReferences"] == [other, job_ref()]


def test_owners_that_are_not_controllers_do_not_name_the_group() -> None:
    pod = bare_pod()
    pod["metadata"]["ownerReferences"] = [job_ref(controller=False)]
    plan = decide(pod, SERVED)
    assert plan is not None and plan.group_name == f"podgroup-{POD_UID}"
    # The group is then the pod's own: deleted with the pod, not with the non-controller owner.
    assert [r["uid"] for r in plan.podgroup["metadata"]["ownerReferences"]] == [POD_UID]


def test_queue_from_the_annotation_and_priority_class_copied() -> None:
    pod = bare_pod(priorityClassName="high")
    pod["metadata"]["annotations"] = {ANNOTATION_QUEUE_NAME: "research"}
    plan = decide(pod, SERVED)
    assert plan is not None
    assert plan.podgroup["spec"]["queue"] == "research"
    assert plan.podgroup["spec"]["priorityClassName"] == "high"
    # Without the annotation the queue is left to the CRD default ("default").
    assert "queue" not in decide(bare_pod(), SERVED).podgroup["spec"]  # type: ignore[union-attr]


def test_min_resources_are_the_pods_effective_requests() -> None:
    pod = bare_pod()
    pod["spec"]["containers"].append({"name": "side", "image": "busybox",
                                      "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": "1"}}})
    pod["spec"]["initContainers"] = [{"name": "init", "image": "busybox",
                                      "resources": {"requests": {"memory": "1Gi"}}}]
    plan = decide(pod, SERVED)
    assert plan is not None
    # cpu 250m + 1 (a limit stands for the missing request), memory max(64Mi, init 1Gi), the gpu.
    assert plan.podgroup["spec"]["minResources"] == {"cpu": "1250m", "memory": "1Gi", "nvidia.com/gpu": "1"}
    assert decide(bare_pod(containers=[{"name": "c", "image": "busybox"}]), SERVED).podgroup["spec"][  # type: ignore[union-attr]
        "minResources"] == {}


def test_a_pod_that_names_a_group_is_left_alone() -> None:
    job_pod = bare_pod(scheduler="volcano")
    job_pod["metadata"]["ownerReferences"] = [job_ref()]
    job_pod["metadata"]["annotations"] = {ANNOTATION_GROUP_NAME: "pytest"}
    assert decide(job_pod, SERVED) is None


def test_pods_of_other_schedulers_are_left_alone() -> None:
    assert decide(bare_pod(scheduler="my-scheduler"), SERVED) is None
    assert decide(bare_pod(scheduler="default-scheduler"), frozenset({"volcano"})) is None
    assert decide(bare_pod(scheduler=None), SERVED) is None
    assert decide(bare_pod(scheduler="volcano"), frozenset({"volcano"})) is not None


def test_deleted_or_deleting_pods_get_nothing() -> None:
    assert decide(None, SERVED) is None
    pod = bare_pod()
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    assert decide(pod, SERVED) is None


def test_the_decision_is_idempotent_and_does_not_change_the_pod() -> None:
    pod = bare_pod()
    before = copy.deepcopy(pod)
    first, second = decide(pod, SERVED), decide(pod, SERVED)
    assert first == second and pod == before
    pod["metadata"]["annotations"] = {ANNOTATION_GROUP_NAME: first.group_name}  # type: ignore[union-attr]
    assert decide(pod, SERVED) is None


def test_a_controller_reference_without_uid_falls_back_to_the_pods_uid() -> None:
    pod = bare_pod()
    pod["metadata"]["ownerReferences"] = [{"apiVersion": "v1", "kind": "X", "name": "x", "controller": True}]
    assert group_name(pod) == f"podgroup-{POD_UID}"


def test_malformed_resources_raise_value_error() -> None:
    pod = bare_pod()
    pod["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    with pytest.raises(ValueError):
        decide(pod, SERVED)


# ---------------------------------------------------------------- the shell

async def eventually(predicate, timeout: float = 5.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


def get(store: Store, kind: str, name: str, ns: str | None = "default") -> dict | None:
    try:
        return store.get(kind, name, ns)
    except Exception:
        return None


@pytest.fixture
async def env():
    store = Store(None, FakeClock(), admission=admit)  # admission: the CRD's queue default
    client = LocalClient(store)
    ctl = PodGroupController(client, SERVED, workers=2)
    task = asyncio.create_task(ctl.run())
    try:
        yield store, client, ctl
    finally:
        await ctl.stop()
        await asyncio.wait_for(task, 5)


def unstamped(pod: dict) -> dict:
    pod = copy.deepcopy(pod)
    pod["metadata"].pop("uid")
    return pod


async def test_shell_creates_the_group_and_annotates_the_pod(env) -> None:
    store, client, ctl = env
    created = await client.create(unstamped(bare_pod()))
    uid = created["metadata"]["uid"]
    name = f"podgroup-{uid}"
    pod = await eventually(lambda: (p := get(store, "Pod", "hello"))
                           and (p["metadata"].get("annotations") or {}).get(ANNOTATION_GROUP_NAME) and p,
                           what="the pod annotated")
    assert pod["metadata"]["annotations"][ANNOTATION_GROUP_NAME] == name
    pg = get(store, "PodGroup", name)
    assert pg is not None and pg["spec"]["minMember"] == 1 and pg["spec"]["queue"] == "default"
    assert pg["metadata"]["ownerReferences"][0]["uid"] == uid
    assert ctl.created == 1


async def test_shell_leaves_job_pods_and_foreign_pods_alone_and_adopts_an_existing_group(env) -> None:
    store, client, ctl = env
    grouped = unstamped(bare_pod("grouped", scheduler="volcano"))
    grouped["metadata"]["annotations"] = {ANNOTATION_GROUP_NAME: "pytest"}
    await client.create(grouped)
    await client.create(unstamped(bare_pod("foreign", scheduler="my-scheduler")))
    # A group already made for this pod (a previous run that died before annotating) is reused.
    created = await client.create(unstamped(bare_pod("again")))
    await eventually(lambda: (get(store, "Pod", "again")["metadata"].get("annotations") or {})  # type: ignore[index]
                     .get(ANNOTATION_GROUP_NAME), what="the third pod annotated")
    assert [o["metadata"]["name"] for o in store.list("PodGroup")[0]] == [f"podgroup-{created['metadata']['uid']}"]
    for n in ("grouped", "foreign"):
        ann = get(store, "Pod", n)["metadata"].get("annotations") or {}  # type: ignore[index]
        assert ann.get(ANNOTATION_GROUP_NAME) == ("pytest" if n == "grouped" else None)
    again = get(store, "Pod", "again")
    assert again is not None
    # Reconciling the annotated pod once more changes nothing.
    rv = again["metadata"]["resourceVersion"]
    await ctl.reconcile(("default", "again"))
    assert get(store, "Pod", "again")["metadata"]["resourceVersion"] == rv  # type: ignore[index]
    assert ctl.created == 1


async def test_shell_reuses_a_group_that_exists(env) -> None:
    store, client, ctl = env
    await ctl.controller.stop()  # reconcile by hand; the informer keeps watching
    pod = await client.create(unstamped(bare_pod("p")))
    plan = decide(pod, SERVED)
    assert plan is not None
    await client.create(copy.deepcopy(plan.podgroup))  # made by a run that died before annotating
    await eventually(lambda: ctl.pods.get("default", "p"), what="the informer has the pod")
    await ctl.reconcile(("default", "p"))
    assert get(store, "Pod", "p")["metadata"]["annotations"][ANNOTATION_GROUP_NAME] == plan.group_name  # type: ignore[index]
    assert ctl.created == 0


async def test_shell_does_not_annotate_a_pod_replaced_under_the_same_name(env) -> None:
    store, client, ctl = env
    await ctl.controller.stop()
    await client.create(unstamped(bare_pod("q")))
    await eventually(lambda: ctl.pods.get("default", "q"), what="the informer has the pod")
    await ctl.pods.stop()  # its cache now lags: it still holds the first pod
    await client.delete("Pod", "q", "default")
    await client.create(unstamped(bare_pod("q")))
    await ctl.reconcile(("default", "q"))  # decided from the old pod: its uid no longer matches
    assert ANNOTATION_GROUP_NAME not in (get(store, "Pod", "q")["metadata"].get("annotations") or {})  # type: ignore[index]
