"""GPU detection, per-node device indices, the allocator, and `gpus:` in cluster.yaml."""
from __future__ import annotations

import stat

import pytest

from phalanx import config as config_mod
from phalanx.config import ConfigError, NodeConfig, parse_config
from phalanx.node.gpus import GpuAllocator, detect_gpus, node_devices


def node(name: str, gpus: object = None) -> dict:
    cap = {"cpu": "4", "memory": "1Gi"}
    if gpus is not None:
        cap["nvidia.com/gpu"] = gpus
    return {"metadata": {"name": name}, "status": {"capacity": cap, "allocatable": dict(cap)}}


def fake_smi(tmp_path, output: str, code: int = 0) -> str:
    """An executable that prints ``output`` and exits ``code``, like nvidia-smi -L."""
    out = tmp_path / f"smi-output-{code}"
    out.write_text(output)
    path = tmp_path / f"nvidia-smi-{code}"
    path.write_text(f'#!/bin/sh\ncat "{out}"\nexit {code}\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


# --------------------------------------------------------------------------- detect_gpus


def test_detect_counts_the_drivers_proc_entries(tmp_path):
    proc = tmp_path / "gpus"
    for bus in ("0000:01:00.0", "0000:02:00.0", ".hidden"):
        (proc / bus).mkdir(parents=True)
    assert detect_gpus(str(proc), smi=None) == 2


def test_detect_falls_back_to_nvidia_smi(tmp_path):
    missing = str(tmp_path / "no-driver")
    smi = fake_smi(tmp_path, "GPU 0: A100 (UUID: GPU-1)\nGPU 1: A100 (UUID: GPU-2)\n")
    assert detect_gpus(missing, smi=smi) == 2
    assert detect_gpus(missing, smi=fake_smi(tmp_path, "GPU 0: but the exit code says no\n", code=9)) == 0
    assert detect_gpus(missing, smi=None) == 0
    assert detect_gpus(missing, smi=str(tmp_path / "not-there")) == 0


def test_detect_on_this_machine_does_not_fail():
    assert detect_gpus() >= 0


# --------------------------------------------------------------------------- node_devices


def test_each_node_takes_the_next_indices_in_name_order():
    nodes = [node("node-c", "1"), node("node-a", "2"), node("node-b"), node("node-d", "3")]
    assert node_devices(nodes, "node-a") == [0, 1]
    assert node_devices(nodes, "node-b") == []
    assert node_devices(nodes, "node-c") == [2]
    assert node_devices(nodes, "node-d") == [3, 4, 5]
    assert node_devices(nodes, "node-z") == []
    assert node_devices([], "node-a") == []


def test_unreadable_gpu_counts_count_as_none():
    nodes = [node("a", "x"), node("b", "-2"), node("c", "1"), {"metadata": {"name": "d"}}]
    assert node_devices(nodes, "c") == [0]
    assert node_devices(nodes, "a") == [] and node_devices(nodes, "d") == []


# --------------------------------------------------------------------------- GpuAllocator


def test_allocator_hands_out_only_its_nodes_devices():
    g = GpuAllocator([3, 2])
    assert (g.total, g.devices) == (2, [2, 3])
    assert g.allocate(("u1", "a"), 1) == [2]
    assert g.allocate(("u2", "a"), 1) == [3]
    assert g.allocate(("u3", "a"), 1) is None  # never shared
    assert g.allocate(("u1", "a"), 1) == [2]  # a restart keeps its device
    g.release_pod("u1")
    assert g.allocate(("u3", "a"), 1) == [2]
    assert g.in_use() == {("u2", "a"): [3], ("u3", "a"): [2]}


def test_allocator_from_a_count_and_of_none():
    assert GpuAllocator(3).devices == [0, 1, 2]
    assert GpuAllocator(-1).total == 0 and GpuAllocator([]).total == 0
    assert GpuAllocator(0).allocate(("u", "c"), 1) is None


# --------------------------------------------------------------------------- cluster.yaml


def test_configured_gpus_are_advertised():
    cfg = parse_config({"nodes": [{"name": "a", "cpu": 2, "memory": "1Gi", "gpus": 2},
                                  {"name": "b", "cpu": 2, "memory": "1Gi"}]})
    assert cfg.nodes[0].capacity()["nvidia.com/gpu"] == "2"
    assert "nvidia.com/gpu" not in cfg.nodes[1].capacity()  # declared nodes default to none


def test_gpus_auto_and_the_default_node_use_the_machines(monkeypatch):
    monkeypatch.setattr(config_mod, "detect_gpus", lambda: 3)
    cfg = parse_config({"nodes": [{"name": "a", "cpu": 2, "memory": "1Gi", "gpus": "auto"}]})
    assert cfg.nodes[0].gpus == 3
    assert parse_config({}).nodes[0].capacity()["nvidia.com/gpu"] == "3"
    monkeypatch.setattr(config_mod, "detect_gpus", lambda: 0)
    assert "nvidia.com/gpu" not in parse_config({}).nodes[0].capacity()


@pytest.mark.parametrize("bad", [-1, "two", True, 1.5, None, [1]])
def test_bad_gpu_counts_name_the_field(bad):
    with pytest.raises(ConfigError) as e:
        parse_config({"nodes": [{"name": "a", "cpu": 2, "memory": "1Gi", "gpus": bad}]})
    assert "nodes[0].gpus" in str(e.value) and "non-negative integer" in str(e.value)


def test_node_config_capacity_without_gpus():
    assert NodeConfig("a", 2, 1024).capacity() == {"cpu": "2", "memory": "1024", "pods": "110"}
