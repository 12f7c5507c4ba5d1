"""`--scheduler-conf FILE` (Volcano's volcano-scheduler.conf) as a user passes it: a bad file stops
`phalanx scheduler` and `phalanx up` before anything starts (exit 2, the file and the field named);
a good one is run: the scheduler becomes ready and says which configuration it runs."""
from __future__ import annotations

import os
import subprocess
import time

import pytest
import yaml

from tests.e2e.test_cli_controlplane import PHALANX, cli
from tests.e2e.test_metrics import _url, fetch

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

GOOD = """\
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
  - name: binpack
    arguments:
      binpack.weight: 1
"""
BAD = GOOD.replace('"enqueue, allocate, backfill"', '"enqueue, allocate, bogus"')
BAD_MESSAGE = "actions: unknown action 'bogus'; known: enqueue, allocate, preempt, reclaim, backfill"


def home_env(tmp_path, name: str) -> dict[str, str]:
    home = tmp_path / name
    home.mkdir()
    (home / "cluster.yaml").write_text(yaml.safe_dump({"nodes": [{"name": "las1", "cpu": 16, "memory": "64Gi"}]}))
    return {**os.environ, "PHALANX_HOME": str(home)}


def test_a_bad_file_stops_up_before_anything_starts(tmp_path):
    env = home_env(tmp_path, "home")
    bad = tmp_path / "bad.conf"
    bad.write_text(BAD)
    r = cli(env, "up", "--scheduler-conf", str(bad), check=False)
    assert r.returncode == 2, r
    assert r.stderr == f"error: --scheduler-conf: {bad}: {BAD_MESSAGE}\n"
    assert not (tmp_path / "home" / "api.json").exists()  # no control plane was started
    r = cli(env, "up", "--no-scheduler", "--scheduler-conf", str(tmp_path / "good.conf"), check=False)
    assert r.returncode == 2 and "--no-scheduler leaves out" in r.stderr, r


def test_phalanx_scheduler_refuses_a_bad_file_and_runs_a_good_one(tmp_path):
    env = home_env(tmp_path, "home")
    home = tmp_path / "home"
    cli(env, "up", "--no-controllers", "--no-scheduler")
    proc: subprocess.Popen | None = None
    try:
        bad, good = tmp_path / "bad.conf", tmp_path / "good.conf"
        bad.write_text(BAD)
        good.write_text(GOOD)
        r = cli(env, "scheduler", "--kubeconfig", str(home / "kubeconfig"), "--scheduler-conf", str(bad),
                "--listen-address=0", "--healthz-address=0", check=False)
        assert r.returncode == 2, r
        assert r.stderr == f"error: --scheduler-conf: {bad}: {BAD_MESSAGE}\n"
        printed = cli(env, "scheduler", "--scheduler-conf", str(good), "--print-config").stdout
        assert printed.startswith('actions: "enqueue, allocate, backfill"\n')
        assert "binpack.weight: 1\n" in printed
        log = home / "scheduler.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen([*PHALANX, "scheduler", "--kubeconfig", str(home / "kubeconfig"),
                                     "--scheduler-conf", str(good), "--listen-address=0",
                                     "--healthz-address", "127.0.0.1:0"],
                                    env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
        probes = _url(log, "probes")
        deadline = time.monotonic() + 20
        while fetch(probes + "/readyz") != (200, "ok"):
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"never ready:\n{log.read_text()}"
            time.sleep(0.05)
        assert f"configuration {good} (actions: enqueue, allocate, backfill)" in log.read_text()
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=20)
        subprocess.run([*PHALANX, "down"], env=env, capture_output=True, timeout=60)
