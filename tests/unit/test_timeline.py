"""The timeline model and its text: rows per pod instance (restarts as segments, a recreation as a new row),
back-off gaps, the job's and the PodGroup's bands, events and the deadline as marks (synthetic histories)."""
from __future__ import annotations

import pytest

from phalanx.store.history import TRUNCATED, Record
from phalanx.timeline import model, text
from phalanx.timeline.model import STATES, build, state_of

T0 = 1_800_000_000.0


def job(t, state, reason="", message=""):
    return Record(T0 + t, "Job", "pytest", "job-uid", state, {"reason": reason, "message": message})


def pg(t, phase):
    return Record(T0 + t, "PodGroup", "pytest", "pg-uid", phase, {})


def pod(t, name, uid, state, restarts=0, exit_code=None, node="las1"):
    detail = {"restarts": restarts, "node": node}
    if exit_code is not None:
        detail["exitCode"] = exit_code
    return Record(T0 + t, "Pod", name, uid, state, detail)


def event(t, reason, obj, type_="Normal", message="", count=1):
    return Record(T0 + t, "Event", obj.split("/")[1], "ev-" + reason, reason,
                  {"type": type_, "message": message, "object": obj, "count": count})


def crash_looping_p5() -> list[Record]:
    """Seed P5 in small: worker-0 fails every second, waits 1 s then 2 s; the job Succeeded while it waits."""
    w0 = "pytest-worker-0"
    return [
        job(0, "Created", "PyTorchJobCreated"), pg(0.1, "Pending"), pg(0.3, "Inqueue"),
        pod(0.4, "pytest-master-0", "m0", "Pending"), pod(0.4, w0, "w0", "Pending"),
        pg(0.5, "Running"),
        pod(1.0, "pytest-master-0", "m0", "Running"), pod(1.0, w0, "w0", "Running"),
        job(1.1, "Running", "PyTorchJobRunning"),
        pod(2.0, w0, "w0", "Error", 0, 1),
        pod(2.1, w0, "w0", "CrashLoopBackOff", 1, 1),
        event(2.1, "BackOff", f"Pod/{w0}", "Warning", "Back-off restarting failed container", 1),
        pod(3.0, w0, "w0", "Running", 1),
        pod(4.0, w0, "w0", "Error", 1, 1),
        pod(4.1, w0, "w0", "CrashLoopBackOff", 2, 1),
        event(4.1, "BackOff", f"Pod/{w0}", "Warning", "Back-off restarting failed container", 2),
        pod(6.0, w0, "w0", "Running", 2),
        pod(7.0, w0, "w0", "Error", 2, 1),
        pod(7.5, "pytest-master-0", "m0", "Completed", 0, 0),
        job(7.6, "Succeeded", "PyTorchJobSucceeded", "PyTorchJob pytest successfully completed."),
        pod(7.7, w0, "w0", "Terminating", 2), pod(7.9, w0, "w0", "<deleted>"),
    ]


@pytest.mark.parametrize("status, state", [
    ("Pending", "Pending"), ("ContainerCreating", "Pending"), ("SchedulingGated", "Pending"),
    ("ImagePullBackOff", "Pending"), ("Init:0/1", "Init"), ("Init:1/2", "Init"), ("PodInitializing", "Init"),
    ("Running", "Running"), ("NotReady", "Running"), ("CrashLoopBackOff", "CrashLoopBackOff"),
    ("Init:CrashLoopBackOff", "CrashLoopBackOff"), ("Completed", "Completed"), ("Error", "Error"),
    ("OOMKilled", "Error"), ("Signal:9", "Error"), ("ExitCode:3", "Error"), ("Init:Error", "Error"),
    ("Init:ExitCode:2", "Error"), ("Evicted", "Error"), ("Terminating", "Terminating"),
])
def test_every_status_column_value_has_a_drawn_state(status, state):
    assert state_of(status) == state
    assert state in STATES


def test_a_restart_in_place_is_segments_of_one_row_and_its_gaps_grow():
    tl = build(crash_looping_p5(), namespace="default", kind="PyTorchJob")
    (w0,) = tl.rows_of("pytest-worker-0")
    assert [s.status for s in w0.segments] == ["Pending", "Running", "Error", "CrashLoopBackOff", "Running",
                                               "Error", "CrashLoopBackOff", "Running", "Error", "Terminating"]
    assert [s.restarts for s in w0.segments if s.state == "Running"] == [0, 1, 2]
    assert all(a.end == b.start for a, b in zip(w0.segments, w0.segments[1:]))
    gaps = w0.gaps()
    assert [(round(g.start, 3), round(g.end, 3), g.restart) for g in gaps] == [(2.0, 3.0, 1), (4.0, 6.0, 2)]
    assert gaps[1].duration == pytest.approx(2 * gaps[0].duration)
    assert w0.deleted == pytest.approx(7.9) and w0.restarts == 2
    assert w0.segments[-1].end == pytest.approx(7.9) and not w0.segments[-1].open
    assert w0.segments[5].exit_code == 1


def test_rows_are_sorted_by_pod_name_naturally_and_a_recreation_is_a_new_row():
    recs = [job(0, "Created"), pod(1, "p-worker-10", "a", "Running"), pod(1, "p-worker-2", "b", "Running"),
            pod(2, "p-worker-2", "b", "Error", 0, 137), pod(3, "p-worker-2", "b", "<deleted>"),
            pod(3.5, "p-worker-2", "c", "Pending"), pod(4, "p-worker-2", "c", "Running")]
    tl = build(recs, now=T0 + 10)
    assert [(r.name, r.uid) for r in tl.rows] == [("p-worker-2", "b"), ("p-worker-2", "c"), ("p-worker-10", "a")]
    first, second = tl.rows_of("p-worker-2")
    assert first.deleted == 3 and second.deleted is None
    assert second.segments[-1].open and second.segments[-1].end == 10  # a running job's picture ends now
    assert text.lines(tl)[1:3] == [("p-worker-2", "+1s Running, +2s Error (exit 137), +3s deleted"),
                                   ("p-worker-2 #2", "+4s Running")]


def test_a_finished_job_ends_at_its_last_record_whatever_now_is():
    tl = build(crash_looping_p5(), now=T0 + 1000)
    assert tl.finished and tl.state == "Succeeded" and tl.end == pytest.approx(7.9)
    (m0,) = tl.rows_of("pytest-master-0")
    assert m0.segments[-1].status == "Completed" and m0.segments[-1].end == pytest.approx(7.9)


def test_a_running_job_without_now_ends_at_its_last_record():
    recs = crash_looping_p5()[:12]
    tl = build(recs)
    assert not tl.finished and tl.end == pytest.approx(recs[-1].t - T0)
    assert build(recs, now=T0 + 30).end == 30


def test_bands_hold_the_job_conditions_and_the_podgroup_phases():
    tl = build(crash_looping_p5())
    assert [(s.state, round(s.start, 3), round(s.end, 3)) for s in tl.job.spans] == [
        ("Created", 0.0, 1.1), ("Running", 1.1, 7.6), ("Succeeded", 7.6, 7.9)]
    assert tl.job.spans[-1].open and tl.job.spans[-1].message == "PyTorchJob pytest successfully completed."
    assert [s.state for s in tl.podgroup.spans] == ["Pending", "Inqueue", "Running"]
    assert tl.podgroup.name == "pytest" and tl.job_name == "pytest" and tl.job_uid == "job-uid"


def test_repeated_states_merge_and_a_changed_reason_splits():
    recs = [job(0, "Created"), job(1, "Restarting", "A"), job(2, "Restarting", "A"), job(3, "Restarting", "B"),
            pod(0, "x", "u", "Running"), pod(1, "x", "u", "Running")]
    tl = build(recs)
    assert [(s.state, s.reason) for s in tl.job.spans] == [("Created", ""), ("Restarting", "A"), ("Restarting", "B")]
    assert len(tl.rows[0].segments) == 1


def test_events_are_marks_on_their_pod_instance_or_the_job():
    recs = [job(0, "Created"), pod(1, "w", "old", "Running"), pod(2, "w", "old", "<deleted>"),
            pod(3, "w", "new", "Running"), event(1.5, "Killing", "Pod/w"), event(3.5, "BackOff", "Pod/w", "Warning"),
            event(0.5, "SuccessfulCreatePod", "PyTorchJob/pytest")]
    tl = build(recs)
    by_reason = {m.reason: m for m in tl.marks}
    assert by_reason["Killing"].pod_uid == "old" and by_reason["BackOff"].pod_uid == "new"
    assert by_reason["SuccessfulCreatePod"].pod_uid == "" and by_reason["BackOff"].type == "Warning"
    assert [m.reason for m in tl.marks] == ["SuccessfulCreatePod", "Killing", "BackOff"]


def test_the_deadline_is_marked_when_the_job_failed_of_it():
    recs = [job(0, "Created"), job(1, "Running"), pod(1, "w", "u", "Running"),
            job(15.2, "Failed", "DeadlineExceeded", "Job pytest has failed because it was active longer than "
                                                    "specified deadline"),
            pod(15.3, "w", "u", "Terminating"), pod(16, "w", "u", "<deleted>")]
    tl = build(recs, kind="PyTorchJob")
    mark = tl.deadline()
    assert mark is not None and mark.t == pytest.approx(15.2) and mark.kind == "deadline"
    assert mark.object == "PyTorchJob/pytest" and "deadline" in mark.message
    assert ("deadline", "+15.2s DeadlineExceeded") in text.lines(tl)
    assert text.lines(tl)[0] == ("job", "+0s Created, +1s Running, +15.2s Failed (DeadlineExceeded)")
    assert build(crash_looping_p5()).deadline() is None


def test_records_out_of_order_are_sorted_and_a_deleted_unknown_instance_is_ignored():
    recs = [pod(2, "w", "u", "Running"), job(0, "Created"), pod(1, "w", "u", "Pending"),
            pod(1.5, "v", "gone", "<deleted>")]
    tl = build(recs)
    assert tl.t0 == T0 and [r.uid for r in tl.rows] == ["u"]
    assert [s.status for s in tl.rows[0].segments] == ["Pending", "Running"]


def test_truncation_is_marked_and_said():
    recs = [job(0, "Created"), Record(T0 + 5, TRUNCATED, "pytest", "job-uid", TRUNCATED, {"message": "m"})]
    tl = build(recs)
    assert tl.truncated and tl.marks[0].kind == "truncated"
    assert text.lines(tl)[-1][0] == "note"


def test_an_empty_history_is_an_empty_timeline():
    tl = build([])
    assert tl.rows == [] and tl.end == 0 and tl.state == "" and text.render(tl) == ""


def test_text_of_p5_names_each_start_failure_restart_and_end():
    assert text.render(build(crash_looping_p5())) == (
        "job              +0s Created, +1.1s Running, +7.6s Succeeded\n"
        "podgroup         +0.1s Pending, +0.3s Inqueue, +0.5s Running\n"
        "pytest-master-0  +1s Running, +7.5s Completed\n"
        "pytest-worker-0  +1s Running, +2s Error (exit 1), +3s Running (restart 1), +4s Error (exit 1), "
        "+6s Running (restart 2), +7s Error (exit 1), +7.7s Terminating, +7.9s deleted\n")


def test_a_long_life_is_elided_in_the_middle():
    recs = [job(0, "Created")]
    for i in range(20):
        recs += [pod(2 * i, "w", "u", "Running", i), pod(2 * i + 1, "w", "u", "Error", i, 1)]
    items = text.lines(build(recs))[1][1].split(", ")
    assert len(items) == text.MAX_ITEMS - 1
    assert items[text.KEEP] == f"... {40 - 2 * text.KEEP} more ..." and items[-1] == "+39s Error (exit 1)"


@pytest.mark.parametrize("t, said", [(0, "+0s"), (1.25, "+1.2s"), (12.5, "+12.5s"), (59.96, "+60s"),
                                     (200, "+3m20s"), (3600, "+1h"), (7500, "+2h5m"), (-2, "-2s")])
def test_times_are_said_since_creation(t, said):
    assert text.at(t) == said


def test_a_pod_that_never_ran_says_its_one_state():
    tl = build([job(0, "Created"), pod(1, "w", "u", "Pending"), pod(2, "w", "u", "Init:0/1")])
    assert text.lines(tl)[-1] == ("w", "+1s Pending")
    assert model.state_of(tl.rows[0].segments[-1].status) == "Init"
