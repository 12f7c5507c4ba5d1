"""Against a real kube-apiserver and kube-controller-manager (envtest): objects of a job's names that
another uid controls (a PodGroup and a Service a ConfigMap owns, as the old objects of a job of that
name the garbage collector has not removed yet) are neither used nor changed: the job waits with a
Warning ErrResourceExists event and its Created message, then runs once the real garbage collector
has removed them; after a delete with propagationPolicy Orphan the job made again adopts the pods."""
from __future__ import annotations

import pytest

from phalanx.objects.errors import NotFound
from tests.e2e.test_split_deployment import remove_job
from tests.envtest.test_install_and_p1 import PT_PODS
from tests.scenarios.conftest import job_state, load_example, wait_until
from tests.scenarios.test_failures import get

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

CREATED = "PyTorchJob pytest is created."
WAITING = CREATED + " Waiting for objects of its names that it does not manage to be deleted: "
LABELS = {"training.kubeflow.org/job-name": "pytest", "training.kubeflow.org/operator-name": "pytorchjob-controller",
          "training.kubeflow.org/replica-index": "0", "training.kubeflow.org/replica-type": "master"}


def controller_uid(obj: dict) -> str | None:
    return next((r.get("uid") for r in obj["metadata"].get("ownerReferences") or [] if r.get("controller")), None)


async def owned(c, kind: str, uid: str) -> list[dict]:
    return [o for o in (await c.list(kind, "default")).items if controller_uid(o) == uid]


async def all_running(c, uid: str) -> bool:
    pods = await owned(c, "Pod", uid)
    return len(pods) == len(PT_PODS) and all((p.get("status") or {}).get("phase") == "Running" for p in pods)


def created_message(job: dict) -> str:
    return next(c["message"] for c in job["status"]["conditions"] if c["type"] == "Created")


async def test_s14_another_owners_podgroup_and_service_block_the_job_until_the_gc_removes_them(
        envtest, controllers, admin, kubelet):
    keeper = await admin.create({"apiVersion": "v1", "kind": "ConfigMap",
                                 "metadata": {"name": "keeper", "namespace": "default"}})
    kuid = keeper["metadata"]["uid"]
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "keeper", "uid": kuid, "controller": True,
           "blockOwnerDeletion": True}
    try:
        await admin.create({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                            "metadata": {"name": "pytest", "namespace": "default", "ownerReferences": [ref]},
                            "spec": {"minMember": 9}})
        await admin.create({"apiVersion": "v1", "kind": "Service",
                            "metadata": {"name": "pytest-master-0", "namespace": "default", "labels": LABELS,
                                         "ownerReferences": [ref]},
                            "spec": {"clusterIP": "None", "selector": LABELS, "ports": [{"port": 1}]}})
        uid = (await admin.create(load_example("pytorchjob.yaml")[0]))["metadata"]["uid"]

        async def warned():
            return [e for e in (await admin.list("Event", "default")).items
                    if e["reason"] == "ErrResourceExists" and e["involvedObject"].get("uid") == uid]

        held = f"controlled by ConfigMap keeper, uid {kuid}"
        events = await wait_until(warned, 20, "the job's ErrResourceExists event")
        assert (events[0]["type"], events[0]["message"]) == (
            "Warning", f'Resource "pytest" of Kind "PodGroup" already exists and is not managed by this PyTorchJob '
                       f"(uid {uid}): {held}; waiting for it to be deleted")
        job = await admin.get("PyTorchJob", "pytest", "default")
        assert created_message(job) == WAITING + f'PodGroup "pytest" ({held})' and job_state(job) == "Created"
        pg = await admin.get("PodGroup", "pytest", "default")
        assert pg["spec"]["minMember"] == 9 and controller_uid(pg) == kuid  # neither used nor changed
        assert await owned(admin, "Pod", uid) == []

        await admin.delete("ConfigMap", "keeper", "default")  # kube-controller-manager's GC removes both
        await wait_until(lambda: all_running(admin, uid), 45, "the job's own pods Running")
        pg = await admin.get("PodGroup", "pytest", "default")
        assert controller_uid(pg) == uid and pg["spec"]["minMember"] == 4
        assert controller_uid(await admin.get("Service", "pytest-master-0", "default")) == uid

        async def plain_running():
            j = await admin.get("PyTorchJob", "pytest", "default")
            return job_state(j) == "Running" and created_message(j) == CREATED

        await wait_until(plain_running, 20, "the job Running, its Created message plain again")
    finally:
        try:
            await admin.delete("ConfigMap", "keeper", "default")
        except NotFound:
            pass
        await remove_job(admin, "PyTorchJob", "pytest")


async def test_s14_made_again_after_an_orphaning_delete_the_job_adopts_the_running_pods(
        envtest, controllers, admin, kubelet):
    try:
        old = (await admin.create(load_example("pytorchjob.yaml")[0]))["metadata"]["uid"]
        await wait_until(lambda: all_running(admin, old), 45, "the first job's pods Running")
        pods = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await owned(admin, "Pod", old)}
        await admin.delete("PyTorchJob", "pytest", "default", propagation_policy="Orphan")

        async def orphaned():
            if await get(admin, "PyTorchJob", "pytest") is not None:
                return False
            return all(controller_uid(p) is None for p in (await admin.list("Pod", "default")).items
                       if p["metadata"]["name"] in PT_PODS)

        await wait_until(orphaned, 30, "the first job gone, its pods orphaned by the garbage collector")
        new = (await admin.create(load_example("pytorchjob.yaml")[0]))["metadata"]["uid"]
        await wait_until(lambda: all_running(admin, new), 30, "the orphaned pods adopted")
        assert {p["metadata"]["name"]: p["metadata"]["uid"] for p in await owned(admin, "Pod", new)} == pods
        await wait_until(lambda: owned(admin, "PodGroup", new), 20, "the PodGroup adopted")
        assert len(await owned(admin, "Service", new)) == len(PT_PODS)

        async def running():
            return job_state(await admin.get("PyTorchJob", "pytest", "default")) == "Running"

        await wait_until(running, 20, "the job Running on the adopted pods")
        assert [e for e in (await admin.list("Event", "default")).items if e["reason"] == "ErrResourceExists"
                and e["involvedObject"].get("uid") == new] == []
    finally:
        await remove_job(admin, "PyTorchJob", "pytest")
