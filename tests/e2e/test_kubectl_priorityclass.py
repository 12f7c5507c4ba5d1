"""Real kubectl 1.32 against `phalanx up`: PriorityClasses as kube-apiserver serves them (typed
create over protobuf, the two system classes, its columns) and the Priority admission of pods."""
from __future__ import annotations

import re
from typing import Iterator

import pytest
import yaml

from tests.e2e.test_kubectl import Plane, started_plane

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

POD = """\
apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  schedulerName: nobody
  %s
  containers: [{name: c, image: busybox, command: [sleep, "60"]}]
"""


@pytest.fixture(scope="module")
def plane(tmp_path_factory) -> Iterator[Plane]:
    yield from started_plane(tmp_path_factory.mktemp("kubectl-pc"), {"nodes": [{"name": "las1", "cpu": 2}]})


def test_create_get_and_describe_priorityclasses(plane):
    r = plane.kubectl("create", "priorityclass", "high", "--value=1000", "--description=urgent")
    assert r.stdout == "priorityclass.scheduling.k8s.io/high created\n"
    lines = plane.kubectl("get", "priorityclass").stdout.splitlines()
    assert re.split(r"\s{2,}", lines[0]) == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
    rows = {re.split(r"\s{2,}", line)[0]: re.split(r"\s{2,}", line) for line in lines[1:]}
    assert set(rows) == {"high", "system-cluster-critical", "system-node-critical"}
    assert [rows["high"][i] for i in (1, 2, 4)] == ["1000", "false", "PreemptLowerPriority"]
    assert [rows["system-node-critical"][i] for i in (1, 2, 4)] == ["2000001000", "false", "PreemptLowerPriority"]
    assert rows["system-cluster-critical"][1] == "2000000000"
    assert plane.kubectl("get", "pc", "-o", "name").stdout.splitlines() == [
        "priorityclass.scheduling.k8s.io/high", "priorityclass.scheduling.k8s.io/system-cluster-critical",
        "priorityclass.scheduling.k8s.io/system-node-critical"]
    pc = yaml.safe_load(plane.kubectl("get", "priorityclass", "high", "-o", "yaml").stdout)
    assert (pc["value"], pc["description"], pc["preemptionPolicy"]) == (1000, "urgent", "PreemptLowerPriority")
    assert "globalDefault" not in pc  # false is omitted, as kube-apiserver writes it
    described = plane.kubectl("describe", "priorityclass", "high").stdout
    assert re.findall(r"^(\w+):\s+(.*)$", described, re.M) == [
        ("Name", "high"), ("Value", "1000"), ("GlobalDefault", "false"), ("PreemptionPolicy", "PreemptLowerPriority"),
        ("Description", "urgent"), ("Annotations", "<none>"), ("Events", "<none>")]
    resources = plane.kubectl("api-resources", "--api-group=scheduling.k8s.io").stdout.splitlines()
    assert re.split(r"\s+", resources[1]) == ["priorityclasses", "pc", "scheduling.k8s.io/v1", "false",
                                              "PriorityClass"]


def test_system_classes_cannot_be_deleted_and_names_are_reserved(plane):
    r = plane.kubectl("delete", "priorityclass", "system-node-critical", check=False)
    assert r.returncode == 1
    assert r.stderr == ('Error from server (Forbidden): priorityclasses.scheduling.k8s.io "system-node-critical" is '
                        "forbidden: this is a system priority class and cannot be deleted\n")
    r = plane.kubectl("create", "priorityclass", "system-mine", "--value=1", check=False)
    assert r.returncode == 1 and ("metadata.name: Forbidden: priority class names with 'system-' prefix are reserved "
                                  "for system use only. error: system-mine is not a known system priority class"
                                  ) in r.stderr
    r = plane.kubectl("create", "priorityclass", "huge", "--value=1000000001", check=False)
    assert r.returncode == 1 and "maximum allowed value of a user defined priority is 1000000000" in r.stderr


def test_a_pod_gets_its_class_priority_and_an_unknown_class_is_forbidden(plane, tmp_path):
    manifest = tmp_path / "p.yaml"
    manifest.write_text(POD % ("urgent", "priorityClassName: high"))
    plane.kubectl("create", "-f", str(manifest))
    pod = yaml.safe_load(plane.kubectl("get", "pod", "urgent", "-o", "yaml").stdout)
    assert (pod["spec"]["priority"], pod["spec"]["preemptionPolicy"]) == (1000, "PreemptLowerPriority")
    manifest.write_text(POD % ("plain", ""))
    plane.kubectl("create", "-f", str(manifest))
    assert plane.json("get", "pod", "plain")["spec"]["priority"] == 0
    manifest.write_text(POD % ("lost", "priorityClassName: foo"))
    r = plane.kubectl("create", "-f", str(manifest), check=False)
    assert r.returncode == 1
    assert r.stderr == (f'Error from server (Forbidden): error when creating "{manifest}": pods "lost" is forbidden: '
                        "no PriorityClass with name foo was found\n")


def test_apply_configures_a_class_and_a_second_default_is_refused(plane, tmp_path):
    manifest = tmp_path / "pc.yaml"
    body = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": "everyone"},
            "value": 5, "globalDefault": True}
    manifest.write_text(yaml.safe_dump(body))
    assert plane.kubectl("apply", "-f", str(manifest)).stdout == "priorityclass.scheduling.k8s.io/everyone created\n"
    manifest.write_text(yaml.safe_dump({**body, "description": "the default"}))
    assert plane.kubectl("apply", "-f", str(manifest)).stdout == (
        "priorityclass.scheduling.k8s.io/everyone configured\n")
    assert plane.json("get", "pc", "everyone")["description"] == "the default"
    manifest.write_text(yaml.safe_dump({**body, "metadata": {"name": "rival"}}))
    r = plane.kubectl("create", "-f", str(manifest), check=False)
    assert r.returncode == 1 and r.stderr == (
        f'Error from server (Forbidden): error when creating "{manifest}": priorityclasses.scheduling.k8s.io "rival" '
        "is forbidden: PriorityClass everyone is already marked as default. Only one default can exist\n")
    pod = tmp_path / "p.yaml"
    pod.write_text(POD % ("defaulted", ""))
    plane.kubectl("create", "-f", str(pod))
    spec = plane.json("get", "pod", "defaulted")["spec"]
    assert (spec["priorityClassName"], spec["priority"]) == ("everyone", 5)
