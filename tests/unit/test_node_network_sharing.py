"""The local network shared by instances and processes: the journal, restarts,
compaction, and the coalesced hosts file."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from phalanx.api.constants import ANNOTATION_ADDRESS, ANNOTATION_HOST_PORTS
from phalanx.node import network
from phalanx.node.machineclaims import LOCK_PATH_ENV
from phalanx.node.network import LocalNetwork, service_owner
from phalanx.objects.errors import Invalid

SRC = str(Path(network.__file__).resolve().parents[2])
NAMES = "{n} {n}.default {n}.default.svc {n}.default.svc.cluster.local"


@pytest.fixture(autouse=True)
def own_claims(tmp_path_factory, monkeypatch):
    """The homes here claim blocks and ports among themselves (the numbers asserted do not depend on other
    homes running on the machine); tests/unit/test_machine_claims.py covers the machine-wide file."""
    monkeypatch.setenv(LOCK_PATH_ENV, str(tmp_path_factory.mktemp("claims") / "loopback.lock"))


def svc(name: str, ports: list[dict], ns: str = "default") -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterIP": "None", "ports": ports}}


def entry_lines(name: str, address: str) -> list[str]:
    names = NAMES.format(n=name)
    return [f"{address} {names}", f"::ffff:{address} {names}"]


def wait_until(predicate, timeout: float = 5.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.005)


def child(script: str, *args: str) -> subprocess.Popen:
    """A Python process running ``script`` with phalanx importable."""
    env = {**os.environ, "PYTHONPATH": SRC}
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *args], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# --------------------------------------------------------------------------- the hosts file


def test_publish_after_a_quiet_spell_is_written_before_it_returns(tmp_path):
    net = LocalNetwork(tmp_path, hosts_interval=60)
    net.publish("a", "default", "127.0.1.2")
    assert net.hosts_path.read_text().splitlines() == entry_lines("a", "127.0.1.2")


def test_burst_is_coalesced_and_flush_writes_it_sorted(tmp_path):
    net = LocalNetwork(tmp_path, hosts_interval=60)
    net.publish("b", "default", "127.0.1.3")  # written at once
    net.publish("a", "default", "127.0.1.2")  # within the interval: pending
    net.unpublish("b", "default")
    assert net.hosts_path.read_text().splitlines() == entry_lines("b", "127.0.1.3")
    assert net.published() == {"default/a": "127.0.1.2"}  # the table is up to date
    net.flush()
    assert net.hosts_path.read_text().splitlines() == entry_lines("a", "127.0.1.2")
    net.publish("c", "default", "127.0.1.4")
    net.close()  # writes what is pending
    text = net.hosts_path.read_text()
    assert text.splitlines() == entry_lines("a", "127.0.1.2") + entry_lines("c", "127.0.1.4")
    assert text.endswith("\n") and "#" not in text  # nss_wrapper refuses comment lines


def test_pending_change_is_written_within_the_interval(tmp_path):
    net = LocalNetwork(tmp_path, hosts_interval=0.3)
    net.publish("a", "default", "127.0.1.2")
    t0 = time.monotonic()
    net.publish("b", "default", "127.0.1.3")
    assert "127.0.1.3" not in net.hosts_path.read_text()  # coalesced, not lost:
    wait_until(lambda: "127.0.1.3" in net.hosts_path.read_text(), what="the coalesced write")
    assert time.monotonic() - t0 < 2.0  # the interval plus a loaded machine's scheduling slack


def test_process_exiting_right_after_a_burst_still_writes_it(tmp_path):
    p = child("""
        import sys
        from phalanx.node.network import LocalNetwork
        net = LocalNetwork(sys.argv[1], hosts_interval=0.3)
        net.publish("a", "default", "127.0.1.2")
        net.publish("b", "default", "127.0.1.3")
    """, str(tmp_path))
    _, err = p.communicate(timeout=30)
    assert p.returncode == 0, err
    lines = (tmp_path / "network" / "hosts").read_text().splitlines()
    assert lines == entry_lines("a", "127.0.1.2") + entry_lines("b", "127.0.1.3")


def test_a_failed_hosts_write_does_not_fail_the_publish_and_is_retried(tmp_path):
    net = LocalNetwork(tmp_path, hosts_interval=0.5)
    net.hosts_path.unlink()
    net.hosts_path.mkdir()  # the rename over it fails
    net.publish("a", "default", "127.0.1.2")
    assert net.published() == {"default/a": "127.0.1.2"}
    net.hosts_path.rmdir()
    wait_until(lambda: net.hosts_path.is_file(), what="the retried write")
    assert net.hosts_path.read_text().splitlines() == entry_lines("a", "127.0.1.2")


def test_a_new_instance_rewrites_a_stale_hosts_file(tmp_path):
    net = LocalNetwork(tmp_path)
    net.publish("a", "default", "127.0.1.2")
    net.hosts_path.write_text("")  # e.g. a process died before its coalesced write
    LocalNetwork(tmp_path)
    assert net.hosts_path.read_text().splitlines() == entry_lines("a", "127.0.1.2")


# --------------------------------------------------------------------------- sharing


def test_two_instances_interleaved_never_collide(tmp_path):
    n1 = LocalNetwork(tmp_path, port_range=(40400, 40499), check_bind=False)
    n2 = LocalNetwork(tmp_path, port_range=(40400, 40499), check_bind=False)
    addresses, ports = {}, {}
    for i in range(30):
        for tag, net in (("x", n1), ("y", n2)):
            owner = f"{tag}{i}"
            addresses[owner] = net.allocate_address(owner)
            ports[owner] = net.allocate_ports(owner, [("p", 2222, "TCP")])["p"]
        if i % 3 == 0:  # releases by one instance are seen by the other
            n2.release(f"x{i}")
            del addresses[f"x{i}"], ports[f"x{i}"]
    assert len(set(addresses.values())) == len(addresses) == 50
    assert len(set(ports.values())) == len(ports) == 50
    for owner, address in addresses.items():
        assert n1.address_of(owner) == address and n2.address_of(owner) == address
    assert n1.address_of("x0") is None and n1.allocate_address("x1") == addresses["x1"]  # idempotent


def test_two_processes_allocating_at_once_never_collide(tmp_path, monkeypatch):
    monkeypatch.setattr(network, "COMPACT_MIN_BYTES", 3000)  # compactions happen during the run, too
    script = """
        import json, sys
        from phalanx.node import network
        network.COMPACT_MIN_BYTES = 3000
        net = network.LocalNetwork(sys.argv[1], port_range=(40500, 40999), check_bind=False)
        sys.stdin.readline()  # both start together
        out = {}
        for i in range(150):
            out[f"c{i}"] = [net.allocate_address(f"c{i}"), net.allocate_ports(f"c{i}", [("p", 2222, "TCP")])["p"]]
            if i % 5 == 0:
                net.publish(f"c{i}", "default", out[f"c{i}"][0], holder="child")
        print(json.dumps(out))
    """
    p = child(script, str(tmp_path))
    net = LocalNetwork(tmp_path, port_range=(40500, 40999), check_bind=False)
    p.stdin.write("go\n")
    p.stdin.flush()
    mine = {}
    for i in range(150):
        mine[f"p{i}"] = [net.allocate_address(f"p{i}"), net.allocate_ports(f"p{i}", [("p", 2222, "TCP")])["p"]]
    out, err = p.communicate(timeout=60)
    assert p.returncode == 0, err
    theirs = json.loads(out)
    both = {**mine, **theirs}
    assert len({a for a, _ in both.values()}) == len({p for _, p in both.values()}) == 300
    fresh = LocalNetwork(tmp_path, check_bind=False)  # a restart sees both processes' allocations
    for owner, (address, port) in both.items():
        assert fresh.address_of(owner) == address and fresh.ports_of(owner) == {"p": port}
    assert net.held_by("child") == {("default", f"c{i}") for i in range(0, 150, 5)}
    assert json.loads(net.table_path.read_text())["addresses"]  # compacted at least once


def test_second_process_sees_a_publish_at_once_in_the_table_and_within_the_bound_in_hosts(tmp_path):
    net = LocalNetwork(tmp_path)
    net.publish("a", "default", "127.0.1.2")  # the other process's next write happens right after
    p = child("""
        import sys
        from phalanx.node.network import LocalNetwork
        net = LocalNetwork(sys.argv[1])
        net.publish("master", "default", "127.0.1.9", holder="pod")
        print("published", flush=True)
        sys.stdin.readline()
    """, str(tmp_path))
    try:
        assert p.stdout.readline().strip() == "published"
        assert net.published()["default/master"] == "127.0.1.9"
        assert net.held_by("pod") == {("default", "master")}
        wait_until(lambda: set(entry_lines("master", "127.0.1.9")) <= set(net.hosts_path.read_text().splitlines()),
                   timeout=2.0, what="the other process's publish in the hosts file")
        assert set(entry_lines("a", "127.0.1.2")) <= set(net.hosts_path.read_text().splitlines())
    finally:
        p.communicate("\n", timeout=30)


def test_an_instance_reads_only_what_others_appended(tmp_path, monkeypatch):
    """The O(1) path: no full reload of the table while nobody compacted it."""
    n1 = LocalNetwork(tmp_path, check_bind=False)
    n2 = LocalNetwork(tmp_path, check_bind=False)
    for i in range(50):
        n1.allocate_address(f"o{i}")
    reloads = []
    monkeypatch.setattr(LocalNetwork, "_reload", lambda self, *a: reloads.append(1) or pytest.fail("reloaded"))
    for i in range(50):
        assert n2.address_of(f"o{i}") is not None
        n2.allocate_address(f"q{i}")
        n1.release(f"o{i}")
    assert reloads == [] and n2.address_of("o0") is None


# --------------------------------------------------------------------------- disk


def test_compaction_folds_the_journal_into_the_table(tmp_path, monkeypatch):
    monkeypatch.setattr(network, "COMPACT_MIN_BYTES", 2000)
    net = LocalNetwork(tmp_path, check_bind=False)
    other = LocalNetwork(tmp_path, check_bind=False)
    other.allocate_address("early")
    for i in range(100):
        net.allocate_address(f"o{i}")
    journal = (tmp_path / "network" / "allocations.journal").stat().st_size
    assert journal < 2000 * 2  # truncated along the way
    table = json.loads(net.table_path.read_text())
    assert table["addresses"]["early"] == other.address_of("early")
    assert other.allocate_address("late") not in {net.address_of(f"o{i}") for i in range(100)}
    assert LocalNetwork(tmp_path).snapshot() == net.snapshot() == other.snapshot()


def test_restart_ignores_a_partial_last_line_and_the_next_write_replaces_it(tmp_path):
    net = LocalNetwork(tmp_path, check_bind=False)
    a = net.allocate_address("a")
    with open(tmp_path / "network" / "allocations.journal", "a") as f:
        f.write('{"addresses":{"b":"127.0.1.')  # a writer died mid-append
    again = LocalNetwork(tmp_path, check_bind=False)
    assert again.address_of("a") == a and again.address_of("b") is None
    c = again.allocate_address("c")
    lines = (tmp_path / "network" / "allocations.journal").read_text().splitlines()
    assert [json.loads(line) for line in lines]  # every line whole again
    assert LocalNetwork(tmp_path).snapshot()["addresses"] == {"a": a, "c": c}


def test_reads_a_table_written_by_the_previous_version(tmp_path):
    (tmp_path / "network").mkdir()
    legacy = {"version": 1, "cursor": "127.0.1.4", "portCursor": 30001,
              "addresses": {"Service/default/a": "127.0.1.2", "bad": 7}, "ports": {"Service/default/a": {"p": 2222}},
              "published": {"default/a": {"address": "127.0.1.2", "holders": ["x"]},
                            "default/b": {"address": "127.0.1.3\n1.2.3.4 evil", "holders": []}}}
    (tmp_path / "network" / "allocations.json").write_text(json.dumps(legacy, indent=1))
    net = LocalNetwork(tmp_path, check_bind=False)
    assert net.address_of("Service/default/a") == "127.0.1.2" and net.address_of("bad") is None
    assert net.allocate_address("n") == "127.0.1.4"  # the cursor is kept
    assert net.allocate_ports("m", [("p", 2222, "TCP")]) == {"p": 30001}
    assert net.hosts_path.read_text().splitlines() == entry_lines("a", "127.0.1.2")


def test_unreadable_table_starts_a_new_one(tmp_path):
    (tmp_path / "network").mkdir()
    (tmp_path / "network" / "allocations.json").write_text("{not json")
    (tmp_path / "network" / "allocations.journal").write_text('garbage\n{"addresses":{"x":"127.0.1.9"}}\n')
    net = LocalNetwork(tmp_path)
    assert net.snapshot()["addresses"] == {"x": "127.0.1.9"}


def test_failed_allocation_leaves_no_trace(tmp_path):
    net = LocalNetwork(tmp_path, port_range=(40600, 40600), check_bind=False)
    net.allocate_ports("holder", [("p", 40600, "TCP")])  # the only port of the range
    journal = (tmp_path / "network" / "allocations.journal").read_text()
    with pytest.raises(Invalid) as e:
        net.admission_plugin("create", svc("s", [{"name": "p", "port": 40600}]), None)
    assert "spec.ports" in str(e.value)
    assert net.address_of(service_owner("default", "s")) is None  # the address was given back
    assert (tmp_path / "network" / "allocations.journal").read_text() == journal
    assert LocalNetwork(tmp_path).address_of(service_owner("default", "s")) is None


def test_sync_services_takes_back_allocations_the_table_lost(tmp_path):
    net = LocalNetwork(tmp_path, check_bind=False)
    s = net.admission_plugin("create", svc("m", [{"name": "p", "port": 23456}]), None)
    ann = s["metadata"]["annotations"]
    for f in ("allocations.json", "allocations.journal", ".lock"):
        (tmp_path / "network" / f).unlink(missing_ok=True)  # e.g. lost in a machine crash
    fresh = LocalNetwork(tmp_path, check_bind=False)
    assert fresh.address_of(service_owner("default", "m")) is None
    fresh.sync_services([s])
    assert fresh.address_of(service_owner("default", "m")) == ann[ANNOTATION_ADDRESS]
    assert fresh.ports_of(service_owner("default", "m")) == json.loads(ann[ANNOTATION_HOST_PORTS])
    other = fresh.admission_plugin("create", svc("w", [{"name": "p", "port": 23456}]), None)
    assert other["metadata"]["annotations"][ANNOTATION_ADDRESS] != ann[ANNOTATION_ADDRESS]
    assert json.loads(other["metadata"]["annotations"][ANNOTATION_HOST_PORTS])["p"] != 23456


def test_held_by_and_unpublish_holder_use_the_holder_index(tmp_path):
    net = LocalNetwork(tmp_path)
    net.publish("a", "default", "127.0.1.2", holder="p1")
    net.publish("b", "default", "127.0.1.3", holder="p1")
    net.publish("b", "default", "127.0.1.3", holder="p2")
    net.publish("c", "other", "127.0.1.4", holder="p2")
    assert net.held_by("p1") == {("default", "a"), ("default", "b")}
    net.unpublish_holder("p1")
    assert net.held_by("p1") == set() and net.published() == {"default/b": "127.0.1.3", "other/c": "127.0.1.4"}
    net.publish("b", "default", "127.0.1.7", holder="p3")  # a new address drops the old claims
    assert net.held_by("p2") == {("other", "c")}
