"""Container env and argv as the kubelet resolves them (phalanx.node.env)."""
from __future__ import annotations

import pytest

from phalanx.node.env import (
    ContainerConfigError,
    NoCommandError,
    PodContext,
    container_argv,
    container_env,
    expand,
)
from phalanx.node.instances import exit_code_of
from phalanx.node.processes import base_env

POD = {
    "metadata": {"name": "tftest-worker-0", "namespace": "ns1", "uid": "u-1",
                 "labels": {"app": "tf", "training.kubeflow.org/replica-index": "0"},
                 "annotations": {"scheduling.k8s.io/group-name": "tftest"}},
    "spec": {"nodeName": "las1", "serviceAccountName": "trainer", "containers": []},
}
CTX = PodContext(pod_ip="127.0.1.9", host_ip="127.0.0.1", node_allocatable={"cpu": "8", "memory": "16Gi"})


def env_of(entries, container=None):
    c = dict(container or {})
    c["env"] = entries
    return container_env(POD, c, CTX, "spec.containers[0]")


@pytest.mark.parametrize("text,expected", [
    ("$(A)", "1"),
    ("x$(A)y$(B)z", "x1y2z"),
    ("$(MISSING)", "$(MISSING)"),
    ("$$(A)", "$(A)"),
    ("$$", "$"),
    ("$(A", "$(A"),
    ("$A", "$A"),
    ("cost: 5$", "cost: 5$"),
    ("$()", "$()"),
    ("", ""),
])
def test_expand_follows_kubernetes_rules(text, expected):
    assert expand(text, {"A": "1", "B": "2"}.get) == expected


def test_env_values_in_order_with_expansion_of_earlier_only():
    got = env_of([{"name": "A", "value": "a"}, {"name": "B", "value": "$(A)-$(C)"}, {"name": "C", "value": "c"}])
    assert got == [("A", "a"), ("B", "a-$(C)"), ("C", "c")]


def test_predefined_variables_come_first_and_expand_in_env_and_argv():
    root = {"PHALANX_ROOT": "/home/u/pods/ns1_p_u-1/root"}
    c = {"env": [{"name": "HOSTFILE", "value": "$(PHALANX_ROOT)/etc/mpi/hostfile"}],
         "command": ["cat", "$(PHALANX_ROOT)/etc/mpi/hostfile"], "args": ["$$(PHALANX_ROOT)"]}
    got = container_env(POD, c, CTX, "spec.containers[0]", predefined=root)
    assert got == [("PHALANX_ROOT", "/home/u/pods/ns1_p_u-1/root"),
                   ("HOSTFILE", "/home/u/pods/ns1_p_u-1/root/etc/mpi/hostfile")]
    assert container_argv(c, dict(got), "spec.containers[0]") == [
        "cat", "/home/u/pods/ns1_p_u-1/root/etc/mpi/hostfile", "$(PHALANX_ROOT)"]


def test_the_container_may_override_a_predefined_variable_which_it_sees_before():
    got = container_env(POD, {"env": [{"name": "A", "value": "$(PHALANX_ROOT)/a"},
                                      {"name": "PHALANX_ROOT", "value": "/mine"},
                                      {"name": "B", "value": "$(PHALANX_ROOT)/b"}]},
                        CTX, "spec.containers[0]", predefined={"PHALANX_ROOT": "/r"})
    assert got == [("A", "/r/a"), ("PHALANX_ROOT", "/mine"), ("B", "/mine/b")]


def test_no_predefined_variables_by_default():
    assert env_of([{"name": "A", "value": "$(PHALANX_ROOT)"}]) == [("A", "$(PHALANX_ROOT)")]


@pytest.mark.parametrize("path,value", [
    ("metadata.name", "tftest-worker-0"),
    ("metadata.namespace", "ns1"),
    ("metadata.uid", "u-1"),
    ("metadata.labels['training.kubeflow.org/replica-index']", "0"),
    ("metadata.annotations['scheduling.k8s.io/group-name']", "tftest"),
    ("metadata.labels['absent']", ""),
    ("spec.nodeName", "las1"),
    ("spec.serviceAccountName", "trainer"),
    ("status.podIP", "127.0.1.9"),
    ("status.hostIP", "127.0.0.1"),
])
def test_field_refs(path, value):
    assert env_of([{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": path}}}]) == [("X", value)]


def test_unsupported_field_ref_names_the_field():
    with pytest.raises(ContainerConfigError) as e:
        env_of([{"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "spec.bogus"}}}])
    assert "spec.containers[0].env[0].valueFrom.fieldRef.fieldPath" in str(e.value)


def test_resource_field_refs():
    c = {"name": "main", "resources": {"limits": {"cpu": "500m", "memory": "100Mi"}, "requests": {"cpu": "250m"}}}
    got = dict(env_of([
        {"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
        {"name": "MCPU", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}}},
        {"name": "MEM", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}}},
        {"name": "RMEM", "valueFrom": {"resourceFieldRef": {"resource": "requests.memory"}}},
    ], c))
    assert got == {"CPU": "1", "MCPU": "250", "MEM": "100", "RMEM": str(100 * 2**20)}
    # No limit: the node's allocatable, as the kubelet does.
    got = dict(env_of([{"name": "CPU", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}}], {}))
    assert got == {"CPU": "8"}


def test_config_maps_and_secrets_are_refused_clearly():
    with pytest.raises(ContainerConfigError) as e:
        env_of([{"name": "X", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}])
    assert "spec.containers[0].env[0].valueFrom" in str(e.value) and "no ConfigMaps or Secrets" in str(e.value)
    with pytest.raises(ContainerConfigError):
        container_env(POD, {"envFrom": [{"configMapRef": {"name": "x"}}]}, CTX, "spec.containers[0]")


def test_argv_is_command_plus_args_with_expansion_and_no_shell():
    c = {"command": ["sh", "-c", "echo $HOME; echo $(POD)"], "args": ["it's", "$(POD)", "a b"]}
    argv = container_argv(c, {"POD": "p0"}, "spec.containers[0]")
    assert argv == ["sh", "-c", "echo $HOME; echo p0", "it's", "p0", "a b"]


def test_missing_command_says_images_are_not_run():
    with pytest.raises(NoCommandError) as e:
        container_argv({"image": "busybox", "args": []}, {}, "spec.containers[1]")
    msg = str(e.value)
    assert msg.startswith("spec.containers[1].command: Required value")
    assert "does not pull or run images" in msg and '"busybox"' in msg


def test_args_alone_run_as_an_image_without_entrypoint_runs_them():
    """`kubectl run x --image=busybox -- sh -c 'echo hi'` puts the command in args."""
    argv = container_argv({"image": "busybox", "args": ["sh", "-c", "echo $(X)"]}, {"X": "hi"}, "spec.containers[0]")
    assert argv == ["sh", "-c", "echo hi"]


def test_base_env_is_minimal():
    env = base_env("pod-a", {"PATH": "/venv/bin:/usr/bin", "HOME": "/root", "SECRET": "x", "TMPDIR": "/t"})
    assert env == {"PATH": "/venv/bin:/usr/bin", "HOME": "/root", "LANG": "C.UTF-8", "TMPDIR": "/t",
                   "HOSTNAME": "pod-a"}
    assert base_env("p", {})["PATH"].startswith("/usr/local/sbin")


@pytest.mark.parametrize("rc,code", [(0, 0), (1, 1), (-9, 137), (-15, 143), (-2, 130)])
def test_exit_code_of_signal_is_128_plus_n(rc, code):
    assert exit_code_of(rc) == code
