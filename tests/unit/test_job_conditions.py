"""Condition mechanics as kubeflow pkg/util/status.go (docs/REFERENCE.md §6.1), as tables."""
from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from phalanx.controller.conditions import StatusWriter, update_job_conditions

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
T1 = T0 + timedelta(seconds=10)
S0, S1 = "2026-01-01T00:00:00Z", "2026-01-01T00:00:10Z"


def cond(ctype, status="True", reason=None, message="m", t=S0, tt=None):
    return {"type": ctype, "status": status, "reason": reason or f"PyTorchJob{ctype}", "message": message,
            "lastUpdateTime": t, "lastTransitionTime": tt or t}


def brief(status):
    return [(c["type"], c["status"], c["reason"]) for c in status.get("conditions", [])]


@pytest.mark.parametrize("before, new, after", [
    # appended at the end
    ([("Created", "True", "C")], ("Running", "True", "R"), [("Created", "True", "C"), ("Running", "True", "R")]),
    # Restarting removes Running, Running removes Restarting
    ([("Created", "True", "C"), ("Running", "True", "R")], ("Restarting", "True", "X"),
     [("Created", "True", "C"), ("Restarting", "True", "X")]),
    ([("Created", "True", "C"), ("Restarting", "True", "X")], ("Running", "True", "R"),
     [("Created", "True", "C"), ("Running", "True", "R")]),
    # Succeeded / Failed turn Running False, keeping its reason, and it stays in place
    ([("Created", "True", "C"), ("Running", "True", "R")], ("Succeeded", "True", "S"),
     [("Created", "True", "C"), ("Running", "False", "R"), ("Succeeded", "True", "S")]),
    ([("Created", "True", "C"), ("Running", "True", "R")], ("Failed", "True", "F"),
     [("Created", "True", "C"), ("Running", "False", "R"), ("Failed", "True", "F")]),
    # Succeeded does not block a later Failed
    ([("Created", "True", "C"), ("Succeeded", "True", "S")], ("Failed", "True", "F"),
     [("Created", "True", "C"), ("Succeeded", "True", "S"), ("Failed", "True", "F")]),
    # after Failed everything is frozen
    ([("Created", "True", "C"), ("Failed", "True", "F")], ("Succeeded", "True", "S"),
     [("Created", "True", "C"), ("Failed", "True", "F")]),
    ([("Created", "True", "C"), ("Failed", "True", "F")], ("Running", "True", "R"),
     [("Created", "True", "C"), ("Failed", "True", "F")]),
    # an existing condition of the same type moves to the end
    ([("Running", "True", "R"), ("Created", "True", "C")], ("Running", "False", "Sus"),
     [("Created", "True", "C"), ("Running", "False", "Sus")]),
])
def test_set_condition_table(before, new, after):
    status = {"conditions": [cond(t, s, r) for t, s, r in before]}
    update_job_conditions(status, new[0], new[1], new[2], "msg", T1)
    assert brief(status) == after


def test_same_type_status_and_reason_changes_nothing_not_even_the_message():
    status = {"conditions": [cond("Running", reason="R", message="old")]}
    assert not update_job_conditions(status, "Running", "True", "R", "new", T1)
    assert status["conditions"] == [cond("Running", reason="R", message="old")]


def test_same_type_and_status_with_another_reason_keeps_the_transition_time():
    status = {"conditions": [cond("Restarting", reason="A", message="a"), cond("Created", reason="C")]}
    assert update_job_conditions(status, "Restarting", "True", "B", "b", T1)
    assert status["conditions"][-1] == {"type": "Restarting", "status": "True", "reason": "B", "message": "b",
                                        "lastUpdateTime": S1, "lastTransitionTime": S0}


def test_new_condition_gets_now_for_both_timestamps():
    status = {}
    update_job_conditions(status, "Created", "True", "C", "c", T1)
    assert status["conditions"] == [{"type": "Created", "status": "True", "reason": "C", "message": "c",
                                     "lastUpdateTime": S1, "lastTransitionTime": S1}]


def test_created_is_never_removed():
    status = {"conditions": [cond("Created")]}
    for t in ("Running", "Restarting", "Succeeded"):
        update_job_conditions(status, t, "True", t, "x", T1)
    assert brief(status)[0] == ("Created", "True", "PyTorchJobCreated")


def test_writer_flip_and_flip_back_keeps_old_timestamps_and_emits_nothing():
    # TF re-applies Restarting after Running removed it in the same pass.
    before = {"conditions": [cond("Created"), cond("Restarting", reason="TFJobRestarting", message="r")]}
    st = StatusWriter("TFJob", "t", "default", before, T1)
    st.set("Running", "TFJobRunning", "run", event="Normal")
    st.set("Restarting", "TFJobRestarting", "r", event="Warning")
    status, events = st.finish()
    assert status == before and events == []


def test_writer_emits_an_event_only_for_a_condition_that_is_new_at_the_end():
    st = StatusWriter("PyTorchJob", "p", "default", {"conditions": [cond("Created")]}, T1)
    st.set("Running", "PyTorchJobRunning", "p is running", event="Normal")
    st.set("Succeeded", "PyTorchJobSucceeded", "p done", event="Normal")
    status, events = st.finish()
    assert brief(status)[1:] == [("Running", "False", "PyTorchJobRunning"), ("Succeeded", "True", "PyTorchJobSucceeded")]
    assert events == [("Normal", "PyTorchJobSucceeded", "p done")]


def test_writer_event_reason_may_differ_from_the_condition_reason():
    st = StatusWriter("PyTorchJob", "p", "default", {}, T1)
    st.set("Failed", "BackoffLimitExceeded", "too many", event="Normal", event_reason="PyTorchJobFailed")
    _, events = st.finish()
    assert events == [("Normal", "PyTorchJobFailed", "too many")]
