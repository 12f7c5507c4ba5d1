"""The timeline as an SVG picture and as a standalone HTML page embedding it (no external resource).

Every element carries classes and data attributes (``<g class="pod" data-pod data-uid>``, ``<rect
class="seg state-Running" data-start data-end>``, ``<path class="mark" data-reason>``) and a ``<title>``.
"""
from __future__ import annotations

import html
import re

from phalanx.timeline.model import STATES, Band, Mark, PodRow, Segment, Timeline
from phalanx.timeline.text import at, human

WIDTH = 1000
LABEL_W = 220  # the column of row labels
RIGHT = 28
TOP = 30
LANE_H = 16  # a band's or a row's height
LANE_GAP = 6
AXIS_H = 30
LEGEND_H = 26

# Pod states, then the job's conditions and the PodGroup's phases that are not pod states.
COLORS = {
    "Pending": "#bdbdbd", "Init": "#9ecae1", "Running": "#31a354", "CrashLoopBackOff": "#fdae6b",
    "Completed": "#3182bd", "Error": "#de2d26", "Terminating": "#756bb1",
    "Created": "#d9d9d9", "Restarting": "#fd8d3c", "Succeeded": "#3182bd", "Failed": "#de2d26",
    "Suspended": "#bcbddc", "Inqueue": "#c6dbef", "Unknown": "#969696",
}
OTHER_COLOR = "#e0e0e0"
_TICK_STEPS = (0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600,
               43200, 86400, 172800, 604800)


def color(state: str) -> str:
    return COLORS.get(state, OTHER_COLOR)


def num(x: float) -> str:
    """A time as data attributes carry it: seconds, at most 3 decimals (``12.0``)."""
    return repr(round(float(x), 3))


def view_end(tl: Timeline) -> float:
    """The time the picture's right edge stands for: past a finished job's last record by a little (4% of
    its life, at least half a second), so that the states it ended in show; a running job's is now."""
    return tl.end + max(0.04 * tl.end, 0.5) if tl.finished else max(tl.end, 1e-3)


def drawn_end(tl: Timeline, end: float, open_: bool) -> float:
    """Where a segment or span is drawn to: an open one of a finished job runs to the picture's edge."""
    return view_end(tl) if open_ and tl.finished else end


def tick_step(span: float, most: int = 10) -> float:
    for step in _TICK_STEPS:
        if span / step <= most:
            return step
    return _TICK_STEPS[-1] * (span // (_TICK_STEPS[-1] * most) + 1)


def _cls(state: str) -> str:
    return "state-" + re.sub(r"[^A-Za-z0-9_-]", "_", state)


def _attrs(**kv: object) -> str:
    """``key="value"`` pairs, ``data_start`` written ``data-start``; None values left out."""
    parts = []
    for k, v in kv.items():
        if v is None:
            continue
        name = "class" if k == "cls" else k.replace("_", "-")
        parts.append(f'{name}="{html.escape(str(v), quote=True)}"')
    return " ".join(parts)


def _title(text: str) -> str:
    return f"<title>{html.escape(text, quote=False)}</title>"


class _Canvas:
    def __init__(self, tl: Timeline, width: int) -> None:
        self.tl = tl
        self.width = width
        self.span = view_end(tl)
        self.plot_w = width - LABEL_W - RIGHT
        self.out: list[str] = []

    def x(self, t: float) -> float:
        return round(LABEL_W + max(0.0, min(t, self.span)) / self.span * self.plot_w, 2)

    def add(self, s: str) -> None:
        self.out.append(s)


def _band(c: _Canvas, band: Band, y: float, label: str) -> None:
    c.add(f'<g {_attrs(cls=f"band {band.kind}", data_name=band.name)}>')
    c.add(f'<text {_attrs(cls="label", x=8, y=y + LANE_H - 4)}>{html.escape(label)}</text>')
    for s in band.spans:
        x0, x1 = c.x(s.start), c.x(drawn_end(c.tl, s.end, s.open))
        until = "now" if s.open and not c.tl.finished else at(s.end)
        tip = (f"{label}: {s.state}" + (f" ({s.reason})" if s.reason and s.reason != s.state else "")
               + f" {at(s.start)} → {until}" + (f"\n{s.message}" if s.message else ""))
        attrs = _attrs(cls=f"span {_cls(s.state)}" + (" open" if s.open else ""), x=x0, y=y,
                       width=max(round(x1 - x0, 2), 0.5), height=LANE_H, fill=color(s.state), data_state=s.state,
                       data_start=num(s.start), data_end=num(s.end), data_reason=s.reason or None)
        c.add(f"<rect {attrs}>{_title(tip)}</rect>")
        if x1 - x0 > 7 * len(s.state) + 6:
            c.add(f'<text {_attrs(cls="span-label", x=x0 + 3, y=y + LANE_H - 4)}>{html.escape(s.state)}</text>')
    c.add("</g>")


def _seg_tip(row: PodRow, s: Segment, finished: bool) -> str:
    end = "now" if s.open and not finished else at(s.end)
    tip = f"{row.name}: {s.status} {at(s.start)} → {end} ({human(s.duration)})"
    extra = [f"restarts {s.restarts}"] if s.restarts else []
    if s.exit_code is not None and s.state in ("Error", "Completed", "CrashLoopBackOff"):
        extra.append(f"exit code {s.exit_code}")
    if s.node:
        extra.append(f"node {s.node}")
    return tip + (", " + ", ".join(extra) if extra else "")


def _row(c: _Canvas, row: PodRow, instance: int, y: float) -> None:
    label = row.name + (f" #{instance}" if instance > 1 else "")
    deleted = None if row.deleted is None else num(row.deleted)
    group = _attrs(cls="pod", data_pod=row.name, data_uid=row.uid, data_instance=instance,
                   data_restarts=row.restarts, data_deleted=deleted)
    c.add(f"<g {group}>")
    c.add(f'<text {_attrs(cls="label", x=8, y=y + LANE_H - 4)}>{html.escape(label)}'
          f'{_title(f"{row.name} (uid {row.uid})")}</text>')
    for s in row.segments:
        x0, x1 = c.x(s.start), c.x(drawn_end(c.tl, s.end, s.open))
        attrs = _attrs(cls=f"seg {_cls(s.state)}" + (" open" if s.open else ""), x=x0, y=y,
                       width=max(round(x1 - x0, 2), 0.5), height=LANE_H, fill=color(s.state), data_state=s.state,
                       data_status=s.status, data_start=num(s.start), data_end=num(s.end),
                       data_restarts=s.restarts, data_exit_code=s.exit_code)
        c.add(f"<rect {attrs}>{_title(_seg_tip(row, s, c.tl.finished))}</rect>")
    for g in row.gaps():
        x0, x1 = c.x(g.start), c.x(g.end)
        yy = y + LANE_H + 2
        attrs = _attrs(cls="gap", d=f"M{x0},{yy} H{x1}", stroke="#e6550d", data_start=num(g.start),
                       data_end=num(g.end), data_restart=g.restart)
        tip = f"{row.name}: back-off {human(g.duration)} before restart {g.restart}"
        c.add(f"<path {attrs}>{_title(tip)}</path>")
    c.add("</g>")


def _mark(c: _Canvas, m: Mark, y: float, top: float, bottom: float) -> None:
    x = c.x(m.t)
    tip = (f"{at(m.t)} {m.reason}" + (f" ({m.type})" if m.type else "") + (f" {m.object}" if m.object else "")
           + (f": {m.message}" if m.message else "") + (f" (x{m.count})" if m.count > 1 else ""))
    attrs = dict(data_t=num(m.t), data_reason=m.reason, data_type=m.type or None, data_object=m.object or None,
                 data_count=m.count, data_pod_uid=m.pod_uid or None)
    if m.kind == "event":
        kind = "event " + ("warning" if m.type == "Warning" else "normal")
        fill = "#d62728" if m.type == "Warning" else "#555555"
        d = f"M{x - 4},{y} L{x + 4},{y} L{x},{y + 7} Z"
        c.add(f'<path {_attrs(cls=f"mark {kind}", d=d, fill=fill, **attrs)}>{_title(tip)}</path>')
    else:
        d = f"M{x},{top} V{bottom}"
        line = _attrs(cls=f"mark {m.kind}", d=d, stroke="#d62728", stroke_width=2, stroke_dasharray="5,3",
                      fill="none", **attrs)
        c.add(f"<path {line}>{_title(tip)}</path>")


def _axis(c: _Canvas, y: float) -> None:
    c.add(f'<g {_attrs(cls="axis", data_end=num(c.tl.end))}>')
    c.add(f'<path {_attrs(cls="axis-line", d=f"M{LABEL_W},{y} H{LABEL_W + c.plot_w}", stroke="#333")}/>')
    step = tick_step(c.span)
    i = 0
    while i * step <= c.span + 1e-9:
        t = i * step
        x = c.x(t)
        c.add(f'<g {_attrs(cls="tick", data_t=num(t))}><path d="M{x},{y} V{y + 5}" stroke="#333"/>'
              f'<text {_attrs(x=x, y=y + 17, text_anchor="middle")}>{human(t)}</text></g>')
        i += 1
    c.add(f'<text {_attrs(cls="axis-title", x=8, y=y + 17)}>seconds since created</text>')
    c.add("</g>")


def _legend(c: _Canvas, y: float) -> None:
    c.add('<g class="legend">')
    x = 8.0
    for state in STATES:
        c.add(f'<g {_attrs(cls="legend-item", data_state=state)}>'
              f'<rect {_attrs(cls=_cls(state), x=x, y=y, width=12, height=12, fill=color(state))}/>'
              f'<text {_attrs(x=x + 16, y=y + 10)}>{html.escape(state)}</text></g>')
        x += 30 + 7 * len(state)
    c.add(f'<g class="legend-item" data-state="gap"><path d="M{x},{y + 6} H{x + 14}" stroke="#e6550d" '
          f'stroke-width="2"/><text x="{x + 18}" y="{y + 10}">back-off</text></g>')
    x += 90
    c.add(f'<g class="legend-item" data-state="event"><path d="M{x},{y + 2} L{x + 8},{y + 2} L{x + 4},{y + 9} Z" '
          f'fill="#555555"/><text x="{x + 12}" y="{y + 10}">event</text></g>')
    c.add("</g>")


_STYLE = ("text{font-family:sans-serif;font-size:11px;fill:#222}.span-label{font-size:10px;fill:#111}"
          ".gap{stroke-width:2;fill:none}.seg,.span{stroke:#fff;stroke-width:0.5}.open{opacity:0.85}"
          ".title{font-size:13px;font-weight:bold}")


def render(tl: Timeline, width: int = WIDTH) -> str:
    """The SVG text of the timeline."""
    c = _Canvas(tl, width)
    lane = LANE_H + LANE_GAP
    pod_marks = [m for m in tl.marks if m.kind == "event" and m.pod_uid]
    other_marks = [m for m in tl.marks if m not in pod_marks]
    y_job = TOP
    y_pg = y_job + lane
    y_events = y_pg + lane
    y_rows = y_events + lane
    height = y_rows + lane * max(len(tl.rows), 1) + AXIS_H + LEGEND_H
    what = f"{tl.job_kind or 'Job'} {tl.namespace + '/' if tl.namespace else ''}{tl.job_name}"
    root = _attrs(xmlns="http://www.w3.org/2000/svg", width=width, height=height, viewBox=f"0 0 {width} {height}",
                  cls="timeline", data_namespace=tl.namespace, data_kind=tl.job_kind, data_name=tl.job_name,
                  data_uid=tl.job_uid, data_t0=repr(round(tl.t0, 3)), data_end=num(tl.end), data_finished=str(tl.finished).lower(),
                  data_state=tl.state, data_truncated=str(tl.truncated).lower())
    c.add(f"<svg {root}>")
    c.add(_title(f"{what}: {tl.state or 'no state'}"))
    c.add(f"<style>{_STYLE}</style>")
    c.add(f'<text {_attrs(cls="title", x=8, y=18)}>{html.escape(what)}: {html.escape(tl.state or "no state")}'
          + (" (history truncated)" if tl.truncated else "") + "</text>")
    _band(c, tl.job, y_job, "job")
    _band(c, tl.podgroup, y_pg, "podgroup")
    c.add(f'<g class="events"><text {_attrs(cls="label", x=8, y=y_events + LANE_H - 4)}>events</text>')
    for m in other_marks:
        if m.kind == "event":
            _mark(c, m, y_events + 4, 0, 0)
    c.add("</g>")
    c.add('<g class="rows">')
    seen: dict[str, int] = {}
    row_y: dict[str, float] = {}
    for i, row in enumerate(tl.rows):
        seen[row.name] = seen.get(row.name, 0) + 1
        row_y[row.uid] = y_rows + i * lane
        _row(c, row, seen[row.name], row_y[row.uid])
    c.add("</g>")
    c.add('<g class="marks">')
    for m in pod_marks:
        _mark(c, m, row_y.get(m.pod_uid, y_events) - 5, 0, 0)
    bottom = y_rows + lane * max(len(tl.rows), 1)
    for m in other_marks:
        if m.kind != "event":
            _mark(c, m, 0, y_job - 4, bottom)
    c.add("</g>")
    _axis(c, bottom + 2)
    _legend(c, bottom + AXIS_H + 4)
    c.add("</svg>")
    return "\n".join(c.out) + "\n"


def render_html(tl: Timeline, width: int = WIDTH) -> str:
    """A standalone page: the SVG inline, nothing loaded from elsewhere."""
    what = html.escape(f"{tl.job_kind or 'Job'} {tl.namespace}/{tl.job_name}")
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            f"<title>Timeline of {what}</title>\n"
            "<style>body{font-family:sans-serif;margin:16px;color:#222}svg{max-width:100%;height:auto}</style>\n"
            f"</head>\n<body>\n<h1>Timeline of {what}</h1>\n{render(tl, width)}</body>\n</html>\n")
