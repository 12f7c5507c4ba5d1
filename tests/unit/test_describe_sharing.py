"""`describe` of what sharing a cluster does (issue 18 point 4): a Queue's share, a PodGroup's
last preemption and reclaim, and a Kubeflow job's, found through its PodGroup. Objects and
events follow the scheduler's contract: annotations phalanx.dev/deserved (JSON resource list)
and phalanx.dev/reclaiming ("true" or absent) on Queues; Warning Events Preempted/Reclaimed
on the victim's PodGroup; the job controller's Restarting condition and event."""
from __future__ import annotations

import copy
from datetime import datetime, timezone

import pytest

from phalanx.api.registry import JOB_KINDS
from phalanx.cli.describe import describe
from phalanx.cli.describe.volcano import last_evictions


def T(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).astimezone(timezone.utc)


NOW = T("2026-11-29T08:00:00Z")


def norm(text: str) -> list[str]:
    return [" ".join(line.split()) for line in text.split("\n")]


# --------------------------------------------------------------------------
# Queue
# --------------------------------------------------------------------------

TEAM_A = {
    "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
    "metadata": {"name": "team-a", "annotations": {"phalanx.dev/deserved": '{"memory":"8Gi","cpu":"4"}',
                                                   "phalanx.dev/reclaiming": "true"}},
    "spec": {"weight": 1, "reclaimable": False, "parent": "root", "capability": {"cpu": "8", "memory": "16Gi"},
             "guarantee": {"resource": {"cpu": "1"}}},
    "status": {"allocated": {"memory": "2Gi", "cpu": "2"}, "state": "Open"},
}


def queue_event(reason: str, message: str, ts: str) -> dict:
    return {"involvedObject": {"kind": "Queue", "name": "team-a"}, "type": "Normal", "reason": reason,
            "message": message, "count": 1, "firstTimestamp": ts, "lastTimestamp": ts,
            "source": {"component": "volcano"}}


def test_describe_queue_spells_out_its_share_before_the_events():
    text = describe(TEAM_A, {"events": [queue_event("OpenQueueSucceed", "Open queue succeed",
                                                    "2026-11-29T07:59:00Z")]}, NOW)
    assert text.endswith(
        "Sharing:\n"
        "  Weight:       1\n"
        "  Reclaimable:  false\n"
        "  Guarantee:    cpu=1\n"
        "  Deserved:     cpu=4,memory=8Gi\n"
        "  Allocated:    cpu=2,memory=2Gi\n"
        "  Capability:   cpu=8,memory=16Gi\n"
        "  Reclaiming:   true\n"
        "Events:\n"
        "  Type    Reason            Age   From     Message\n"
        "  ----    ------            ----  ----     -------\n"
        "  Normal  OpenQueueSucceed  60s   volcano  Open queue succeed\n")
    # What it printed before is still there: the generic layout of every key.
    assert "Parent: root" in norm(text) and "State: Open" in norm(text)
    assert 'Annotations: phalanx.dev/deserved: {"memory":"8Gi","cpu":"4"}' in norm(text)


def test_describe_queue_unset_share_reads_none_reclaimable_defaults_true_reclaiming_false():
    bare = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": "q"}}
    lines = norm(describe(bare, {"events": []}, NOW))
    start = lines.index("Sharing:")
    assert lines[start:start + 9] == ["Sharing:", "Weight: <none>", "Reclaimable: true", "Guarantee: <none>",
                                      "Deserved: <none>", "Allocated: <none>", "Capability: <none>",
                                      "Reclaiming: false", "Events: <none>"]


def test_describe_queue_shows_a_deserved_annotation_that_is_not_json_as_it_is():
    q = copy.deepcopy(TEAM_A)
    q["metadata"]["annotations"]["phalanx.dev/deserved"] = "cpu: 4"
    assert "Deserved: cpu: 4" in norm(describe(q, {"events": []}, NOW))


# --------------------------------------------------------------------------
# PodGroup
# --------------------------------------------------------------------------

PREEMPTED = ("Evicted 4 pods (team-a/a-worker-4, team-a/a-worker-5, team-a/a-worker-6, team-a/a-worker-7) "
             "for job team-b/b (queue team-b)")
RECLAIMED = "Evicted 2 pods (team-a/a-worker-2, team-a/a-worker-3) for job team-c/c (queue team-c)"


def pg_event(reason: str, message: str, ts: str, name: str = "a", count: int = 1, first: str | None = None) -> dict:
    return {"involvedObject": {"kind": "PodGroup", "namespace": "team-a", "name": name}, "type": "Warning",
            "reason": reason, "message": message, "count": count, "firstTimestamp": first or ts,
            "lastTimestamp": ts, "source": {"component": "volcano"}}


def podgroup(phase: str = "Inqueue") -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
            "metadata": {"name": "a", "namespace": "team-a"},
            "spec": {"minMember": 4, "queue": "team-a"}, "status": {"phase": phase, "running": 4}}


def test_describe_podgroup_says_when_and_by_whom_it_was_last_preempted():
    events = [pg_event("Preempted", "an older preemption", "2026-11-29T07:40:00Z"),
              pg_event("Preempted", PREEMPTED, "2026-11-29T07:59:48Z"),
              {**pg_event("Unschedulable", "4/8 tasks in gang unschedulable", "2026-11-29T07:59:50Z"),
               "type": "Normal"}]
    text = describe(podgroup(), {"events": events}, NOW)
    assert f"Last Preempted: 12s ago: {PREEMPTED}" in norm(text)
    assert not any(line.startswith("Last Reclaimed") for line in norm(text))
    # The Warning events themselves are listed in the Events section, oldest first.
    tail = norm(text[text.index("Events:"):])
    assert tail[3:6] == ["Warning Preempted 20m volcano an older preemption",
                         f"Warning Preempted 12s volcano {PREEMPTED}",
                         "Normal Unschedulable 10s volcano 4/8 tasks in gang unschedulable"]
    # Before the Events, after everything the generic layout prints.
    assert text.index("Last Preempted:") > text.index("Status:") and text.index("Last Preempted:") < text.index(
        "Events:")


def test_describe_podgroup_shows_the_last_preemption_and_the_last_reclaim_each():
    events = [pg_event("Reclaimed", RECLAIMED, "2026-11-29T07:55:00Z", count=3, first="2026-11-29T07:30:00Z"),
              pg_event("Preempted", PREEMPTED, "2026-11-29T07:59:00Z")]
    lines = norm(describe(podgroup(), {"events": events}, NOW))
    assert f"Last Preempted: 60s ago: {PREEMPTED}" in lines
    assert f"Last Reclaimed: 5m ago: {RECLAIMED}" in lines  # a repeated event: its last occurrence
    assert f"Warning Reclaimed 5m (x3 over 30m) volcano {RECLAIMED}" in lines


def test_describe_podgroup_without_evictions_has_no_last_lines():
    text = describe(podgroup("Running"), {"events": [pg_event("Evict", "not ours", "2026-11-29T07:59:00Z")]}, NOW)
    assert "Last Preempted" not in text and "Last Reclaimed" not in text


def test_last_evictions_reads_event_series_and_event_time_and_ignores_other_objects():
    series = {"involvedObject": {"kind": "PodGroup", "name": "a"}, "reason": "Preempted", "message": "m1\nm2",
              "eventTime": "2026-11-29T07:00:00.000000Z",
              "series": {"count": 2, "lastObservedTime": "2026-11-29T07:59:30.000000Z"}}
    other_pg = pg_event("Reclaimed", "about b", "2026-11-29T07:59:59Z", name="b")
    a_pod = {"involvedObject": {"kind": "Pod", "name": "a-worker-4"}, "reason": "Preempted", "message": "x",
             "lastTimestamp": "2026-11-29T07:59:59Z"}
    assert last_evictions([series, other_pg, a_pod, "junk", {"reason": "Preempted"}], "a", NOW) == [
        ("Last Preempted", "30s ago: m1 m2")]
    assert last_evictions([other_pg], None, NOW) == [("Last Reclaimed", "1s ago: about b")]
    assert last_evictions([{"involvedObject": {"kind": "PodGroup", "name": "a"}, "reason": "Reclaimed"}], "a",
                          NOW) == [("Last Reclaimed", "<unknown>")]
    assert last_evictions(None, "a", NOW) == []


# --------------------------------------------------------------------------
# Kubeflow jobs
# --------------------------------------------------------------------------

RESTARTING_MESSAGE = ('PyTorchJob team-a/a is restarting because 4 pods were preempted: volcano: preempting to '
                      'accommodate a higher priority pod: team-b/b-worker-0 of job team-b/b (priority 1000)')


def job(kind: str) -> dict:
    return {"apiVersion": "kubeflow.org/v1", "kind": kind,
            "metadata": {"name": "a", "namespace": "team-a", "uid": "u-a"},
            "spec": {"runPolicy": {"backoffLimit": 3}},
            "status": {"conditions": [
                {"type": "Created", "status": "True", "reason": f"{kind}Created",
                 "message": f"{kind} a is created.", "lastTransitionTime": "2026-11-29T07:50:00Z"},
                {"type": "Running", "status": "False", "reason": f"{kind}Restarting",
                 "message": RESTARTING_MESSAGE, "lastTransitionTime": "2026-11-29T07:59:49Z"},
                {"type": "Restarting", "status": "True", "reason": f"{kind}Restarting",
                 "message": RESTARTING_MESSAGE, "lastTransitionTime": "2026-11-29T07:59:49Z"}]}}


@pytest.mark.parametrize("kind", JOB_KINDS)
def test_describe_job_shows_its_podgroups_last_preemption_restarting_and_the_events(kind):
    pg = podgroup()
    pg["status"]["conditions"] = [{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                                   "message": "4/8 tasks in gang unschedulable: 4 Insufficient cpu"}]
    restarting = {"involvedObject": {"kind": kind, "name": "a", "namespace": "team-a"}, "type": "Warning",
                  "reason": f"{kind}Restarting", "message": RESTARTING_MESSAGE, "count": 1,
                  "firstTimestamp": "2026-11-29T07:59:49Z", "lastTimestamp": "2026-11-29T07:59:49Z",
                  "source": {"component": f"{kind.lower()}-controller"}}
    # As the CLI gathers them: the job's events and its PodGroup's, sorted by time.
    events = [pg_event("Preempted", PREEMPTED, "2026-11-29T07:59:48Z"), restarting]
    text = describe(job(kind), {"events": events, "podgroup": pg}, NOW)
    lines = norm(text)
    assert f"Last Preempted: 12s ago: {PREEMPTED}" in lines
    assert "Type: Restarting" in lines and f"Message: {RESTARTING_MESSAGE}" in lines  # the condition
    assert "Waiting: PodGroup a is Inqueue: 4/8 tasks in gang unschedulable: 4 Insufficient cpu" in lines
    tail = lines[lines.index("Events:"):]
    assert tail[3:5] == [f"Warning Preempted 12s volcano {PREEMPTED}",
                         f"Warning {kind}Restarting 11s {kind.lower()}-controller {RESTARTING_MESSAGE}"]
    assert text.index("Last Preempted:") < text.index("Waiting:") < text.index("Events:")


def test_describe_job_takes_only_its_own_podgroups_evictions():
    events = [pg_event("Reclaimed", "someone else's", "2026-11-29T07:59:48Z", name="other")]
    text = describe(job("PyTorchJob"), {"events": events, "podgroup": podgroup()}, NOW)
    assert "Last Reclaimed" not in text
    without_pg = describe(job("PyTorchJob"), {"events": [pg_event("Preempted", PREEMPTED,
                                                                  "2026-11-29T07:59:48Z")]}, NOW)
    assert "Last Preempted" not in without_pg  # no PodGroup found for the job: nothing to say
