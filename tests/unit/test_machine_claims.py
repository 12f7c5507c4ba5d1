"""Machine-wide claims: two homes on one machine never hand out one loopback address or one host port."""
from __future__ import annotations

import errno
import ipaddress
import json
import logging
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from phalanx.node import machineclaims
from phalanx.node.machineclaims import LOCK_PATH_ENV, MachineClaims
from phalanx.node.network import LocalNetwork, service_owner

SRC = str(Path(machineclaims.__file__).resolve().parents[2])


@pytest.fixture
def lock(tmp_path) -> Path:
    return tmp_path / "loopback.lock"


def home(tmp_path: Path, name: str, lock: Path, **kw) -> LocalNetwork:
    return LocalNetwork(tmp_path / name, claims_path=lock, **kw)


def svc(name: str, port: int) -> dict:
    return {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": "default"},
            "spec": {"clusterIP": "None", "ports": [{"name": "p", "port": port}]}}


def block_of(address: str) -> int:
    return int(ipaddress.IPv4Address(address)) >> 16 & 0xFF


def test_two_homes_running_at_once_get_their_own_blocks(tmp_path, lock):
    a, b = home(tmp_path, "a", lock), home(tmp_path, "b", lock)
    ours = [a.allocate_address(f"o{i}") for i in range(50)]
    theirs = [b.allocate_address(f"o{i}") for i in range(50)]
    assert a.block != b.block and 1 <= a.block <= 255 and 1 <= b.block <= 255
    assert not set(ours) & set(theirs)
    assert {block_of(x) for x in ours} == {a.block} and {block_of(x) for x in theirs} == {b.block}


def test_the_same_service_in_two_homes_gets_two_addresses_and_two_ports(tmp_path, lock):
    """Two homes running the same PaddleJob: without claims both masters were 127.0.1.2 on the declared port."""
    a, b = home(tmp_path, "a", lock, check_bind=False), home(tmp_path, "b", lock, check_bind=False)
    sa = a.admission_plugin("create", svc("paddle-master-0", 36543), None)["metadata"]["annotations"]
    sb = b.admission_plugin("create", svc("paddle-master-0", 36543), None)["metadata"]["annotations"]
    assert sa["phalanx.dev/address"] != sb["phalanx.dev/address"]
    pa, pb = json.loads(sa["phalanx.dev/host-ports"])["p"], json.loads(sb["phalanx.dev/host-ports"])["p"]
    assert pa == 36543 and pb != 36543  # nothing listens yet: only the claim tells b the port is a's


def test_a_port_given_back_is_free_for_another_home(tmp_path, lock):
    a, b = home(tmp_path, "a", lock, check_bind=False), home(tmp_path, "b", lock, check_bind=False)
    created = a.admission_plugin("create", svc("s", 40701), None)
    assert b.allocate_ports("x", [("p", 40701, "TCP")])["p"] != 40701
    a.admission_plugin("delete", None, created)
    assert b.allocate_ports("y", [("p", 40701, "TCP")])["p"] == 40701


def test_a_restarted_home_keeps_its_block_and_claims_its_ports_again(tmp_path, lock):
    a = home(tmp_path, "a", lock, check_bind=False)
    first = a.allocate_address("s")
    a.allocate_ports("s", [("p", 40702, "TCP")])
    block = a.block
    a.close()
    again = home(tmp_path, "a", lock, check_bind=False)
    assert again.allocate_address("t") == f"127.{block}.0.2" and again.block == block
    assert again.address_of("s") == first
    other = home(tmp_path, "b", lock, check_bind=False)
    assert other.allocate_ports("x", [("p", 40702, "TCP")])["p"] != 40702  # still a's while a runs


def test_a_home_whose_block_is_taken_moves_to_a_free_one_and_keeps_what_it_has(tmp_path, lock):
    a = home(tmp_path, "a", lock)
    kept = a.allocate_address("s")
    block = a.block
    a.close()
    squatter = MachineClaims(lock)
    assert squatter.claim_block(block, "elsewhere") == block
    again = home(tmp_path, "a", lock)
    new = again.allocate_address("t")
    assert again.block != block and block_of(new) == again.block
    assert again.address_of("s") == kept


def test_a_home_made_before_blocks_keeps_block_0(tmp_path, lock):
    (tmp_path / "old" / "network").mkdir(parents=True)
    (tmp_path / "old" / "network" / "allocations.json").write_text(json.dumps(
        {"version": 1, "cursor": "127.0.1.3", "portCursor": 10000, "addresses": {"s": "127.0.1.2"},
         "ports": {}, "published": {}}))
    old, new = home(tmp_path, "old", lock), home(tmp_path, "new", lock)
    assert old.allocate_address("t") == "127.0.1.3" and old.block == 0
    assert new.allocate_address("t") != "127.0.1.3" and new.block != 0


def test_claims_end_with_the_process_that_made_them(tmp_path, lock):
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {SRC!r})
        from phalanx.node.machineclaims import MachineClaims
        c = MachineClaims({str(lock)!r})
        assert c.claim_block(7, "x") == 7 and c.claim_port(40703)
        print("held", flush=True)
        sys.stdin.read()
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
        mine = MachineClaims(lock)
        assert mine.claim_block(7, "y") != 7
        assert not mine.claim_port(40703)
        proc.kill()  # no clean-up of its own: the kernel drops its locks
        proc.wait(timeout=10)
        assert mine.claim_block(7, "y") == 7 and mine.claim_port(40703)
    finally:
        proc.kill()
        proc.wait(timeout=10)


def test_claims_of_one_home_are_its_own_until_given_back(lock):
    c, other = MachineClaims(lock), MachineClaims(lock)
    assert c.claim_port(40704) and c.claim_port(40704)  # already ours: still ours
    assert not other.claim_port(40704)
    c.release_port(40704)
    assert other.claim_port(40704)
    c.close()
    assert other.claim_block(9, "k") == 9


def test_every_block_held_falls_back_unclaimed_with_a_warning(tmp_path, lock, caplog):
    hog = MachineClaims(lock)
    held = {hog.claim_block(n, "hog") for n in range(1, 256)}
    assert held == set(range(1, 256))
    with caplog.at_level(logging.WARNING):
        net = home(tmp_path, "late", lock)
        net.allocate_address("s")
    assert "every loopback address block is held" in caplog.text


def test_an_unusable_lock_file_leaves_the_home_uncoordinated_not_broken(tmp_path, caplog):
    path = tmp_path / "a-folder"
    path.mkdir()
    with caplog.at_level(logging.WARNING):
        c = MachineClaims(path)
        assert c.claim_port(40705) and c.claim_block(None, "k") is not None
    assert "machine-wide loopback claims unavailable" in caplog.text


def test_the_lock_file_is_one_per_machine_unless_the_environment_names_another(monkeypatch, tmp_path):
    monkeypatch.delenv(LOCK_PATH_ENV, raising=False)
    assert machineclaims.default_lock_path() == Path("/tmp/phalanx-loopback.lock")
    monkeypatch.setenv(LOCK_PATH_ENV, str(tmp_path / "x.lock"))
    assert machineclaims.default_lock_path() == tmp_path / "x.lock"


def test_the_machine_file_is_open_to_every_user(lock):
    c = MachineClaims(lock)
    assert c.claim_port(40706)
    assert lock.stat().st_mode & 0o777 == 0o666


def test_a_service_deleted_releases_its_claim_in_the_admission_plugin(tmp_path, lock):
    a, b = home(tmp_path, "a", lock, check_bind=False), home(tmp_path, "b", lock, check_bind=False)
    created = a.admission_plugin("create", svc("s", 40707), None)
    a.admission_plugin("delete", None, created)
    assert a.ports_of(service_owner("default", "s")) == {}
    assert b.allocate_ports("x", [("p", 40707, "TCP")]) == {"p": 40707}


def test_a_lock_file_this_user_may_not_open_leaves_the_home_uncoordinated_not_refusing_every_port(
        tmp_path, caplog, monkeypatch):
    """Another user's file of mode 0600: opening it fails with EACCES, which is not 'every claim is held'."""
    path = tmp_path / "theirs.lock"
    real_open = os.open

    def denied(p, *a, **kw):
        if str(p) == str(path):
            raise PermissionError(errno.EACCES, "Permission denied", str(p))
        return real_open(p, *a, **kw)

    monkeypatch.setattr(os, "open", denied)
    c = MachineClaims(path)
    with caplog.at_level(logging.WARNING):
        assert c.claim_port(40708) and c.claim_block(None, "k") is not None
    assert "machine-wide loopback claims unavailable" in caplog.text
