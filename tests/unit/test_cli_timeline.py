"""`phalanx timeline` with no control plane running (it reads $PHALANX_HOME/history): the text, each
picture format, how a job is named (TYPE/NAME or NAME), the errors; and describe's Timeline section."""
from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from typer.testing import CliRunner

from phalanx.cli.describe import describe
from phalanx.cli.main import app
from phalanx.store.history import JobHistories, JobKey
from tests.unit.test_describe import JOB, NOW, norm
from tests.unit.test_timeline import crash_looping_p5


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("PHALANX_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def record(home: Path, kind: str = "PyTorchJob", name: str = "pytest", uid: str = "job-uid",
           namespace: str = "default") -> JobKey:
    key = JobKey(namespace, kind, name, uid)
    JobHistories(home / "history").append(key, crash_looping_p5())
    return key


def timeline(*args: str):
    return CliRunner().invoke(app, ["timeline", *args])


def test_prints_the_text_timeline(home):
    record(home)
    for target in ("pytest", "pytorchjob/pytest", "pytorchjobs/pytest", "PyTorchJob/pytest"):
        r = timeline(target)
        assert r.exit_code == 0, r.output
        assert r.stdout.splitlines()[0] == "job              +0s Created, +1.1s Running, +7.6s Succeeded"
        assert "pytest-worker-0  +1s Running, +2s Error (exit 1), +3s Running (restart 1)" in r.stdout


@pytest.mark.parametrize("suffix", [".svg", ".html", ".png"])
def test_writes_the_picture_named_by_the_suffix(home, tmp_path, suffix):
    record(home)
    out = tmp_path / f"p5{suffix}"
    r = timeline("pytest", "-o", str(out))
    assert r.exit_code == 0, r.output
    assert f"wrote {out}" in r.output
    data = out.read_bytes()
    if suffix == ".png":
        assert data.startswith(b"\x89PNG")
    else:
        text = data.decode()
        svg = text[text.index("<svg "):text.index("</svg>") + 6]
        assert ET.fromstring(svg).get("data-name") == "pytest"


def test_namespace_flag_and_the_newest_history_of_a_name(home):
    record(home, namespace="team-a", uid="old")
    newest = record(home, namespace="team-a", uid="new")
    assert timeline("pytest").exit_code == 1  # not in default
    r = timeline("pytest", "-n", "team-a")
    assert r.exit_code == 0 and "pytest-worker-0" in r.stdout
    assert JobHistories(home / "history").find("team-a", "PyTorchJob", "pytest")[-1] == newest


def test_a_job_without_history_is_a_clear_error_naming_it(home):
    r = timeline("pytorchjob/missing")
    assert r.exit_code == 1
    assert r.stderr.startswith("error: pytorchjob/missing: no state history in namespace default (looked in "
                               f"{home / 'history'}")
    r = timeline("missing")
    assert r.exit_code == 1 and r.stderr.startswith("error: job missing: no state history in namespace default")


def test_one_name_of_two_kinds_must_be_named_with_its_kind(home):
    record(home)
    record(home, kind="TFJob")
    r = timeline("pytest")
    assert r.exit_code == 2
    assert r.stderr.strip() == ("error: several jobs named pytest in namespace default (pytorchjob/pytest, "
                                "tfjob/pytest): name one as TYPE/NAME")
    assert timeline("tfjob/pytest").exit_code == 0


@pytest.mark.parametrize("args, message", [
    (("pod/x",), "error: pod/x has no timeline: only jobs (pytorchjob, tfjob, xgboostjob, paddlejob, jaxjob, "
                 "mpijob) have one"),
    (("widgets/x",), 'error: the server doesn\'t have a resource type "widgets"'),
    (("pytorchjob/",), "error: arguments in resource/name form must have a single resource and name"),
    (("Bad_Name",), "error: name 'Bad_Name': a lowercase RFC 1123 subdomain must consist of"),
    (("x", "-n", "Bad_NS"), "error: namespace 'Bad_NS': a lowercase RFC 1123 subdomain"),
    (("x", "-o", "x.pdf"), "error: -o: x.pdf: the file name must end in .svg, .png, .html"),
])
def test_bad_input_is_refused_naming_the_field(home, args, message):
    r = timeline(*args)
    assert r.exit_code == 2, r.output
    assert r.stderr.startswith(message)


def test_describe_appends_the_timeline_when_a_history_exists():
    history = crash_looping_p5()
    text = describe(JOB, {"events": [], "history": history}, NOW)
    lines = norm(text)
    at = lines.index("Timeline:")
    assert lines[at + 1] == "job: +0s Created, +1.1s Running, +7.6s Succeeded"
    assert lines[at + 3] == "pytest-master-0: +1s Running, +7.5s Completed"
    assert lines[at + 4].startswith("pytest-worker-0: +1s Running, +2s Error (exit 1), +3s Running (restart 1)")
    assert [i for i, line in enumerate(lines) if line.startswith("Events:")] == [at + 5]
    raw = text.splitlines()[text.splitlines().index("Timeline:") + 1]
    assert raw.startswith("  job:")  # one level in, as kubectl's nested keys


def test_describe_without_a_history_is_unchanged():
    assert describe(JOB, {"events": []}, NOW) == describe(JOB, {"events": [], "history": []}, NOW)
    assert "Timeline:" not in describe(copy.deepcopy(JOB), {"events": []}, NOW)
