"""`describe` of a job shows its restart accounting (docs/SEMANTICS.md S2/S3): per replica
type Active / Succeeded / Failed / Restarts, `Restart Count: N (backoffLimit M)`,
and the podRestarts bookkeeping one line per pod; a job without counters keeps
kubectl's generic output exactly (see test_describe.GOLDEN_18)."""
from __future__ import annotations

import copy

from phalanx.cli.describe import describe
from phalanx.cli.describe.jobs import has_restart_accounting
from tests.unit.test_describe import GOLDEN_18, JOB, JOB_EVENTS, NOW


def status_block(text: str) -> str:
    return text.split("\nStatus:\n", 1)[1].split("Events:\n", 1)[0]


def with_restarts(job: dict) -> dict:
    j = copy.deepcopy(job)
    st = j["status"]
    st["restartCount"] = 3
    st["replicaStatuses"]["Worker"].update({"restarts": 3, "failed": 1})
    st["replicaStatuses"]["Master"]["succeeded"] = 0
    st["podRestarts"] = {
        "pytest-worker-1": {"uid": "u-1", "containers": {}, "failureCounted": True},
        "pytest-worker-0": {"uid": "u-0", "containers": {"pytorch": 2, "init-pytorch": 1}},
    }
    return j


def test_counters_per_replica_type_and_restart_count_against_backoff_limit():
    out = describe(with_restarts(JOB), {"events": JOB_EVENTS}, NOW)
    assert status_block(out).split("  Pod Restarts:\n", 1)[1] == (
        "    pytest-worker-0:  init-pytorch=1, pytorch=2\n"
        "    pytest-worker-1:  pod failure counted\n"
        "  Replica Statuses:\n"
        "    Master:\n"
        "      Active:     1\n"
        "      Succeeded:  0\n"
        "      Failed:     0\n"
        "      Restarts:   0\n"
        "      Selector:   training.kubeflow.org/job-name=pytest,training.kubeflow.org/operator-name="
        "pytorchjob-controller,training.kubeflow.org/replica-type=master\n"
        "    Worker:\n"
        "      Active:     3\n"
        "      Succeeded:  0\n"
        "      Failed:     1\n"
        "      Restarts:   3\n"
        "      Selector:   training.kubeflow.org/job-name=pytest,training.kubeflow.org/operator-name="
        "pytorchjob-controller,training.kubeflow.org/replica-type=worker\n"
        "  Restart Count:  3 (backoffLimit 3)\n"
        "  Start Time:     2026-11-29T07:14:36Z\n")
    assert "Uid:" not in out and "Failure Counted" not in out  # bookkeeping is not dumped
    # Everything before Status is kubectl's generic form, as for a job without counters.
    assert out.split("\nStatus:\n", 1)[0] == GOLDEN_18.split("\nStatus:\n", 1)[0]
    assert out.split("Events:\n", 1)[1] == GOLDEN_18.split("Events:\n", 1)[1]


def test_backoff_limit_unset_and_total_missing():
    j = with_restarts(JOB)
    del j["spec"]["runPolicy"]["backoffLimit"]
    assert "  Restart Count:  3 (backoffLimit not set: operator default)\n" in describe(j, {}, NOW)
    del j["status"]["restartCount"]  # per-type counters alone still show the total line
    assert "  Restart Count:  0 (backoffLimit not set: operator default)\n" in describe(j, {}, NOW)


def test_without_counters_the_output_is_kubectls():
    assert not has_restart_accounting(JOB)
    assert describe(JOB, {"events": JOB_EVENTS}, NOW) == GOLDEN_18
    # Restarts after clean exits (Always) leave only the bookkeeping: shown compactly, no counters.
    j = copy.deepcopy(JOB)
    j["status"]["podRestarts"] = {"pytest-master-0": {"uid": "u", "containers": {"pytorch": 1}}}
    out = describe(j, {"events": JOB_EVENTS}, NOW)
    assert "  Pod Restarts:\n    pytest-master-0:  pytorch=1\n" in out
    assert "Restart Count" not in out and "      Restarts:" not in out
    assert out.replace("  Pod Restarts:\n    pytest-master-0:  pytorch=1\n", "") == GOLDEN_18


def test_odd_restart_fields_never_crash():
    for status in ({"restartCount": "x", "replicaStatuses": {"Worker": "nope"}},
                   {"restartCount": 1, "replicaStatuses": [], "podRestarts": {"p": "x", "q": {"containers": 5}}},
                   {"replicaStatuses": {"Worker": {"restarts": None}}, "podRestarts": []}):
        j = copy.deepcopy(JOB)
        j["status"] = status
        assert "Status:" in describe(j, {}, NOW)
