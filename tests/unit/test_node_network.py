"""The local network: loopback addresses, unique host ports, the hosts file."""
from __future__ import annotations

import json
import socket

import pytest

from phalanx.api.constants import ANNOTATION_ADDRESS, ANNOTATION_HOST_PORTS
from phalanx.node import initwait
from phalanx.node.machineclaims import LOCK_PATH_ENV, port_free
from phalanx.node.network import LocalNetwork, service_owner
from phalanx.node.nsswrapper import find_nss_wrapper
from phalanx.objects.errors import Invalid


def svc(name: str, ports, ns: str = "default", headless: bool = True) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterIP": "None" if headless else "", "selector": {"app": name}, "ports": ports}}


def free_port() -> int:
    """A port nothing listens on right now (the kernel's pick)."""
    s = socket.socket()
    s.bind(("0.0.0.0", 0))
    port = s.getsockname()[1]
    s.close()
    return port


@pytest.fixture(autouse=True)
def own_claims(tmp_path_factory, monkeypatch):
    """The homes here claim blocks and ports among themselves (the numbers asserted do not depend on other
    homes running on the machine); tests/unit/test_machine_claims.py covers the machine-wide file."""
    monkeypatch.setenv(LOCK_PATH_ENV, str(tmp_path_factory.mktemp("claims") / "loopback.lock"))


@pytest.fixture
def net(tmp_path):
    return LocalNetwork(tmp_path)


def test_addresses_start_at_the_homes_block_unique_and_idempotent(net):
    a = net.allocate_address("Service/default/a")
    b = net.allocate_address("Service/default/b")
    assert net.block is not None and 1 <= net.block <= 255
    assert (a, b) == (f"127.{net.block}.0.1", f"127.{net.block}.0.2")
    assert net.allocate_address("Service/default/a") == a


def test_a_home_made_before_blocks_keeps_allocating_from_127_0_1_2_on(tmp_path):
    (tmp_path / "network").mkdir()
    (tmp_path / "network" / "allocations.json").write_text(json.dumps(
        {"version": 1, "cursor": "127.0.1.254", "portCursor": 10000,
         "addresses": {"old": "127.0.1.253"}, "ports": {}, "published": {}}))
    net = LocalNetwork(tmp_path)
    got = [net.allocate_address(f"o{i}") for i in range(3)]
    assert net.block == 0
    assert got == ["127.0.1.254", "127.0.2.1", "127.0.2.2"]  # skipping the network and broadcast octets


def test_released_address_is_not_reused_at_once(net):
    a = net.allocate_address("x")
    net.release("x")
    b = net.allocate_address("y")
    assert b != a and net.address_of("x") is None


def test_allocations_persist_across_instances(tmp_path):
    n1 = LocalNetwork(tmp_path, check_bind=False)
    a = n1.allocate_address("Service/default/a")
    ports = n1.allocate_ports("Service/default/a", [("http", 8080, "TCP")])
    n2 = LocalNetwork(tmp_path, check_bind=False)
    assert n2.address_of("Service/default/a") == a
    assert n2.ports_of("Service/default/a") == ports
    assert n2.allocate_address("Service/default/b") != a
    assert n2.allocate_ports("Service/default/b", [("http", 8080, "TCP")])["http"] != 8080
    lines = (tmp_path / "network" / "allocations.journal").read_text().splitlines()
    assert any(json.loads(line).get("addresses", {}).get("Service/default/a") == a for line in lines)


def test_declared_port_when_free_else_next_from_range(tmp_path):
    net = LocalNetwork(tmp_path, port_range=(40100, 40110))
    p = free_port()
    assert net.allocate_ports("A", [("p", p, "TCP")]) == {"p": p}
    # Taken in our table: the next free port of the range.
    got = net.allocate_ports("B", [("p", p, "TCP")])["p"]
    assert 40100 <= got <= 40110
    # Taken by a real listener on the machine: not handed out either.
    listener = socket.socket()
    listener.bind(("0.0.0.0", 0))
    listener.listen()
    busy = listener.getsockname()[1]
    try:
        assert not port_free(busy)
        got2 = net.allocate_ports("C", [("p", busy, "TCP")])["p"]
        assert got2 != busy and got2 != got and 40100 <= got2 <= 40110
    finally:
        listener.close()


def test_ports_unique_across_many_owners(tmp_path):
    net = LocalNetwork(tmp_path, port_range=(40200, 40260), check_bind=False)
    seen = []
    for i in range(20):
        seen += net.allocate_ports(f"o{i}", [("a", 2222, "TCP"), ("b", 2223, "TCP")]).values()
    assert len(seen) == len(set(seen)) == 40
    assert 2222 in seen and 2223 in seen


def test_port_range_exhausted_is_an_error(tmp_path):
    net = LocalNetwork(tmp_path, port_range=(40300, 40300), check_bind=False)
    net.allocate_ports("a", [("p", 1, "TCP")])
    net.allocate_ports("b", [("p", 1, "TCP")])
    with pytest.raises(Invalid):
        net.allocate_ports("c", [("p", 1, "TCP")])


def test_admission_plugin_annotates_service_on_create(tmp_path):
    net = LocalNetwork(tmp_path, check_bind=False)
    s = net.admission_plugin("create", svc("pytest-master-0", [{"name": "pytorchjob-port", "port": 23456}]), None)
    ann = s["metadata"]["annotations"]
    assert ann[ANNOTATION_ADDRESS] == f"127.{net.block}.0.1"
    assert json.loads(ann[ANNOTATION_HOST_PORTS]) == {"pytorchjob-port": 23456}
    s2 = net.admission_plugin("create", svc("pytest-worker-0", [{"name": "pytorchjob-port", "port": 23456}]), None)
    assert json.loads(s2["metadata"]["annotations"][ANNOTATION_HOST_PORTS])["pytorchjob-port"] != 23456
    unnamed = net.admission_plugin("create", svc("tf", [{"port": 2222}, {"port": 2223, "protocol": "UDP"}]), None)
    assert set(json.loads(unnamed["metadata"]["annotations"][ANNOTATION_HOST_PORTS])) == {"2222", "2223"}


def test_admission_plugin_keeps_allocation_on_update_and_releases_on_delete(tmp_path):
    net = LocalNetwork(tmp_path, check_bind=False)
    created = net.admission_plugin("create", svc("a", [{"name": "x", "port": 1000}]), None)
    edited = svc("a", [{"name": "x", "port": 1000}, {"name": "y", "port": 1001}])  # user dropped annotations
    updated = net.admission_plugin("update", edited, created)
    ann = updated["metadata"]["annotations"]
    assert ann[ANNOTATION_ADDRESS] == created["metadata"]["annotations"][ANNOTATION_ADDRESS]
    assert json.loads(ann[ANNOTATION_HOST_PORTS]) == {"x": 1000, "y": 1001}
    net.publish("a", "default", ann[ANNOTATION_ADDRESS])
    net.admission_plugin("delete", updated, None)
    assert net.address_of(service_owner("default", "a")) is None
    assert net.ports_of(service_owner("default", "a")) == {}
    net.flush()
    assert ann[ANNOTATION_ADDRESS] not in net.hosts_path.read_text()


def test_admission_plugin_ignores_other_kinds_and_refuses_bad_names(tmp_path):
    net = LocalNetwork(tmp_path, check_bind=False)
    pod = {"kind": "Pod", "metadata": {"name": "p"}}
    assert net.admission_plugin("create", pod, None) is pod
    bad = svc("x", [])
    bad["metadata"]["name"] = "../../etc"
    with pytest.raises(Invalid) as e:
        net.admission_plugin("create", bad, None)
    assert "metadata.name" in str(e.value)


def test_hosts_file_lines_and_holders(net):
    net.publish("pytest-master-0", "default", "127.0.1.4", holder="pod-a")
    text = net.hosts_path.read_text()
    assert ("127.0.1.4 pytest-master-0 pytest-master-0.default pytest-master-0.default.svc "
            "pytest-master-0.default.svc.cluster.local") in text.splitlines()
    # nss_wrapper rejects a hosts file with comment lines: every line is an entry.
    assert all(line.split()[0].count(".") == 3 for line in text.splitlines())
    net.publish("pytest-master-0", "default", "127.0.1.4", holder="pod-b")
    net.unpublish("pytest-master-0", "default", holder="pod-a")
    assert "127.0.1.4" in net.hosts_path.read_text()  # pod-b still holds it
    net.unpublish_holder("pod-b")
    net.flush()  # removals right after a write are coalesced: see test_node_network_sharing.py
    assert "127.0.1.4" not in net.hosts_path.read_text()
    assert [p.name for p in net.dir.iterdir() if p.name.startswith(".hosts")] == []  # temp files renamed away


def test_publish_refuses_names_that_are_not_dns_labels(net):
    with pytest.raises(ValueError):
        net.publish("evil\n1.2.3.4 x", "default", "127.0.1.2")


def test_sync_services_drops_vanished(tmp_path):
    net = LocalNetwork(tmp_path, check_bind=False)
    keep = net.admission_plugin("create", svc("keep", [{"port": 1}]), None)
    gone = net.admission_plugin("create", svc("gone", [{"port": 2}]), None)
    net.publish("gone", "default", gone["metadata"]["annotations"][ANNOTATION_ADDRESS])
    assert net.sync_services([keep]) == [service_owner("default", "gone")]
    assert net.published() == {}
    assert net.address_of(service_owner("default", "keep")) is not None


def test_resolver_env(net, monkeypatch):
    monkeypatch.setenv("PHALANX_NSS_WRAPPER", "")
    assert find_nss_wrapper() is None and not net.nss_wrapper_available()
    assert net.resolver_env("p") == {"PHALANX_HOSTS_FILE": str(net.hosts_path)}
    lib = net.dir / "libnss_wrapper.so"
    lib.write_bytes(b"")
    monkeypatch.setenv("PHALANX_NSS_WRAPPER", str(lib))
    env = net.resolver_env("pytest-worker-0")
    assert env["LD_PRELOAD"] == str(lib) and env["NSS_WRAPPER_HOSTS"] == str(net.hosts_path)
    assert env["NSS_WRAPPER_HOSTNAME"] == "pytest-worker-0"


# --------------------------------------------------------------------------- initwait


def test_initwait_finds_published_name_and_ip(net, capsys):
    net.publish("pytest-master-0", "default", "127.0.1.4")
    hosts = str(net.hosts_path)
    assert initwait.main(["pytest-master-0", "--hosts-file", hosts, "--timeout", "0"]) == 0
    assert initwait.main(["pytest-master-0.default.svc", "--hosts-file", hosts, "--timeout", "0"]) == 0
    assert initwait.main(["127.0.1.4", "--hosts-file", hosts, "--timeout", "0"]) == 0
    assert "127.0.1.4" in capsys.readouterr().out


def test_initwait_times_out_and_prints_waiting(net, capsys):
    hosts = str(net.hosts_path)
    rc = initwait.main(["127.0.1.99", "--hosts-file", hosts, "--timeout", "0.3", "--interval", "0.1"])
    assert rc == 1
    out = capsys.readouterr().out
    assert out.count("waiting for master") == 1  # rate-limited to one line per 2 s
