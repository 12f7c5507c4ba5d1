"""Workload files: validation naming the field, behaviour annotations, deterministic
generation; and what a container's command says it does (the seeds' sh subset)."""
from __future__ import annotations

import itertools
import math
import os
from pathlib import Path

import pytest

from phalanx.sim.arrivals import generate, load_workload, resolve
from phalanx.sim.behaviour import Behaviour, BehaviourError, behaviour_of, container_env, run_of
from phalanx.sim.script import Outcome, WaitFor, evaluate, wait_for
from phalanx.sim.units import DurationError, format_duration, parse_duration
from phalanx.sim.workload import WorkloadError, parse_workload

ROOT = Path(__file__).resolve().parents[2]
SEEDS = ROOT / "examples" / "seeds"


def sh(script: str) -> dict:
    return {"command": ["sh", "-c", script]}


# ----------------------------------------------------------------------------- durations


@pytest.mark.parametrize("text,seconds", [("30s", 30), ("1.5m", 90), ("1h30m", 5400), ("7d", 604800),
                                          ("100ms", 0.1), ("45", 45), (2.5, 2.5), ("1w", 604800)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("bad", ["", "soon", "-5s", "5x", "1h 2m", True, None, float("nan"), "inf"])
def test_parse_duration_refuses(bad):
    with pytest.raises(DurationError):
        parse_duration(bad)


def test_format_duration():
    assert [format_duration(x) for x in (0, 0.01, 5.25, 42, 303, 7500, 3 * 86400 + 4 * 3600)] == \
        ["0s", "10ms", "5.2s", "42s", "5m03s", "2h05m", "3d04h"]


# ----------------------------------------------------------------------------- commands


def test_every_seed_script_is_understood():
    p5 = (SEEDS / "p5-worker-fails.yaml").read_text()
    assert "RANK" in p5  # the test below follows that script
    script = ('trap exit INT TERM\nif [ "${RANK}" = "1" ]; then\n  sleep 10s & wait\n  exit 1\nelse\n'
              '  sleep 30s & wait\nfi\n')
    assert evaluate(sh(script), {"RANK": "1"}) == Outcome(10.0, 1)
    assert evaluate(sh(script), {"RANK": "2"}) == Outcome(30.0, 0)
    assert evaluate(sh("trap exit INT TERM; sleep 30s & wait"), {}) == Outcome(30.0, 0)
    assert evaluate(sh("trap exit INT TERM\nsleep 0.6 & wait && exit 1"), {}) == Outcome(0.6, 1)
    assert evaluate(sh('if [ "${RANK}" = "3" ]; then\nexit 0\nfi\nsleep 0.6 & wait\nexit 1'), {"RANK": "3"}) == \
        Outcome(0.0, 0)
    assert evaluate(sh('if [ "$POD_NAME" != "a" ]; then sleep 2; elif true; then sleep 5; fi; false'),
                    {"POD_NAME": "a"}) == Outcome(5.0, 1)
    assert evaluate(sh("sleep 1 || exit 3; false || exit 4"), {}) == Outcome(1.0, 4)
    assert evaluate({"command": ["sleep", "infinity"]}, {}) == Outcome(math.inf, 0)


def test_unknown_commands_fall_back_to_their_last_sleep_else_an_instant_exit():
    assert evaluate({"command": ["python", "train.py"], "args": ["--then", "sleep 5m"]}, {}) == Outcome(300.0, 0)
    assert evaluate({"command": ["python", "train.py"]}, {}) == Outcome(0.0, 0)
    assert evaluate(sh("torchrun train.py; sleep 2"), {}) == Outcome(2.0, 0)
    assert evaluate({"command": []}, {}) == Outcome(0.0, 0)


def test_init_container_waits_are_recognised():
    nslookup = sh("err=1;for i in $(seq 100); do if nslookup pytest-master-0; then err=0 && break; fi;"
                  "echo waiting for master; sleep 2; done; exit $err")
    assert wait_for(nslookup) == WaitFor("pytest-master-0", 2.0, 200.0)
    local = {"command": ["/usr/bin/python3", "-m", "phalanx.node.initwait", "m-0", "--interval", "0.5"]}
    assert wait_for(local) == WaitFor("m-0", 0.5, 200.0)
    assert wait_for(sh("sleep 3")) is None


def test_environment_from_values_and_field_refs():
    pod = {"metadata": {"name": "tftest-worker-0", "namespace": "ns", "labels": {"a": "b"}}, "spec": {"nodeName": "n"}}
    c = {"env": [{"name": "RANK", "value": "1"}, {"name": "POD_NAME", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.name"}}}, {"name": "L", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['a']"}}},
        {"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}
    assert container_env(pod, c) == {"RANK": "1", "POD_NAME": "tftest-worker-0", "L": "b", "N": "n"}


# ----------------------------------------------------------------------------- behaviour


def _pod(annotations: dict, index: str = "0") -> dict:
    return {"metadata": {"annotations": annotations, "labels": {"training.kubeflow.org/replica-index": index}},
            "spec": {"containers": [{"name": "c", "command": ["sh", "-c", "sleep 30s; exit 2"]}]}}


def test_behaviour_annotations_override_the_command_and_the_replica_index_overrides_the_type():
    c = {"name": "c", "command": ["sh", "-c", "sleep 30s; exit 2"]}
    assert run_of(_pod({}), c, False, 0, behaviour_of(_pod({}))) == Outcome(30.0, 2)
    b = behaviour_of(_pod({"sim.phalanx.dev/duration": "1h"}))
    assert run_of(_pod({}), c, False, 0, b) == Outcome(3600.0, 2)  # exit code still the command's
    anns = {"sim.phalanx.dev/duration": "1h", "sim.phalanx.dev/replica-1": "fail-after=10s exit-code=3 failures=2"}
    assert behaviour_of(_pod(anns, "0")) == Behaviour(duration=3600.0)
    b1 = behaviour_of(_pod(anns, "1"))
    assert [b1.outcome(n, Outcome(0.0)) for n in range(3)] == [Outcome(10.0, 3), Outcome(10.0, 3), Outcome(3600.0, 0)]
    forever = behaviour_of(_pod({"sim.phalanx.dev/fail-after": "5s"}))
    assert forever.outcome(99, Outcome(1.0)) == Outcome(5.0, 1)


@pytest.mark.parametrize("anns,field", [({"sim.phalanx.dev/duration": "soon"}, "sim.phalanx.dev/duration"),
                                        ({"sim.phalanx.dev/exit-code": "300"}, "sim.phalanx.dev/exit-code"),
                                        ({"sim.phalanx.dev/failures": "-1"}, "sim.phalanx.dev/failures"),
                                        ({"sim.phalanx.dev/replica-0": "speed=9"}, "sim.phalanx.dev/replica-0")])
def test_bad_behaviour_annotations_name_the_annotation(anns, field):
    with pytest.raises(BehaviourError, match=field.replace(".", r"\.")):
        behaviour_of(_pod(anns))


# ----------------------------------------------------------------------------- workload files


def test_errors_name_every_bad_field():
    bad = {"cluster": {"nodes": 0, "cpu": "lots", "queues": [{"metadata": {"name": "Bad_Name"}}]},
           "sim": {"backoffBase": "later", "schedulerPeriod": 0},
           "jobs": [{"at": "soon", "file": "x.yaml"}, {"manifest": {}, "file": "y.yaml"}],
           "generator": {"horizon": "1d", "arrivalRate": 0, "kinds": {"MPIJob": 1},
                         "duration": {"dist": "lognormal"}, "replicas": {"dist": "choice", "values": [0]}},
           "extra": 1}
    with pytest.raises(WorkloadError) as e:
        parse_workload(bad)
    text = str(e.value)
    for field in ("cluster.nodes", "cluster.cpu", "cluster.queues", "sim.backoffBase", "sim.schedulerPeriod",
                  "jobs[0].at", "jobs[1]", "generator.arrivalRate", "generator.kinds", "generator.duration",
                  "extra"):
        assert field in text, (field, text)


def test_generator_queues_must_exist_and_behaviour_must_name_a_replica_type(tmp_path):
    with pytest.raises(WorkloadError, match="generator.queues: 'research'"):
        parse_workload({"generator": {"horizon": "1h", "arrivalRate": 1, "queues": {"research": 1}}})
    w = parse_workload({"jobs": [{"file": str(SEEDS / "p5-worker-fails.yaml"), "behaviour": {"Chief": {}}}]})
    with pytest.raises(WorkloadError, match=r"jobs\[0\].behaviour.Chief: no replica type"):
        resolve(w, tmp_path)
    with pytest.raises(WorkloadError, match="cannot read"):
        resolve(parse_workload({"jobs": [{"file": "missing.yaml"}]}), tmp_path)


def test_load_resolves_files_relative_to_the_workload_and_applies_behaviour(tmp_path):
    (tmp_path / "w.yaml").write_text(
        "cluster: {nodes: 2, cpu: 8, memory: 16Gi}\n"
        f"jobs:\n- at: 1m\n  file: {os.path.relpath(SEEDS, tmp_path)}/p2-queue-capability.yaml\n"
        "  behaviour: {Worker: {duration: 5s}, 'Master[0]': {failAfter: 2s, failures: 1}}\n"
        "- {at: 10s, manifest: {kind: Queue, apiVersion: scheduling.volcano.sh/v1beta1, metadata: {name: q}},"
        " count: 2, every: 5s}\n")
    lw = load_workload(tmp_path / "w.yaml")
    assert [a.at for a in lw.explicit] == [10.0, 15.0, 60.0]
    queue, job = lw.explicit[2].objects
    assert queue["kind"] == "Queue" and job["kind"] == "PyTorchJob"
    specs = job["spec"]["pytorchReplicaSpecs"]
    assert specs["Worker"]["template"]["metadata"]["annotations"] == {"sim.phalanx.dev/duration": "5s"}
    assert specs["Master"]["template"]["metadata"]["annotations"] == {
        "sim.phalanx.dev/replica-0": "fail-after=2s failures=1"}
    assert lw.spec.cluster.node_specs()[1] == ("node-00001", {"cpu": "8", "memory": str(16 * 2**30), "pods": "110"})


GEN = {"cluster": {"nodes": 4, "queues": [{"metadata": {"name": "q2"}}]},
       "generator": {"seed": 3, "horizon": "1d", "arrivalRate": 20,
                     "replicas": {"dist": "choice", "values": [1, 2, 4], "weights": [1, 1, 1]},
                     "duration": {"dist": "lognormal", "median": "10m", "max": "1h"},
                     "failureProbability": 0.2, "kinds": {"PyTorchJob": 1, "TFJob": 1},
                     "queues": {"default": 1, "q2": 1}, "namespaces": 3}}


def test_generation_is_deterministic_in_the_seed_and_in_time_order():
    lw = resolve(parse_workload(GEN), Path("."))
    a = list(lw.arrivals())
    b = list(lw.arrivals())
    assert [(x.at, x.objects) for x in a] == [(x.at, x.objects) for x in b]
    c = list(lw.arrivals(seed=4))
    assert [x.at for x in a] != [x.at for x in c]
    assert all(x.at < y.at for x, y in zip(a, a[1:])) and 0 < a[0].at and a[-1].at < 86400
    # 20 jobs/hour for a day: Poisson, so 480 on average.
    assert 400 < len(a) < 560
    jobs = [x.objects[0] for x in a]
    assert {j["kind"] for j in jobs} == {"PyTorchJob", "TFJob"}
    assert {j["metadata"]["namespace"] for j in jobs} == {"ns-0000", "ns-0001", "ns-0002"}
    assert {j["spec"]["runPolicy"]["schedulingPolicy"]["queue"] for j in jobs} == {"default", "q2"}
    failing = [j for j in jobs if "sim.phalanx.dev/replica-" in str(j)]
    assert 0.1 < len(failing) / len(jobs) < 0.3


def test_generated_jobs_are_admitted_and_sized_as_drawn():
    from phalanx.api.admission import admit
    lw = resolve(parse_workload(GEN), Path("."))
    for arrival in itertools.islice(lw.arrivals(), 50):
        job = arrival.objects[0]
        admit(job, None)  # raises on an invalid job
        specs = job["spec"].get("pytorchReplicaSpecs") or job["spec"]["tfReplicaSpecs"]
        assert sum(s["replicas"] for s in specs.values()) in (1, 2, 4)


def test_generator_respects_its_horizon_and_max_jobs():
    g = parse_workload({"generator": {"horizon": "2h", "arrivalRate": 100, "maxJobs": 7}}).generator
    assert len(list(generate(g, 1))) == 7
    g = parse_workload({"generator": {"horizon": "10m", "arrivalRate": 6}}).generator
    assert all(a.at < 600 for a in generate(g, 1))
