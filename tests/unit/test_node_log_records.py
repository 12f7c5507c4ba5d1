"""Logs that outlive their pods: pod records, the LogProvider for deleted pods and
jobs, and the janitor that removes them with the job (docs/SEMANTICS.md S5), over a
real Store + LocalClient and a temporary state directory."""
from __future__ import annotations

import asyncio
import json
import time
from datetime import datetime, timedelta, timezone

import pytest

from phalanx.api.admission import admit
from phalanx.client.local import LocalClient
from phalanx.node.logjanitor import LogJanitor
from phalanx.node.logs import LogProvider, container_log_path, job_blocks, pod_dir, record_pod
from phalanx.node.podrecords import POD_META, PodRecords, parse_dir_name
from phalanx.objects.clock import Clock
from phalanx.objects.errors import BadRequest, NotFound
from phalanx.store.store import Store

pytestmark = pytest.mark.timeout(20)

T0 = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


@pytest.fixture
def client():
    store = Store(None, Clock(), admission=admit)
    yield LocalClient(store)
    store.close()


def job_doc(name: str, kind: str = "PyTorchJob") -> dict:
    replica = {"replicas": 1, "restartPolicy": "OnFailure",
               "template": {"spec": {"containers": [{"name": "pytorch", "image": "busybox",
                                                     "command": ["sleep", "1"]}]}}}
    if kind == "PyTorchJob":
        spec = {"pytorchReplicaSpecs": {"Master": replica}}
    else:
        spec = {"tfReplicaSpecs": {"Worker": {**replica, "template": {"spec": {"containers": [
            {"name": "tensorflow", "image": "busybox", "command": ["sleep", "1"]}]}}}}}
    return {"apiVersion": "kubeflow.org/v1", "kind": kind, "metadata": {"name": name, "namespace": "default"},
            "spec": spec}


def pod_doc(name: str, owner: dict | None = None, containers=("pytorch",), inits=(), labels=None) -> dict:
    meta: dict = {"name": name, "namespace": "default", "labels": labels or {}}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                    "name": owner["metadata"]["name"], "uid": owner["metadata"]["uid"],
                                    "controller": True, "blockOwnerDeletion": True}]
    c = {"image": "busybox", "command": ["sh", "-c", "true"]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{**c, "name": n} for n in containers],
                     "initContainers": [{**c, "name": n} for n in inits]}}


def put_logs(home, pod: dict, started: datetime, logs: dict[str, list[str]]) -> None:
    """What the runtime leaves: the pod's record and one file per container instance."""
    record_pod(home, pod, started, node="las1")
    m = pod["metadata"]
    for container, texts in logs.items():
        for n, text in enumerate(texts):
            p = container_log_path(home, m["namespace"], m["name"], m["uid"], container, n)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)


async def run_pod(client, home, doc: dict, started: datetime, logs: dict[str, list[str]]) -> dict:
    pod = await client.create(doc)
    put_logs(home, pod, started, logs)
    return pod


async def wait_until(predicate, timeout: float = 5.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = predicate()
        if asyncio.iscoroutine(v):
            v = await v
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.01)


# --------------------------------------------------------------------------- records


async def test_record_is_written_once_and_read_back(tmp_path, client):
    job = await client.create(job_doc("pytest"))
    doc = pod_doc("pytest-worker-0", job, containers=("pytorch",), inits=("init-pytorch",),
                  labels={"training.kubeflow.org/replica-type": "worker"})
    doc["metadata"]["annotations"] = {"kubectl.kubernetes.io/default-container": "pytorch"}
    pod = await client.create(doc)
    path = record_pod(tmp_path, pod, T0, node="las1")
    assert path == pod_dir(tmp_path, "default", "pytest-worker-0", pod["metadata"]["uid"]) / POD_META
    data = json.loads(path.read_text())
    assert data["controller"] == {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "pytest",
                                  "uid": job["metadata"]["uid"]}
    assert (data["containers"], data["initContainers"]) == (["pytorch"], ["init-pytorch"])
    assert data["labels"] == {"training.kubeflow.org/replica-type": "worker"}
    assert data["node"] == "las1" and data["startedAt"] == T0.isoformat()
    assert data["creationTimestamp"] == pod["metadata"]["creationTimestamp"]
    record_pod(tmp_path, pod, T0 + timedelta(hours=1))  # an agent restart keeps the first record
    assert json.loads(path.read_text())["startedAt"] == T0.isoformat()

    [rec] = PodRecords(tmp_path).scan("default", "pytest-worker-0")
    assert (rec.name, rec.uid, rec.has_meta) == ("pytest-worker-0", pod["metadata"]["uid"], True)
    assert rec.job_owner["name"] == "pytest" and rec.default_container == "pytorch"
    assert rec.started == T0.timestamp()
    assert PodRecords(tmp_path).scan("other") == [] and PodRecords(tmp_path).scan("default", "pytest") == []


def test_directory_without_record_and_odd_entries(tmp_path):
    uid = "0123abcd-0000-4000-8000-000000000001"
    (tmp_path / "pods" / f"default_old_{uid}" / "main").mkdir(parents=True)
    (tmp_path / "pods" / f"default_old_{uid}" / "main" / "0.log").write_text("x\n")
    (tmp_path / "pods" / f"default_old_{uid}" / "scratch").mkdir()  # a directory the program made
    (tmp_path / "pods" / "not-a-pod-dir").mkdir()
    (tmp_path / "pods" / f"default_bad_{uid}").write_text("a file")
    bad = tmp_path / "pods" / f"default_corrupt_{uid[:-1]}2"
    bad.mkdir()
    (bad / POD_META).write_text("{not json")
    recs = {r.name: r for r in PodRecords(tmp_path).scan("default")}
    assert set(recs) == {"old", "corrupt"}
    assert recs["old"].containers == ["main"] and not recs["old"].has_meta and recs["old"].controller is None
    assert not recs["corrupt"].has_meta
    assert parse_dir_name(f"default_old_{uid}") == ("default", "old", uid)
    assert parse_dir_name("Default_old_x") is None


# --------------------------------------------------------------------------- provider: deleted pods


async def test_deleted_pod_served_by_name_newest_instance_and_previous(tmp_path, client):
    job = await client.create(job_doc("pytest"))
    lp = LogProvider(tmp_path, client)
    first = await run_pod(client, tmp_path, pod_doc("pytest-worker-0", job), T0,
                          {"pytorch": ["first run\n"]})
    await client.delete("Pod", "pytest-worker-0", "default")
    # ExitCode recreation: a new pod of the same name, restarted once in place.
    second = await run_pod(client, tmp_path, pod_doc("pytest-worker-0", job), T0 + timedelta(seconds=1),
                           {"pytorch": ["second run, try 0\n", "second run, try 1\n"]})
    assert first["metadata"]["uid"] != second["metadata"]["uid"]
    assert await lp.read("default", "pytest-worker-0") == ""  # not bound yet: no log, as for any pod
    await client.bind("default", "pytest-worker-0", "las1")
    assert await lp.read("default", "pytest-worker-0") == "second run, try 1\n"
    assert await lp.read("default", "pytest-worker-0", previous=True) == "second run, try 0\n"

    await client.delete("Pod", "pytest-worker-0", "default", grace_period_seconds=0)  # bound: as the agent does
    with pytest.raises(NotFound):
        await client.get("Pod", "pytest-worker-0", "default")
    assert await lp.read("default", "pytest-worker-0") == "second run, try 1\n"
    assert await lp.read("default", "pytest-worker-0", "pytorch", previous=True) == "second run, try 0\n"
    assert await lp.read("default", "pytest-worker-0", tail_lines=0) == ""
    assert "".join([c async for c in lp.follow("default", "pytest-worker-0")]) == "second run, try 1\n"
    with pytest.raises(NotFound):
        await lp.read("default", "pytest-worker-9")
    with pytest.raises(BadRequest) as e:
        await lp.read("default", "pytest-worker-0", "other")
    assert str(e.value) == "container other is not valid for pod pytest-worker-0"


async def test_previous_reaches_into_the_previous_pod_instance(tmp_path, client):
    lp = LogProvider(tmp_path, client)
    await run_pod(client, tmp_path, pod_doc("solo"), T0, {"pytorch": ["old pod\n"]})
    await client.delete("Pod", "solo", "default")
    live = await client.create(pod_doc("solo"))
    put_logs(tmp_path, live, T0 + timedelta(seconds=5), {"pytorch": ["new pod\n"]})
    await client.bind("default", "solo", "las1")
    assert await lp.read("default", "solo") == "new pod\n"
    assert await lp.read("default", "solo", previous=True) == "old pod\n"


async def test_deleted_pod_errors_name_the_container(tmp_path, client):
    lp = LogProvider(tmp_path, client)
    await run_pod(client, tmp_path, pod_doc("multi", containers=("a", "b"), inits=("setup",)), T0,
                  {"setup": ["ok\n"], "a": ["A\n"]})
    await client.delete("Pod", "multi", "default")
    with pytest.raises(BadRequest) as e:
        await lp.read("default", "multi")
    assert str(e.value) == ("a container name must be specified for pod multi, choose one of: [a b] "
                            "or one of the init containers: [setup]")
    assert await lp.read("default", "multi", "setup") == "ok\n"
    with pytest.raises(BadRequest) as e:
        await lp.read("default", "multi", "b")
    assert str(e.value) == 'container "b" in pod "multi" never started before the pod was deleted'
    with pytest.raises(BadRequest) as e:
        await lp.read("default", "multi", "a", previous=True)
    assert str(e.value) == 'previous terminated container "a" in pod "multi" not found'


# --------------------------------------------------------------------------- provider: job logs


async def _job_with_history(client, home) -> dict:
    """pytest: master (live), worker-0 recreated (first instance deleted), worker-10
    deleted; plus another job's pod that must not show."""
    job = await client.create(job_doc("pytest"))
    other = await client.create(job_doc("other"))
    await run_pod(client, home, pod_doc("pytest-worker-0", job, inits=("init-pytorch",)), T0,
                  {"init-pytorch": ["waiting\n"], "pytorch": ["w0 first\n"]})
    await client.delete("Pod", "pytest-worker-0", "default")
    await run_pod(client, home, pod_doc("pytest-worker-10", job), T0, {"pytorch": ["w10 only"]})
    await client.delete("Pod", "pytest-worker-10", "default")
    await run_pod(client, home, pod_doc("pytest-worker-0", job), T0 + timedelta(seconds=2),
                  {"pytorch": ["w0 second a\nw0 second b\n"]})
    await run_pod(client, home, pod_doc("pytest-master-0", job), T0 + timedelta(seconds=1),
                  {"pytorch": ["m try0\n", "m try1\n"]})
    await run_pod(client, home, pod_doc("other-master-0", other), T0, {"pytorch": ["not mine\n"]})
    return job


async def test_job_logs_every_instance_in_order_with_headers(tmp_path, client):
    job = await _job_with_history(client, tmp_path)
    lp = LogProvider(tmp_path, client)
    text = "".join([c async for c in lp.job_logs("default", "PyTorchJob", "pytest")])
    uids = {r.name + str(r.started): r.uid[:8] for r in PodRecords(tmp_path).scan("default")}
    w0_old, w0_new = uids["pytest-worker-0" + str(T0.timestamp())], uids[
        "pytest-worker-0" + str((T0 + timedelta(seconds=2)).timestamp())]
    master, w10 = uids["pytest-master-0" + str((T0 + timedelta(seconds=1)).timestamp())], uids[
        "pytest-worker-10" + str(T0.timestamp())]
    assert text == (
        f"==> pytest-master-0/pytorch (instance {master}, restart 0) <==\nm try0\n\n"
        f"==> pytest-master-0/pytorch (instance {master}, restart 1) <==\nm try1\n\n"
        f"==> pytest-worker-0/init-pytorch (instance {w0_old}, restart 0, pod deleted) <==\nwaiting\n\n"
        f"==> pytest-worker-0/pytorch (instance {w0_old}, restart 0, pod deleted) <==\nw0 first\n\n"
        f"==> pytest-worker-0/pytorch (instance {w0_new}, restart 0) <==\nw0 second a\nw0 second b\n\n"
        f"==> pytest-worker-10/pytorch (instance {w10}, restart 0, pod deleted) <==\nw10 only\n")
    tail = "".join([c async for c in lp.job_logs("default", "PyTorchJob", "pytest", "pytorch", tail_lines=1)])
    assert "init-pytorch" not in tail and "w0 second a" not in tail and "w0 second b\n" in tail
    assert tail.count("==> ") == 5
    with pytest.raises(BadRequest) as e:
        [c async for c in lp.job_logs("default", "PyTorchJob", "pytest", "nope")]
    assert str(e.value) == ("container nope is not valid for any pod of PyTorchJob pytest: "
                            "choose one of: [init-pytorch pytorch]")
    with pytest.raises(NotFound):
        [c async for c in lp.job_logs("default", "PyTorchJob", "missing")]
    with pytest.raises(NotFound):
        [c async for c in lp.job_logs("default", "TFJob", "pytest")]
    assert [b.record.name for b in job_blocks(PodRecords(tmp_path).scan(), job["metadata"]["uid"])] == [
        "pytest-master-0", "pytest-master-0", "pytest-worker-0", "pytest-worker-0", "pytest-worker-0",
        "pytest-worker-10"]


async def test_job_logs_follow_until_the_job_finished_and_its_pods_stopped(tmp_path, client):
    job = await client.create(job_doc("pytest"))
    lp = LogProvider(tmp_path, client, poll_interval=0.01)
    pod = await run_pod(client, tmp_path, pod_doc("pytest-master-0", job), T0, {"pytorch": ["old\nline 1\n"]})
    log = container_log_path(tmp_path, "default", "pytest-master-0", pod["metadata"]["uid"], "pytorch", 0)
    pod["status"] = {"phase": "Running"}
    pod = await client.update_status(pod)
    chunks: list[str] = []

    async def consume():
        async for c in lp.job_logs("default", "PyTorchJob", "pytest", follow=True, tail_lines=1):
            chunks.append(c)

    task = asyncio.create_task(consume())
    await wait_until(lambda: "line 1\n" in "".join(chunks), what="the tail of the existing log")
    with log.open("a") as f:
        f.write("line 2\npartial")
    await wait_until(lambda: "partial" in "".join(chunks), what="appended output")
    j = await client.get("PyTorchJob", "pytest", "default")
    j["status"] = {"conditions": [{"type": "Succeeded", "status": "True", "reason": "PyTorchJobSucceeded"}]}
    await client.update_status(j)
    await asyncio.sleep(0.05)
    assert not task.done()  # the job is finished, but its master still runs
    pod["status"] = {"phase": "Succeeded"}
    await client.update_status(pod)
    await asyncio.wait_for(task, 5)
    uid8 = pod["metadata"]["uid"][:8]
    assert "".join(chunks) == (f"==> pytest-master-0/pytorch (instance {uid8}, restart 0) <==\n"
                               "line 1\nline 2\npartial\n")


# --------------------------------------------------------------------------- janitor


async def test_janitor_keeps_logs_of_deleted_pods_until_the_job_is_deleted(tmp_path, client):
    job = await client.create(job_doc("pytest"))
    tf = await client.create(job_doc("tfjob", kind="TFJob"))
    gone = await run_pod(client, tmp_path, pod_doc("pytest-worker-0", job), T0, {"pytorch": ["w\n"]})
    alive = await run_pod(client, tmp_path, pod_doc("pytest-master-0", job), T0, {"pytorch": ["m\n"]})
    tf_pod = await run_pod(client, tmp_path, pod_doc("tfjob-worker-0", tf), T0, {"pytorch": ["t\n"]})
    lonely = await run_pod(client, tmp_path, pod_doc("lonely"), T0, {"pytorch": ["l\n"]})
    kept_lonely = await run_pod(client, tmp_path, pod_doc("kept"), T0, {"pytorch": ["k\n"]})
    j = LogJanitor(client, tmp_path)

    def exists(p: dict) -> bool:
        m = p["metadata"]
        return pod_dir(tmp_path, "default", m["name"], m["uid"]).exists()

    await client.delete("Pod", "pytest-worker-0", "default")
    assert await j.pod_deleted(gone["metadata"]["uid"]) == 0  # its job still exists
    await client.delete("Pod", "lonely", "default")
    assert await j.pod_deleted(lonely["metadata"]["uid"]) == 1  # no job: gone with the pod
    assert not exists(lonely) and exists(gone) and exists(kept_lonely)

    await client.delete("PyTorchJob", "pytest", "default")
    assert await j.job_deleted(job["metadata"]["uid"]) == 1  # the master is still being deleted
    assert not exists(gone) and exists(alive) and exists(tf_pod)
    await client.delete("Pod", "pytest-master-0", "default")
    assert await j.pod_deleted(alive["metadata"]["uid"]) == 1
    assert not exists(alive) and exists(tf_pod) and exists(kept_lonely)
    assert await j.pod_deleted("no-such-uid") == 0


async def test_janitor_sweeps_crash_leftovers_at_start_and_follows_deletions(tmp_path, client):
    job = await client.create(job_doc("pytest"))
    old_job = await client.create(job_doc("old"))
    left = await run_pod(client, tmp_path, pod_doc("old-worker-0", old_job), T0, {"pytorch": ["x\n"]})
    gone_pod = await run_pod(client, tmp_path, pod_doc("pytest-worker-0", job), T0, {"pytorch": ["w\n"]})
    master = await run_pod(client, tmp_path, pod_doc("pytest-master-0", job), T0, {"pytorch": ["m\n"]})
    stray = await run_pod(client, tmp_path, pod_doc("stray"), T0, {"pytorch": ["s\n"]})
    # While no janitor ran: the old job and its pod, the stray pod and a worker were deleted.
    for kind, name in (("Pod", "old-worker-0"), ("PyTorchJob", "old"), ("Pod", "stray"),
                       ("Pod", "pytest-worker-0")):
        await client.delete(kind, name, "default")
    legacy = tmp_path / "pods" / "default_legacy_0123abcd-0000-4000-8000-00000000000f" / "main"
    legacy.mkdir(parents=True)
    (legacy / "0.log").write_text("no record\n")

    def exists(p: dict) -> bool:
        m = p["metadata"]
        return pod_dir(tmp_path, "default", m["name"], m["uid"]).exists()

    j = LogJanitor(client, tmp_path)
    task = asyncio.create_task(j.run())
    try:
        await wait_until(lambda: j.removed == 3, what="the start-up sweep")
        assert not exists(left) and not exists(stray) and not legacy.parent.exists()
        assert exists(gone_pod) and exists(master)  # their job exists
        await client.delete("PyTorchJob", "pytest", "default")
        await wait_until(lambda: not exists(gone_pod), what="the deleted job's deleted pod's logs removed")
        assert exists(master)
        await client.delete("Pod", "pytest-master-0", "default")
        await wait_until(lambda: not exists(master), what="the last pod's logs removed with it")
        assert j.removed == 5
    finally:
        await j.stop()
        await asyncio.wait_for(task, 5)


def test_a_record_reads_its_appended_finish_note_and_survives_a_torn_line(tmp_path):
    from datetime import datetime, timezone

    from phalanx.node.podrecords import mark_finished, parse_record
    pdir = tmp_path / "default_p_11111111-2222-3333-4444-555555555555"
    pdir.mkdir()
    # A record as older agents wrote it: one line, no newline at its end.
    (pdir / POD_META).write_text(json.dumps({"name": "p", "uid": "u", "finishedAt": None}))
    first = datetime(2026, 1, 1, tzinfo=timezone.utc)
    mark_finished(pdir, first)
    mark_finished(pdir, datetime(2026, 1, 2, tzinfo=timezone.utc))  # the first finish stays
    text = (pdir / POD_META).read_text()
    assert len(text.splitlines()) == 2
    assert parse_record(text) == {"name": "p", "uid": "u", "finishedAt": first.isoformat()}
    assert parse_record(text + '{"finishedAt": "2026-0') == parse_record(text)  # a torn note is ignored
    assert parse_record('{"name": ') is None and parse_record("[1]") is None
    mark_finished(tmp_path / "missing", first)  # never fails, creates nothing
    assert not (tmp_path / "missing").exists()
