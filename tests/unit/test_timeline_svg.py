"""The timeline's pictures: the SVG's structure (parsed with xml.etree: groups, segments, bands, marks,
axis, legend, tooltips), the standalone HTML page, the PNG, and the simulator's set of SVGs."""
from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from phalanx.store.history import JobHistories, JobKey, Record
from phalanx.timeline import files, svg
from phalanx.timeline.model import STATES, build
from tests.unit.test_timeline import T0, crash_looping_p5, job, pod

NS = "{http://www.w3.org/2000/svg}"


def parse(text: str) -> ET.Element:
    return ET.fromstring(text)


def by_class(root: ET.Element, tag: str, cls: str) -> list[ET.Element]:
    return [e for e in root.iter(NS + tag) if cls in (e.get("class") or "").split()]


def title(e: ET.Element) -> str:
    t = e.find(NS + "title")
    return t.text or "" if t is not None else ""


@pytest.fixture
def p5() -> ET.Element:
    return parse(svg.render(build(crash_looping_p5(), namespace="default", kind="PyTorchJob")))


def test_root_says_which_job_and_how_it_ended(p5):
    assert p5.tag == NS + "svg" and p5.get("class") == "timeline"
    assert (p5.get("data-kind"), p5.get("data-namespace"), p5.get("data-name"), p5.get("data-uid")) == (
        "PyTorchJob", "default", "pytest", "job-uid")
    assert p5.get("data-state") == "Succeeded" and p5.get("data-finished") == "true"
    assert float(p5.get("data-end")) == pytest.approx(7.9) and float(p5.get("data-t0")) == T0
    assert title(p5) == "PyTorchJob default/pytest: Succeeded"


def test_one_group_per_pod_instance_with_a_rect_per_state(p5):
    pods = by_class(p5, "g", "pod")
    assert [(g.get("data-pod"), g.get("data-uid")) for g in pods] == [("pytest-master-0", "m0"),
                                                                      ("pytest-worker-0", "w0")]
    w0 = pods[1]
    segs = by_class(w0, "rect", "seg")
    assert [s.get("data-state") for s in segs] == ["Pending", "Running", "Error", "CrashLoopBackOff", "Running",
                                                   "Error", "CrashLoopBackOff", "Running", "Error", "Terminating"]
    assert all(f"state-{s.get('data-state')}" in s.get("class").split() for s in segs)
    assert (segs[1].get("data-start"), segs[1].get("data-end")) == ("1.0", "2.0")
    assert [s.get("data-restarts") for s in segs if s.get("data-state") == "Running"] == ["0", "1", "2"]
    assert segs[2].get("data-exit-code") == "1" and "exit code 1" in title(segs[2])
    assert title(segs[1]) == "pytest-worker-0: Running +1s → +2s (1s), node las1"
    assert w0.get("data-deleted") == "7.9" and w0.get("data-restarts") == "2"
    xs = [float(s.get("x")) for s in segs]
    assert xs == sorted(xs) and all(float(s.get("width")) > 0 for s in segs)


def test_backoff_gaps_are_drawn_and_grow(p5):
    (w0,) = [g for g in by_class(p5, "g", "pod") if g.get("data-pod") == "pytest-worker-0"]
    gaps = by_class(w0, "path", "gap")
    spans = [float(g.get("data-end")) - float(g.get("data-start")) for g in gaps]
    assert [g.get("data-restart") for g in gaps] == ["1", "2"]
    assert spans == pytest.approx([1.0, 2.0])
    assert title(gaps[1]) == "pytest-worker-0: back-off 2s before restart 2"


def test_bands_on_top_for_the_job_and_its_podgroup(p5):
    (jb,) = by_class(p5, "g", "job")
    (pgb,) = by_class(p5, "g", "podgroup")
    assert "band" in jb.get("class").split() and "band" in pgb.get("class").split()
    assert [r.get("data-state") for r in by_class(jb, "rect", "span")] == ["Created", "Running", "Succeeded"]
    assert [r.get("data-state") for r in by_class(pgb, "rect", "span")] == ["Pending", "Inqueue", "Running"]
    assert by_class(jb, "rect", "span")[1].get("data-reason") == "PyTorchJobRunning"
    top_of_rows = min(float(r.get("y")) for r in by_class(p5, "rect", "seg"))
    assert all(float(r.get("y")) < top_of_rows for r in by_class(p5, "rect", "span"))


def test_events_are_marks_with_their_reason(p5):
    marks = by_class(p5, "path", "mark")
    assert [m.get("data-reason") for m in marks] == ["BackOff", "BackOff"]
    assert [m.get("data-count") for m in marks] == ["1", "2"]
    assert all("warning" in m.get("class").split() and m.get("data-pod-uid") == "w0" for m in marks)
    assert "Back-off restarting failed container" in title(marks[0]) and marks[0].get("data-t") == "2.1"


def test_the_deadline_is_a_line_across_the_picture():
    recs = [job(0, "Created"), job(1, "Running"), pod(1, "w", "u", "Running"),
            job(15, "Failed", "DeadlineExceeded", "active longer than specified deadline"),
            pod(15.5, "w", "u", "Terminating"), pod(16, "w", "u", "<deleted>")]
    root = parse(svg.render(build(recs, kind="PyTorchJob")))
    (mark,) = by_class(root, "path", "deadline")
    assert "mark" in mark.get("class").split() and mark.get("data-reason") == "DeadlineExceeded"
    assert mark.get("data-t") == "15.0" and "active longer" in title(mark)
    (failed,) = [s for s in by_class(root, "rect", "span") if s.get("data-state") == "Failed"]
    x = float(mark.get("d").split()[0][1:].split(",")[0])
    assert x == pytest.approx(float(failed.get("x")), abs=0.05)  # where the job's Failed band begins
    top, bottom = (float(v) for v in mark.get("d").split(",")[1].split(" V"))
    (row,) = by_class(root, "rect", "seg")[-1:]
    assert top < float(failed.get("y")) and bottom > float(row.get("y"))  # across the bands and the rows


def test_axis_ticks_in_seconds_and_a_legend_of_every_state(p5):
    (axis,) = by_class(p5, "g", "axis")
    ticks = [float(t.get("data-t")) for t in by_class(axis, "g", "tick")]
    assert ticks[0] == 0 and ticks[-1] <= 7.9 + 0.5 and len(ticks) >= 4
    assert [t.text for t in axis.iter(NS + "text")][:2] == ["0s", "1s"]
    items = by_class(p5, "g", "legend-item")
    assert [i.get("data-state") for i in items][:len(STATES)] == list(STATES)


def test_the_states_a_finished_job_ended_in_show_to_the_right_edge(p5):
    edge = svg.WIDTH - svg.RIGHT
    (m0,) = [g for g in by_class(p5, "g", "pod") if g.get("data-pod") == "pytest-master-0"]
    last = by_class(m0, "rect", "seg")[-1]
    assert last.get("data-state") == "Completed" and last.get("data-end") == "7.9"  # the data: the last record
    assert float(last.get("x")) + float(last.get("width")) == pytest.approx(edge, abs=0.05)
    assert float(last.get("width")) > 10
    (jb,) = by_class(p5, "g", "job")
    succeeded = by_class(jb, "rect", "span")[-1]
    assert float(succeeded.get("x")) + float(succeeded.get("width")) == pytest.approx(edge, abs=0.05)


def test_an_unfinished_job_has_open_segments_up_to_now():
    root = parse(svg.render(build(crash_looping_p5()[:12], now=T0 + 20)))
    assert root.get("data-finished") == "false" and root.get("data-end") == "20.0"
    opened = by_class(root, "rect", "open")
    assert {e.get("data-end") for e in opened} == {"20.0"}
    assert any(title(e).endswith("→ now, node las1") or "→ now" in title(e) for e in opened)


def test_names_with_markup_are_escaped():
    recs = [job(0, "Created"), Record(T0 + 1, "Event", "x", "e", "Odd<&>", {"message": 'a "quoted" <b>',
                                                                          "object": "PyTorchJob/pytest"})]
    root = parse(svg.render(build(recs)))
    (mark,) = by_class(root, "path", "mark")
    assert mark.get("data-reason") == "Odd<&>" and 'a "quoted" <b>' in title(mark)


def test_html_page_is_standalone():
    page = svg.render_html(build(crash_looping_p5(), namespace="default", kind="PyTorchJob"))
    assert page.startswith("<!DOCTYPE html>") and "<svg " in page
    rest = page.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert "http" not in rest and "<script" not in rest and "<link" not in rest
    body = page[page.index("<svg "):page.index("</svg>") + len("</svg>")]
    assert by_class(parse(body), "g", "pod")


def test_files_write_each_format_by_its_suffix(tmp_path):
    tl = build(crash_looping_p5(), namespace="default", kind="PyTorchJob")
    for name in ("t.svg", "t.html", "t.png"):
        files.write(tl, tmp_path / name)
    assert parse((tmp_path / "t.svg").read_text()).get("data-name") == "pytest"
    assert (tmp_path / "t.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(ValueError, match=r"t\.pdf: the file name must end in \.svg, \.png, \.html"):
        files.write(tl, tmp_path / "t.pdf")


def test_write_all_draws_the_first_jobs_by_creation(tmp_path):
    h = JobHistories(tmp_path / "history")
    for i, name in enumerate(["c", "a", "b"]):
        h.append(JobKey("default", "PyTorchJob", name, f"u{i}"),
                 [Record(T0 + i, "Job", name, f"u{i}", "Created", {}), Record(T0 + i + 1, "Pod", f"{name}-w", "p",
                                                                              "Running", {})])
    written = files.write_all(h, tmp_path / "out" / "timelines", limit=2)
    assert [p.name for p in written] == ["default_PyTorchJob_c.svg", "default_PyTorchJob_a.svg"]
    assert all(isinstance(p, Path) and parse(p.read_text()).get("class") == "timeline" for p in written)
    assert files.write_all(JobHistories(tmp_path / "none"), tmp_path / "empty") == []
    assert not (tmp_path / "empty").exists()
