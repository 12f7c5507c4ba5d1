"""The phalanx CLI next to real kubectl 1.32 against one `phalanx up`: same output for
several kinds, -o name/jsonpath/custom-columns, --show-labels, --sort-by; apply -f DIR
with the three-way merge kubectl accepts afterwards; delete forms; describe shows only
the object's own events; logs from $PHALANX_HOME once the control plane is down."""
from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
import yaml

from tests.e2e.test_cli_controlplane import cli, job_file, wait_cli

pytestmark = pytest.mark.e2e
KUBECTL = "/usr/bin/kubectl"


def kubectl(env, *args):
    r = subprocess.run([KUBECTL, "--kubeconfig", os.path.join(env["PHALANX_HOME"], "kubeconfig"), *args],
                       capture_output=True, text=True, timeout=30)
    return r


def test_output_formats_match_kubectl(env, tmp_path):
    cli(env, "apply", "-f", str(job_file(tmp_path, 30)))
    for args in (["get", "q,ns"], ["get", "q", "-o", "name"], ["get", "q", "--show-labels"],
                 ["get", "q", "-o", "jsonpath={range .items[*]}{.metadata.name}{\"\\n\"}{end}"],
                 ["get", "q", "-o", "jsonpath={.items[?(@.spec.parent==\"root\")].metadata.name}"],
                 ["get", "q", "-o", "custom-columns=NAME:.metadata.name,SPEC:.spec"],
                 ["get", "q", "--sort-by", ".spec.weight", "-o", "name"],
                 ["get", "pytorchjob/pytest", "-o", "jsonpath={.metadata.name}"]):
        k = kubectl(env, *args)
        p = cli(env, *args)
        ages = re.compile(r" \d+s$", re.M)  # one may run a second after the other
        assert (ages.sub(" Ns", p.stdout), p.returncode) == (ages.sub(" Ns", k.stdout), k.returncode), args


def test_apply_dir_three_way_and_delete(env, tmp_path):
    d = tmp_path / "manifests"
    (d / "sub").mkdir(parents=True)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1", "labels": {"a": "1", "b": "2"}},
          "data": {"k": "v", "gone": "x"}}
    (d / "sub" / "c1.yaml").write_text(yaml.safe_dump(cm))
    (d / "c2.json").write_text(json.dumps(dict(cm, metadata={"name": "c2"})))
    (d / "notes.txt").write_text("not a manifest")
    assert cli(env, "apply", "-f", str(d)).stdout == "configmap/c2 created\n"
    assert cli(env, "apply", "-R", "-f", str(d)).stdout == "configmap/c2 unchanged\nconfigmap/c1 created\n"
    del cm["metadata"]["labels"]["b"], cm["data"]["gone"]
    (d / "sub" / "c1.yaml").write_text(yaml.safe_dump(cm))
    assert cli(env, "apply", "-R", "-f", str(d)).stdout == "configmap/c2 unchanged\nconfigmap/c1 configured\n"
    live = json.loads(cli(env, "get", "cm", "c1", "-o", "json").stdout)
    assert live["metadata"]["labels"] == {"a": "1"} and live["data"] == {"k": "v"}
    k = kubectl(env, "apply", "-R", "-f", str(d))  # kubectl reads phalanx's last-applied: no warning
    assert k.returncode == 0 and "Warning" not in k.stderr and "configmap/c1 unchanged" in k.stdout
    r = cli(env, "delete", "cm", "c1", "missing", check=False)
    assert r.returncode == 1 and r.stdout == 'configmap "c1" deleted\n' and '"missing" not found' in r.stderr
    assert cli(env, "delete", "cm", "missing", "--ignore-not-found").stdout == ""
    assert cli(env, "delete", "cm", "--all").stdout == 'configmap "c2" deleted\n'
    r = cli(env, "apply", "-f", str(tmp_path / "nope"), check=False)
    assert r.returncode == 2 and 'the path' in r.stderr


def test_describe_shows_only_its_own_events_and_version(env):
    q = json.loads(cli(env, "get", "q", "default", "-o", "json").stdout)
    ev = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": "namesake.1", "namespace": "default"},
          "involvedObject": {"kind": "Queue", "name": "default", "uid": "0000-other", "apiVersion":
                             "scheduling.volcano.sh/v1beta1"},
          "reason": "FromANamesake", "message": "not about this queue", "type": "Normal", "count": 1,
          "firstTimestamp": q["metadata"]["creationTimestamp"], "lastTimestamp": q["metadata"]["creationTimestamp"],
          "source": {"component": "test"}}
    own = json.loads(json.dumps(ev).replace("0000-other", q["metadata"]["uid"]).replace("namesake.1", "own.1")
                     .replace("FromANamesake", "OwnEvent"))
    f = os.path.join(env["PHALANX_HOME"], "events.yaml")
    with open(f, "w") as fh:
        yaml.safe_dump_all([ev, own], fh)
    cli(env, "apply", "-f", f)
    text = cli(env, "describe", "q", "default").stdout
    assert "OwnEvent" in text and "FromANamesake" not in text
    out = cli(env, "version").stdout.splitlines()
    assert out[0].startswith("Client Version: v") and out[1].startswith("Server Version: v1.32")
    assert cli(env, "--version").stdout.splitlines()[:2] == out[:2]


def test_logs_without_a_control_plane(env, tmp_path):
    doc = yaml.safe_load(job_file(tmp_path, 0).read_text())
    doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["command"] = [
        "sh", "-c", "echo one; echo two"]
    doc["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
    f = tmp_path / "j.yaml"
    f.write_text(yaml.safe_dump(doc))
    cli(env, "apply", "-f", str(f))
    wait_cli(env, ["get", "pytorchjob", "pytest"], lambda out: "Succeeded" in out, 30, "job Succeeded")
    cli(env, "down", timeout=60)
    assert cli(env, "logs", "pytest-master-0").stdout == "one\ntwo\n"
    assert cli(env, "logs", "pytest-master-0", "--tail", "1", "-c", "pytorch").stdout == "two\n"
    r = cli(env, "logs", "pytest-master-0", "-f")
    assert r.stdout == "one\ntwo\n" and "no control plane is running" in r.stderr
    assert "==> pytest-master-0/pytorch" in cli(env, "logs", "pytorchjob/pytest").stdout
    r = cli(env, "get", "po", check=False)
    assert r.returncode == 3
