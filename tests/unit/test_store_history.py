"""store.history: a job's state history file (append, bound, torn lines, names checked, removal)."""
from __future__ import annotations

import pytest

from phalanx.store import history as H
from phalanx.store.history import JobHistories, JobKey, Record

KEY = JobKey("default", "PyTorchJob", "pytest", "uid-1")


def test_records_come_back_in_order_and_go_with_the_job(tmp_path):
    h = JobHistories(tmp_path)
    recs = [Record(1.0, "Job", "pytest", "uid-1", "Created", {"reason": "PyTorchJobCreated"}),
            Record(2.5, "Pod", "pytest-master-0", "p1", "Pending", {"restarts": 0})]
    h.append(KEY, recs[:1])
    h.append(KEY, recs[1:])
    assert h.read(KEY) == recs
    assert JobHistories(tmp_path).read(KEY) == recs  # another reader: no control plane needed
    assert h.find("default", "PyTorchJob", "pytest") == [KEY] and h.keys() == [KEY]
    h.delete(KEY)
    assert h.read(KEY) == [] and h.keys() == []


def test_a_torn_last_line_is_skipped(tmp_path):
    h = JobHistories(tmp_path)
    h.append(KEY, [Record(1.0, "Job", "pytest", "uid-1", "Created")])
    with open(h.path(KEY), "a") as f:
        f.write('{"t": 2, "kind": "Po')
    assert [r.state for r in h.read(KEY)] == ["Created"]


def test_past_the_bound_only_the_jobs_states_are_kept_after_one_mark(tmp_path, monkeypatch):
    monkeypatch.setattr(H, "MAX_RECORDS", 3)
    h = JobHistories(tmp_path)
    pods = [Record(float(i), "Pod", "p", "u", str(i)) for i in range(5)]
    h.append(KEY, pods)
    h.append(KEY, [Record(9.0, "Job", "pytest", "uid-1", "Succeeded")])
    got = h.read(KEY)
    assert [r.kind for r in got] == ["Pod", "Pod", "Pod", "Truncated", "Job"]
    assert JobHistories(tmp_path).read(KEY) == got


@pytest.mark.parametrize("key", [JobKey("../etc", "PyTorchJob", "x", "u"), JobKey("default", "Py/Job", "x", "u"),
                                 JobKey("default", "PyTorchJob", "a_b", "u"), JobKey("default", "PyTorchJob", "x", "../u")])
def test_names_are_checked_before_they_touch_a_path(tmp_path, key):
    with pytest.raises(ValueError):
        JobHistories(tmp_path).path(key)
