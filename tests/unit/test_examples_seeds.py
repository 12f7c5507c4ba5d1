"""examples/seeds/: one manifest per experiment variant of the seed notes, at the notes'
real timings, each passing admission as `phalanx run` would submit it."""
from __future__ import annotations

from pathlib import Path

import pytest

from phalanx.api.admission import admit
from phalanx.api.manifest import load_manifests

SEEDS = Path(__file__).resolve().parents[2] / "examples" / "seeds"
EXPECTED = {
    "p2-queue-capability.yaml": ["Queue", "PyTorchJob"],
    "p5-worker-fails.yaml": ["PyTorchJob"],
    "p6-all-workers-fail.yaml": ["PyTorchJob"],
    "p7-master-fails.yaml": ["PyTorchJob"],
    "exitcode-138.yaml": ["TFJob"],
    "t3-tf-worker-fails.yaml": ["TFJob"],
    "t4-tf-ps-fails.yaml": ["TFJob"],
    "c1-clean-pod-policy-all.yaml": ["PyTorchJob"],
    "c3-no-backoff-limit.yaml": ["PyTorchJob"],
    "d1-deadline-5s.yaml": ["PyTorchJob"],
    "d2-deadline-15s.yaml": ["PyTorchJob"],
}


def _docs(name: str) -> list[dict]:
    path = SEEDS / name
    return load_manifests(path.read_text(), source=str(path))


def test_every_variant_of_the_notes_has_a_manifest_and_nothing_else_is_there():
    assert sorted(p.name for p in SEEDS.glob("*") if p.is_file()) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(p.name for p in SEEDS.glob("*.yaml")))
def test_seed_example_passes_admission(name):
    docs = _docs(name)
    assert [d["kind"] for d in docs] == EXPECTED.get(name)
    for d in docs:
        stored = admit(d)
        assert stored["metadata"]["name"] == d["metadata"]["name"]
    text = (SEEDS / name).read_text()
    assert text.startswith("# docs/REFERENCE.md ") or text.startswith("# Seed 001")  # which scenario, what was seen
    assert "Notes observed" in text and "Phalanx" in text


def _job(name: str) -> dict:
    return next(d for d in _docs(name) if d["kind"] in ("PyTorchJob", "TFJob"))


def _commands(job: dict) -> dict[str, str]:
    specs = job["spec"].get("pytorchReplicaSpecs") or job["spec"]["tfReplicaSpecs"]
    return {rt: " ".join(s["template"]["spec"]["containers"][0]["command"]) for rt, s in specs.items()}


def test_seed_examples_keep_the_notes_timings_and_policies():
    # Real timings, not scaled: the seed commands sleep 30 s (10 s / 15 s for the failing ones).
    assert "sleep 10s & wait" in _commands(_job("p5-worker-fails.yaml"))["Worker"]
    assert 'if [ "${RANK}" = "1" ]' in _commands(_job("p5-worker-fails.yaml"))["Worker"]
    assert "exit 1" in _commands(_job("p6-all-workers-fail.yaml"))["Worker"]
    assert _commands(_job("p7-master-fails.yaml"))["Master"].endswith("sleep 30s & wait && exit 1")
    ec = _job("exitcode-138.yaml")
    assert ec["spec"]["tfReplicaSpecs"]["Worker"]["restartPolicy"] == "ExitCode"
    assert ec["spec"]["tfReplicaSpecs"]["PS"]["restartPolicy"] == "Always"
    assert "exit 138" in _commands(ec)["Worker"]
    env = ec["spec"]["tfReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["env"]
    assert env == [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    assert "sleep 15s & wait && exit 1" in _commands(_job("t4-tf-ps-fails.yaml"))["PS"]
    assert _job("c1-clean-pod-policy-all.yaml")["spec"]["runPolicy"]["cleanPodPolicy"] == "All"
    assert "backoffLimit" not in _job("c3-no-backoff-limit.yaml")["spec"].get("runPolicy", {})
    assert _job("d1-deadline-5s.yaml")["spec"]["runPolicy"]["activeDeadlineSeconds"] == 5
    assert _job("d2-deadline-15s.yaml")["spec"]["runPolicy"]["activeDeadlineSeconds"] == 15
    queue = _docs("p2-queue-capability.yaml")[0]
    assert (queue["metadata"]["name"], queue["spec"]["capability"]) == ("default", {"cpu": 2})
    for name in EXPECTED:
        if name != "c3-no-backoff-limit.yaml":
            assert _job(name)["spec"]["runPolicy"]["backoffLimit"] == 3
        assert all("sleep 30s" in c or "sleep 15s" in c or "sleep 10s" in c for c in _commands(_job(name)).values())
