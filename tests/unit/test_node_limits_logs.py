"""Limits (cgroup files against a fake cgroup tree) and log files."""
from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import psutil
import pytest

from phalanx.node.limits import Limits, charged_rss, container_limits, detect_cgroups, over_limit, tree_rss
from phalanx.node.logs import (
    LogProvider,
    container_log_path,
    find_logs,
    follow,
    pod_dir,
    read_log,
)
from phalanx.objects.errors import BadRequest, NotFound

# --------------------------------------------------------------------------- limits


def test_container_limits_parse_quantities():
    lim = container_limits({"resources": {"limits": {"cpu": "500m", "memory": "50Mi"}}})
    assert lim == Limits(memory=50 * 2**20, cpu=0.5)
    assert container_limits({}) == Limits() and not Limits().any
    assert container_limits({"resources": {"limits": {"memory": "garbage"}}}).memory is None


def test_over_limit_uses_tree_rss():
    assert over_limit(1, 100, rss=lambda pid: 101)
    assert not over_limit(1, 100, rss=lambda pid: 100)


STATUS = "Name:\tpython3\nVmRSS:\t 1058116 kB\nRssAnon:\t  357168 kB\nRssFile:\t  700948 kB\nRssShmem:\t      12 kB\n"


def test_charged_rss_is_anonymous_plus_shared_memory_not_mapped_files():
    assert charged_rss(STATUS) == (357168 + 12) * 1024
    assert charged_rss("Name:\tx\nVmRSS:\t 10 kB\n") is None  # a kernel without the breakdown
    assert charged_rss(STATUS.replace("RssShmem:\t      12 kB", "RssShmem:\t 12 pages")) is None


MiB = 1 << 20


def _child(tmp_path: Path, code: str) -> subprocess.Popen:
    """A Python child that runs ``code``, prints "ready" and waits for its stdin to close."""
    proc = subprocess.Popen([sys.executable, "-c", code + "\nprint('ready', flush=True)\nsys.stdin.read()\n"],
                            cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    return proc


def test_tree_rss_leaves_out_mapped_file_pages_and_counts_anonymous_memory(tmp_path):
    """A mapped file's resident pages (reclaimable: torch's libraries are ~700 MB of
    them) do not count against a limit; memory the process allocated does."""
    (tmp_path / "data").write_bytes(b"\1" * (96 * MiB))
    mapped = _child(tmp_path, "import mmap, sys\nf = open('data', 'rb')\n"
                              "m = mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ)\n"
                              "total = sum(m[i] for i in range(0, len(m), 4096))")
    allocated = _child(tmp_path, "import sys\nx = bytearray(96 << 20)\nx[::4096] = b'1' * len(x[::4096])")
    try:
        assert psutil.Process(mapped.pid).memory_info().rss > 96 * MiB  # the file is resident...
        assert tree_rss(mapped.pid) < 48 * MiB  # ...and not charged
        assert tree_rss(allocated.pid) > 96 * MiB
    finally:
        for proc in (mapped, allocated):
            proc.communicate(timeout=30)


def fake_v2(root: Path, own: str = "/agent") -> Path:
    d = root / own.lstrip("/")
    d.mkdir(parents=True)
    (root / "cgroup.controllers").write_text("cpu memory pids\n")
    (d / "cgroup.controllers").write_text("cpu memory pids\n")
    (d / "cgroup.subtree_control").write_text("")
    return d


def test_cgroup_v2_driver_writes_limits(tmp_path):
    own = fake_v2(tmp_path)
    drv = detect_cgroups("auto", root=tmp_path, proc_cgroup="0::/agent\n")
    assert drv is not None and drv.version == 2 and drv.enforces_memory
    assert (own / "cgroup.subtree_control").read_text() == "+memory +cpu"
    cg = drv.create("default_p_uid_main_0", Limits(memory=52428800, cpu=1.5))
    d = own / "phalanx" / "default_p_uid_main_0"
    assert (d / "memory.max").read_text() == "52428800"
    assert (d / "cpu.max").read_text() == "150000 100000"
    assert not cg.oom_killed()
    (d / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert cg.oom_killed()
    with pytest.raises(ValueError):
        drv.create("../escape", Limits(memory=1))


def test_cgroup_v2_without_memory_controller_means_watchdog(tmp_path):
    own = fake_v2(tmp_path)
    (own / "cgroup.controllers").write_text("cpu pids\n")
    assert detect_cgroups("auto", root=tmp_path, proc_cgroup="0::/agent\n") is None


def test_cgroup_v1_only_when_asked(tmp_path):
    for c in ("memory", "cpu"):
        (tmp_path / c / "job").mkdir(parents=True)
        (tmp_path / c / "cgroup.procs").write_text("")
    proc = "4:memory:/job\n1:cpu:/job\n0::/\n"
    assert detect_cgroups("auto", root=tmp_path, proc_cgroup=proc) is None
    assert detect_cgroups("off", root=tmp_path, proc_cgroup=proc) is None
    drv = detect_cgroups("v1", root=tmp_path, proc_cgroup=proc)
    assert drv is not None and drv.version == 1
    cg = drv.create("c1", Limits(memory=1000, cpu=0.25))
    assert (tmp_path / "memory/job/phalanx/c1/memory.limit_in_bytes").read_text() == "1000"
    assert (tmp_path / "cpu/job/phalanx/c1/cpu.cfs_quota_us").read_text() == "25000"
    (tmp_path / "memory/job/phalanx/c1/memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n")
    assert cg.oom_killed()


# --------------------------------------------------------------------------- logs


UID = "3a766a19-27d1-4f2a-8f7b-eb199e9ef277"


def write_instance(home: Path, n: int, text: str, name: str = "p", container: str = "main", uid: str = UID) -> Path:
    p = container_log_path(home, "default", name, uid, container, n)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text)
    return p


def test_log_layout_and_name_validation(tmp_path):
    p = container_log_path(tmp_path, "default", "pytest-worker-0", UID, "pytorch", 2)
    assert p == tmp_path / "pods" / f"default_pytest-worker-0_{UID}" / "pytorch" / "2.log"
    for bad in [("../x", "p", UID, "c"), ("default", "a/b", UID, "c"), ("default", "p", "../u", "c"),
                ("default", "p", UID, "..")]:
        with pytest.raises(ValueError):
            container_log_path(tmp_path, *bad, 0)
    long = "a" * 253
    assert len(pod_dir(tmp_path, "default", long, UID).name) <= 255


def test_read_log_tail(tmp_path):
    p = tmp_path / "x.log"
    p.write_bytes(b"a\nb\nc\n")
    assert read_log(p) == "a\nb\nc\n"
    assert read_log(p, tail=2) == "b\nc\n"
    assert read_log(p, tail=10) == "a\nb\nc\n"
    assert read_log(p, tail=0) == ""
    p.write_bytes(b"a\nb\xff")
    assert read_log(p, tail=1) == "b\ufffd"
    assert read_log(tmp_path / "missing.log") == ""


def test_find_logs_current_and_previous(tmp_path):
    for n in (0, 1, 10, 2):
        write_instance(tmp_path, n, f"run {n}\n")
    cur, prev = find_logs(tmp_path, "default", "p", "main", uid=UID)
    assert (cur.name, prev.name) == ("10.log", "2.log")
    cur2, _ = find_logs(tmp_path, "default", "p", "main")
    assert cur2 == cur
    assert find_logs(tmp_path, "default", "other", "main") == (None, None)


async def test_follow_yields_growth_until_done(tmp_path):
    p = tmp_path / "f.log"
    p.write_text("one\n")
    done = asyncio.Event()

    async def writer():
        await asyncio.sleep(0.05)
        with p.open("a") as f:
            f.write("two\n")
        await asyncio.sleep(0.05)
        with p.open("a") as f:
            f.write("thr")
        done.set()

    task = asyncio.create_task(writer())
    chunks = [c async for c in follow(p, is_done=done.is_set, poll_interval=0.01)]
    await task
    assert "".join(chunks) == "one\ntwo\nthr"


class FakeClient:
    def __init__(self, pods: dict[str, dict]) -> None:
        self.pods = pods

    async def get(self, kind, name, namespace=None):
        if name not in self.pods:
            raise NotFound("pods", name)
        return self.pods[name]


def mkpod(name: str, containers=("main",), inits=(), node="las1", status=None) -> dict:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "default", "uid": UID},
            "spec": {"nodeName": node, "containers": [{"name": c} for c in containers],
                     "initContainers": [{"name": c} for c in inits]},
            "status": status or {}}


async def test_log_provider_reads_and_explains(tmp_path):
    write_instance(tmp_path, 0, "first\n")
    write_instance(tmp_path, 1, "second\n")
    lp = LogProvider(tmp_path, FakeClient({
        "p": mkpod("p"),
        "multi": mkpod("multi", containers=("pytorch", "side"), inits=("init-pytorch",)),
        "unbound": mkpod("unbound", node=None),
        "fresh": mkpod("fresh", status={"containerStatuses": [
            {"name": "main", "state": {"waiting": {"reason": "PodInitializing"}}}]}),
    }))
    assert await lp.read("default", "p") == "second\n"
    assert await lp.read("default", "p", previous=True) == "first\n"
    assert await lp.read("default", "unbound") == ""
    annotated = mkpod("p", containers=("side", "main"))
    annotated["metadata"]["annotations"] = {"kubectl.kubernetes.io/default-container": "main"}
    assert await LogProvider(tmp_path, FakeClient({"p": annotated})).read("default", "p") == "second\n"
    with pytest.raises(NotFound):
        await lp.read("default", "nope")
    with pytest.raises(BadRequest) as e:
        await lp.read("default", "multi")
    assert str(e.value) == ("a container name must be specified for pod multi, choose one of: [pytorch side] "
                            "or one of the init containers: [init-pytorch]")
    with pytest.raises(BadRequest) as e:
        await lp.read("default", "p", "other")
    assert str(e.value) == "container other is not valid for pod p"
    with pytest.raises(BadRequest) as e:
        await lp.read("default", "fresh")
    assert str(e.value) == 'container "main" in pod "fresh" is waiting to start: PodInitializing'


async def test_log_provider_previous_missing(tmp_path):
    write_instance(tmp_path, 0, "only\n", name="one")
    lp = LogProvider(tmp_path, FakeClient({"one": mkpod("one")}))
    with pytest.raises(BadRequest) as e:
        await lp.read("default", "one", previous=True)
    assert str(e.value) == 'previous terminated container "main" in pod "one" not found'


async def test_log_provider_follow_stops_when_container_stops(tmp_path):
    path = write_instance(tmp_path, 0, "a\n", name="f")
    pod = mkpod("f", status={"containerStatuses": [{"name": "main", "state": {"running": {}}}]})
    lp = LogProvider(tmp_path, FakeClient({"f": pod}), poll_interval=0.01)

    async def finish():
        await asyncio.sleep(0.05)
        with path.open("a") as f:
            f.write("b\n")
        pod["status"] = {"containerStatuses": [{"name": "main", "state": {"terminated": {"exitCode": 0}}}]}

    task = asyncio.create_task(finish())
    out = "".join([c async for c in lp.follow("default", "f")])
    await task
    assert out == "a\nb\n"
    assert os.path.exists(path)


# --------------------------------------------------------------------------- GPUs


def test_gpu_allocator_first_fit_stable_and_released():
    from phalanx.node.gpus import GpuAllocator, gpu_count

    g = GpuAllocator(4)
    assert g.allocate(("u1", "a"), 2) == [0, 1]
    assert g.allocate(("u2", "a"), 1) == [2]
    assert g.allocate(("u1", "a"), 2) == [0, 1]  # a restart keeps its devices
    assert g.allocate(("u3", "a"), 2) is None
    g.release_pod("u1")
    assert g.allocate(("u3", "a"), 2) == [0, 1]
    assert g.allocate(("u4", "a"), 0) == []
    assert gpu_count({"resources": {"limits": {"nvidia.com/gpu": "2"}}}) == 2
    assert gpu_count({"resources": {"requests": {"nvidia.com/gpu": 1}}}) == 1
    assert gpu_count({}) == 0 and gpu_count({"resources": {"limits": {"nvidia.com/gpu": "x"}}}) == 0
