"""Per-pod cost of the node agent and the local runtime on the event loop
(issue 9): the slow file work (new files and directories) of a container's
start and of forgetting a pod happens in threads, an exit seen while the
exec context is being written leaves no stale context, and a Service event
wakes only the pods it can select."""
from __future__ import annotations

import asyncio
import io
import json
import os
import threading
import uuid

import pytest

from phalanx.api.constants import LABEL_JOB_NAME
from phalanx.node import execctx
from phalanx.node import instancefiles as files
from phalanx.node.agent import NodeAgent
from phalanx.node.logs import pod_dir
from phalanx.node.network import LocalNetwork
from phalanx.node.podrecords import POD_META, parse_record
from phalanx.node.podworker import PodWorker
from phalanx.node.processes import ProcessRuntime
from phalanx.node.volumes import ROOT_DIR
from phalanx.objects.clock import Clock


def make_pod(command: list[str], name: str = "p", ns: str = "default", labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "uid": str(uuid.uuid4()), "labels": labels or {},
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": "n1", "containers": [{"name": "main", "image": "x", "command": command}]}}


class Creations:
    """Records which thread creates files and directories (os.open with
    O_CREAT, io.open for writing, os.mkdir)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.on_loop: list[str] = []
        self.elsewhere: list[str] = []
        self.loop_thread = threading.get_ident()
        real_open, real_io_open, real_mkdir = os.open, io.open, os.mkdir

        def note(path: object) -> None:
            (self.on_loop if threading.get_ident() == self.loop_thread else self.elsewhere).append(str(path))

        def fake_open(path, flags, *a, **kw):
            if flags & os.O_CREAT:
                note(path)
            return real_open(path, flags, *a, **kw)

        def fake_io_open(file, mode="r", *a, **kw):
            if isinstance(file, (str, os.PathLike)) and any(c in mode for c in "wax+"):
                note(file)
            return real_io_open(file, mode, *a, **kw)

        def fake_mkdir(path, *a, **kw):
            note(path)
            return real_mkdir(path, *a, **kw)

        monkeypatch.setattr(os, "open", fake_open)
        monkeypatch.setattr(io, "open", fake_io_open)
        monkeypatch.setattr(os, "mkdir", fake_mkdir)


async def _until(pred, timeout: float = 5.0, what: str = "condition") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not pred():
        assert asyncio.get_running_loop().time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def test_a_start_and_forget_create_no_file_on_the_event_loop(tmp_path, monkeypatch):
    rt = ProcessRuntime(tmp_path, Clock(), node_name="n1", cgroups="off")
    pod = make_pod(["sleep", "30"])
    uid = pod["metadata"]["uid"]
    try:
        first = await rt.start(make_pod(["true"], name="warm"), "main")  # the fork server starts once
        await asyncio.wait_for(first.done.wait(), 10)
        created = Creations(monkeypatch)
        inst = await rt.start(pod, "main")
        assert inst.running
        pdir = pod_dir(tmp_path, "default", "p", uid)
        cdir = pdir / "main"
        # Everything a start leaves on disk is there when start returns ...
        assert json.loads((pdir / POD_META).read_text())["uid"] == uid
        assert (pdir / ROOT_DIR).is_dir()
        assert files.record_path(inst.log_path).exists() and inst.log_path.exists()
        ctx = execctx.read_context(cdir)
        assert ctx is not None and ctx.container_id == inst.container_id and ctx.pid == inst.pid
        # ... and was made by another thread.
        assert created.on_loop == []
        assert any(p.endswith(POD_META + ".tmp") for p in created.elsewhere)
        assert any(p.endswith("0.pid") for p in created.elsewhere)
        assert any(p.endswith("0.log") for p in created.elsewhere)

        await rt.kill_pod(uid, 0)
        assert inst.termination is not None
        assert execctx.read_context(cdir) is None  # the exec context went with the container
        await rt.forget_async(uid)
        assert created.on_loop == []
        assert not files.record_path(inst.log_path).exists()
        assert inst.log_path.exists()  # logs stay
        text = (pdir / POD_META).read_text()
        assert json.loads(text.splitlines()[0])["finishedAt"] is None  # the record as first written ...
        assert parse_record(text)["finishedAt"]  # ... and the finish noted after it, in the same file
        assert not (pdir / (POD_META + ".tmp")).exists()
    finally:
        await rt.shutdown(0)


async def test_an_exit_while_the_exec_context_is_written_leaves_no_context(tmp_path, monkeypatch):
    exited = threading.Event()
    rt = ProcessRuntime(tmp_path, Clock(), node_name="n1", cgroups="off", on_exit=lambda uid: exited.set())
    real_write = execctx.write_context

    def slow_write(container_dir, ctx):  # the exit is handled before the file lands
        assert exited.wait(10), "the container never exited"
        return real_write(container_dir, ctx)

    monkeypatch.setattr(execctx, "write_context", slow_write)
    pod = make_pod(["sleep", "0.3"])
    try:
        inst = await rt.start(pod, "main")
        assert inst.termination is not None and inst.termination.exit_code == 0
        cdir = inst.log_path.parent
        assert not execctx.context_path(cdir).exists(), "a stale exec context outlived its container"
    finally:
        await rt.shutdown(0)


async def test_a_container_that_exits_at_once_leaves_no_context_and_its_exit(tmp_path):
    rt = ProcessRuntime(tmp_path, Clock(), node_name="n1", cgroups="off")
    pod = make_pod(["sh", "-c", "exit 3"])
    try:
        inst = await rt.start(pod, "main")
        await asyncio.wait_for(inst.done.wait(), 10)
        assert inst.termination is not None and inst.termination.exit_code == 3
        assert not execctx.context_path(inst.log_path.parent).exists()
        assert json.loads(files.status_path(inst.log_path).read_text())["exitCode"] == 3
    finally:
        await rt.shutdown(0)


async def test_a_command_that_cannot_run_still_records_the_pod_and_logs_why(tmp_path):
    rt = ProcessRuntime(tmp_path, Clock(), node_name="n1", cgroups="off")
    pod = make_pod([])  # no command: the image's entrypoint cannot be run here
    pod["spec"]["containers"][0].pop("command")
    try:
        inst = await rt.start(pod, "main")
        assert inst.termination is not None and inst.termination.permanent
        assert inst.log_path.read_text().strip()
        pdir = pod_dir(tmp_path, "default", "p", pod["metadata"]["uid"])
        assert json.loads((pdir / POD_META).read_text())["name"] == "p"
    finally:
        await rt.shutdown(0)


def test_read_json_reads_objects_only(tmp_path):
    p = tmp_path / "0.status"
    assert files.read_json(p) is None  # missing
    p.write_text('{"pid": 12, "exitCode": 0}')
    assert files.read_json(p) == {"pid": 12, "exitCode": 0}
    p.write_text("[1, 2]")
    assert files.read_json(p) is None
    p.write_text('{"pid": ')
    assert files.read_json(p) is None  # half written
    p.write_bytes(b"\xff\xfe\x00")
    assert files.read_json(p) is None
    big = {"env": {f"K{i}": "v" * 100 for i in range(2000)}}  # more than one read
    p.write_text(json.dumps(big))
    assert files.read_json(p) == big


# --------------------------------------------------------------------------- Service events


@pytest.fixture
def agent(tmp_path):
    a = NodeAgent(None, Clock(), "n1", tmp_path, LocalNetwork(tmp_path / "net"))  # type: ignore[arg-type]
    return a


def add_worker(agent: NodeAgent, name: str, ns: str = "default", job: str | None = None) -> PodWorker:
    pod = make_pod(["true"], name=name, ns=ns, labels={LABEL_JOB_NAME: job} if job else {"app": name})
    w = PodWorker(agent, pod)  # not started: only its wake-up is looked at
    agent._workers[w.uid] = w
    agent._file_worker(w)
    return w


def service(name: str, selector: dict | None, ns: str = "default") -> dict:
    return {"kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterIP": "None", **({"selector": selector} if selector is not None else {})}}


def woken(workers: dict[str, PodWorker]) -> list[str]:
    out = sorted(n for n, w in workers.items() if w._wake.is_set())
    for w in workers.values():
        w._wake.clear()
    return out


async def test_a_service_event_wakes_only_the_pods_it_can_select(agent):
    ws = {"a0": add_worker(agent, "a0", job="a"), "a1": add_worker(agent, "a1", job="a"),
          "b0": add_worker(agent, "b0", job="b"), "x": add_worker(agent, "x"),
          "o0": add_worker(agent, "o0", ns="other", job="a")}
    sa = service("a", {LABEL_JOB_NAME: "a", "replica": "0"})
    agent._on_service("ADDED", sa, None)
    assert woken(ws) == ["a0", "a1"]
    # The selector moves to job b: the pods of a (names to unpublish) and of b.
    sb = service("a", {LABEL_JOB_NAME: "b"})
    agent._on_service("MODIFIED", sb, sa)
    assert woken(ws) == ["a0", "a1", "b0"]
    agent._on_service("DELETED", sb, sb)
    assert woken(ws) == ["b0"]
    # A selector that does not name a job may select any pod of its namespace.
    agent._on_service("ADDED", service("any", {"app": "x"}), None)
    assert woken(ws) == ["a0", "a1", "b0", "x"]
    # One that selects nothing wakes nobody.
    agent._on_service("ADDED", service("none", None), None)
    assert woken(ws) == []
    agent._on_service("ADDED", service("c", {LABEL_JOB_NAME: "a"}, ns="other"), None)
    assert woken(ws) == ["o0"]


async def test_a_pod_whose_job_label_changes_is_refiled_and_forgotten_when_done(agent):
    w = add_worker(agent, "p0", job="a")
    moved = dict(w.pod, metadata={**w.pod["metadata"], "labels": {LABEL_JOB_NAME: "b"}, "resourceVersion": "5"})
    w.update(moved)
    agent._file_worker(w)
    agent._on_service("ADDED", service("a", {LABEL_JOB_NAME: "a"}), None)
    assert not w._wake.is_set()
    agent._on_service("ADDED", service("b", {LABEL_JOB_NAME: "b"}), None)
    assert w._wake.is_set()
    agent.worker_done(w.uid)
    assert agent._by_job == {}


async def test_without_the_fork_server_the_shim_still_finds_its_directories(tmp_path):
    rt = ProcessRuntime(tmp_path, Clock(), node_name="n1", cgroups="off", use_shimd=False)
    pod = make_pod(["sh", "-c", "echo hi"])
    try:
        inst = await rt.start(pod, "main")
        await asyncio.wait_for(inst.done.wait(), 20)
        assert inst.termination is not None and inst.termination.exit_code == 0
        pdir = pod_dir(tmp_path, "default", "p", pod["metadata"]["uid"])
        assert (pdir / POD_META).exists() and (pdir / ROOT_DIR).is_dir()
        assert inst.log_path.read_text() == "hi\n"
    finally:
        await rt.shutdown(0)


async def test_a_pod_event_no_newer_than_the_held_pod_wakes_nothing(agent):
    """The echo of the worker's own status write (same resourceVersion) or an older
    version is not news; a newer version, or the pod's deletion, wakes the worker."""
    w = add_worker(agent, "p0", job="a")
    held = dict(w.pod, metadata={**w.pod["metadata"], "resourceVersion": "7"}, status={"phase": "Running"})
    w.update(held)
    ws = {"p0": w}
    agent._on_pod("MODIFIED", dict(held), None)
    assert woken(ws) == []
    older = dict(held, metadata={**held["metadata"], "resourceVersion": "6"}, status={"phase": "Pending"})
    agent._on_pod("MODIFIED", older, None)
    assert woken(ws) == [] and w.pod["status"] == {"phase": "Running"}  # the older one is not taken
    newer = dict(held, metadata={**held["metadata"], "resourceVersion": "8", "deletionTimestamp": "t"})
    agent._on_pod("MODIFIED", newer, None)
    assert woken(ws) == ["p0"] and w.pod is newer
    # A version with no number to compare is not taken for an echo.
    agent._on_pod("MODIFIED", dict(newer, metadata={**newer["metadata"], "resourceVersion": ""}), None)
    assert woken(ws) == ["p0"]
    agent._on_pod("DELETED", dict(newer), None)
    assert woken(ws) == ["p0"] and w.removed
