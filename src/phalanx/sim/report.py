"""What ``phalanx simulate`` shows and writes: a summary table, per-job rows
(CSV, JSON), the timeline (CSV) and a picture of utilisation, queue lengths
and each queue's cpu against its deserved share over time (SVG, PNG).

Everything written is a function of the simulation's result only (virtual
times, rounded to the millisecond; no wall-clock times, fixed SVG hash salt
and no dates in the pictures), so the same workload and seed give
byte-identical files. Wall time and speed-up are printed, never written.
"""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from rich.console import Console
from rich.table import Table

from phalanx.sim.metrics import RESOURCES, JobRecord, Timeline
from phalanx.sim.runner import SimResult
from phalanx.sim.units import format_duration

STATES = ("Succeeded", "Failed", "Unfinished", "Rejected")
JOB_COLUMNS = ("namespace", "name", "kind", "queue", "replicas", "cpu", "memory", "gpu", "submitted", "running",
               "all_running", "finished", "wait", "wait_all_pods", "run", "turnaround", "restarts", "final_state",
               "reason")
PLOT_BINS = 2000


def _r(x: float | None, digits: int = 3) -> float | None:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return None
    v = round(float(x), digits)
    return 0.0 if v == 0 else v


def percentile(values: Sequence[float], q: float) -> float | None:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return None
    xs = sorted(values)
    pos = (len(xs) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def stats(values: Sequence[float]) -> dict[str, float | None]:
    return {"count": len(values), "p50": _r(percentile(values, 50)), "p90": _r(percentile(values, 90)),
            "p99": _r(percentile(values, 99)), "mean": _r(sum(values) / len(values)) if values else None,
            "max": _r(max(values)) if values else None}


def time_weighted(t: Sequence[float], v: Sequence[float], end: float) -> tuple[float, float]:
    """(mean over [t[0], end], peak) of a step function sampled at ``t``."""
    if not t:
        return 0.0, 0.0
    total = 0.0
    for i in range(len(t)):
        nxt = t[i + 1] if i + 1 < len(t) else max(end, t[i])
        total += v[i] * (nxt - t[i])
    span = max(end, t[-1]) - t[0]
    return (total / span if span > 0 else float(v[-1])), float(max(v))


@dataclass
class Summary:
    data: dict[str, Any]

    def to_json(self) -> str:
        return json.dumps(self.data, indent=2, sort_keys=True) + "\n"


def summarize(result: SimResult, workload_name: str) -> Summary:
    recs = result.records
    by_state = {s: 0 for s in STATES}
    for r in recs:
        st = r.state if r.state == "Rejected" else r.final_state
        by_state[st] = by_state.get(st, 0) + 1
    ok = [r for r in recs if r.state != "Rejected"]
    tl, end = result.timeline, result.end
    util: dict[str, Any] = {}
    for i, res in enumerate(RESOURCES):
        cap = result.capacity[i]
        series = getattr(tl, res)
        mean, peak = time_weighted(tl.t, series, end)
        util[res] = {"capacity": _r(cap), "meanAllocated": _r(mean), "peakAllocated": _r(peak),
                     "mean": _r(mean / cap, 4) if cap > 0 else None, "peak": _r(peak / cap, 4) if cap > 0 else None}
    queues: dict[str, Any] = {}
    for q in sorted(tl.waiting):
        mean, peak = time_weighted(tl.t, tl.waiting[q], end)
        queues[q] = {"meanWaiting": _r(mean), "peakWaiting": int(peak)}
    for q in tl.queues():
        entry = queues.setdefault(q, {"meanWaiting": 0.0, "peakWaiting": 0})
        zeros = [0.0] * len(tl.t)
        mean, peak = time_weighted(tl.t, tl.queue_cpu.get(q, zeros), end)
        entry.update({"meanCpu": _r(mean), "peakCpu": _r(peak),
                      "meanDeservedCpu": _r(time_weighted(tl.t, tl.deserved_cpu.get(q, zeros), end)[0])})
    evictions = {k: result.evictions.get(k, 0) for k in ("preempted", "reclaimed")}
    data = {
        "workload": workload_name,
        "seed": result.seed,
        "stoppedBy": result.stopped_by,
        "virtualSeconds": _r(end),
        "nodes": result.stats.nodes,
        "jobs": {"total": len(recs), **by_state},
        "wait": stats([r.wait for r in ok if r.wait is not None]),
        "waitAllPods": stats([r.wait_all for r in ok if r.wait_all is not None]),
        "run": stats([r.run for r in ok if r.run is not None]),
        "turnaround": stats([r.turnaround for r in ok if r.turnaround is not None]),
        "restarts": sum(r.restarts for r in ok),
        "evictions": {**evictions, "total": sum(evictions.values())},
        "utilisation": util,
        "queues": queues,
        "counts": {"podsCreated": result.stats.pods_created, "containersStarted": result.stats.containers_started,
                   "storeWrites": result.stats.store_writes, "schedulerSessions": result.stats.scheduler_sessions},
        "problems": list(result.problems),
    }
    return Summary(data)


# ----------------------------------------------------------------------------- tables


def print_summary(summary: Summary, console: Console) -> None:
    d = summary.data
    jobs = Table(title=f"Jobs ({d['jobs']['total']}) after {format_duration(d['virtualSeconds'] or 0.0)} "
                       f"of virtual time ({d['stoppedBy']})", title_justify="left")
    for col in ("state", "jobs"):
        jobs.add_column(col, justify="right" if col == "jobs" else "left")
    for s in STATES:
        if d["jobs"].get(s):
            jobs.add_row(s, str(d["jobs"][s]))
    console.print(jobs)

    times = Table(title="Job times", title_justify="left")
    for col in ("", "count", "p50", "p90", "p99", "mean", "max"):
        times.add_column(col, justify="left" if not col else "right")
    for label, key in (("wait (to Running)", "wait"), ("wait (all pods Running)", "waitAllPods"),
                       ("run", "run"), ("turnaround", "turnaround")):
        s = d[key]
        times.add_row(label, str(s["count"]), *(format_duration(s[k]) if s[k] is not None else "-"
                                                for k in ("p50", "p90", "p99", "mean", "max")))
    console.print(times)

    ev = d.get("evictions") or {}
    evicted = (f", {ev['total']} pods evicted ({ev['preempted']} preempted, {ev['reclaimed']} reclaimed)"
               if ev.get("total") else "")
    cluster = Table(title=f"Cluster ({d['nodes']} nodes, {d['restarts']} restarts{evicted})", title_justify="left")
    for col in ("resource", "capacity", "mean allocated", "peak allocated"):
        cluster.add_column(col, justify="left" if col == "resource" else "right")
    for res, u in d["utilisation"].items():
        if not u["capacity"]:
            continue
        cap = u["capacity"] if res != "memory" else f"{u['capacity'] / 2**30:.0f}Gi"
        cluster.add_row(res, str(cap), _pct(u["mean"]), _pct(u["peak"]))
    console.print(cluster)
    if d["queues"]:
        qt = Table(title="Queues (PodGroups waiting: Pending/Inqueue; cpu held and deserved)", title_justify="left")
        for col in ("queue", "mean waiting", "peak waiting", "mean cpu", "peak cpu", "mean deserved cpu"):
            qt.add_column(col, justify="left" if col == "queue" else "right")
        for q, v in d["queues"].items():
            qt.add_row(q, f"{v['meanWaiting']:.2f}", str(v["peakWaiting"]),
                       *(f"{v[k]:g}" if v.get(k) is not None else "-" for k in ("meanCpu", "peakCpu", "meanDeservedCpu")))
        console.print(qt)
    for p in d["problems"][:10]:
        console.print(f"[yellow]problem:[/] {p}", markup=True, highlight=False)


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


# ----------------------------------------------------------------------------- files


def job_rows(records: Sequence[JobRecord]) -> list[dict[str, Any]]:
    rows = []
    for r in records:
        rows.append({
            "namespace": r.namespace, "name": r.name, "kind": r.kind, "queue": r.queue, "replicas": r.replicas,
            "cpu": _r(r.cpu), "memory": _r(r.memory, 0), "gpu": _r(r.gpu), "submitted": _r(r.submitted),
            "running": _r(r.running), "all_running": _r(r.all_running), "finished": _r(r.finished),
            "wait": _r(r.wait), "wait_all_pods": _r(r.wait_all), "run": _r(r.run), "turnaround": _r(r.turnaround),
            "restarts": r.restarts, "final_state": r.state if r.state == "Rejected" else r.final_state,
            "reason": r.reason,
        })
    return rows


def _csv(rows: list[dict[str, Any]], columns: Sequence[str]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    w.writeheader()
    for row in rows:
        w.writerow({k: ("" if row.get(k) is None else row[k]) for k in columns})
    return buf.getvalue()


def queue_columns(tl: Timeline, capacity: tuple[float, float, float]) -> list[tuple[str, list[float]]]:
    """(column, series) per queue that held or deserved anything: allocated and
    deserved cpu, and GPUs when the cluster has any."""
    cols: list[tuple[str, list[float]]] = []
    zeros = [0.0] * len(tl.t)
    kinds = ("cpu", "gpu") if capacity[2] > 0 else ("cpu",)
    for q in tl.queues():
        for res in kinds:
            cols.append((f"alloc_{res}_{q}", getattr(tl, f"queue_{res}").get(q, zeros)))
            cols.append((f"deserved_{res}_{q}", getattr(tl, f"deserved_{res}").get(q, zeros)))
    return cols


def timeline_csv(tl: Timeline, capacity: tuple[float, float, float]) -> str:
    queues = sorted(tl.waiting)
    per_queue = queue_columns(tl, capacity)
    cols = ["t", "cpu", "memory", "gpu", "cpu_util", "memory_util", "gpu_util", "running_pods", "evictions",
            *(f"waiting_{q}" for q in queues), *(name for name, _ in per_queue)]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for i, t in enumerate(tl.t):
        vals = (tl.cpu[i], tl.memory[i], tl.gpu[i])
        w.writerow([_r(t), _r(vals[0]), _r(vals[1], 0), _r(vals[2]),
                    *(_r(v / c, 4) if c > 0 else "" for v, c in zip(vals, capacity)), tl.running_pods[i],
                    tl.evictions[i], *(tl.waiting[q][i] for q in queues), *(_r(v[i]) for _, v in per_queue)])
    return buf.getvalue()


def write_outputs(result: SimResult, summary: Summary, out: Path, *, png: bool = True, svg: bool = True) -> list[Path]:
    """jobs.csv, jobs.json, timeline.csv, summary.json, utilisation.svg/.png in ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    rows = job_rows(result.records)
    files = {
        "jobs.csv": _csv(rows, JOB_COLUMNS),
        "jobs.json": json.dumps(rows, indent=1) + "\n",
        "timeline.csv": timeline_csv(result.timeline, result.capacity),
        "summary.json": summary.to_json(),
    }
    written = []
    for name, text in files.items():
        p = out / name
        p.write_text(text)
        written.append(p)
    if png or svg:
        written += plot(result, out, png=png, svg=svg)
    return written


# ----------------------------------------------------------------------------- picture


def downsample(t: Sequence[float], series: dict[str, Sequence[float]], end: float, bins: int,
                how: dict[str, str]) -> tuple[list[float], dict[str, list[float]]]:
    """At most ``bins`` steps: each bin's time-weighted mean (or max) of the step function."""
    if len(t) <= bins or end <= t[0]:
        return list(t) + [end], {k: list(v) + [v[-1]] for k, v in series.items()}
    width = (end - t[0]) / bins
    edges = [t[0] + i * width for i in range(bins + 1)]
    out = {k: [0.0] * bins for k in series}
    i = 0
    n = len(t)
    for b in range(bins):
        lo, hi = edges[b], edges[b + 1]
        while i + 1 < n and t[i + 1] <= lo:
            i += 1
        j = i
        while j < n and t[j] < hi:
            s0 = max(t[j], lo)
            s1 = min(t[j + 1] if j + 1 < n else end, hi)
            if s1 > s0:
                for k, v in series.items():
                    if how.get(k) == "max":
                        out[k][b] = max(out[k][b], v[j])
                    else:
                        out[k][b] += v[j] * (s1 - s0) / width
            j += 1
    return edges[:-1] + [end], {k: v + [v[-1]] for k, v in out.items()}


def plot(result: SimResult, out: Path, *, png: bool = True, svg: bool = True) -> list[Path]:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    tl, end = result.timeline, max(result.end, result.timeline.t[-1] if result.timeline.t else 0.0)
    if not tl.t:
        return []
    scale, unit = _time_unit(end)
    util = {res: [v / c if c > 0 else 0.0 for v in getattr(tl, res)] for res, c in zip(RESOURCES, result.capacity)}
    zeros = [0.0] * len(tl.t)
    shares = tl.queues()
    series: dict[str, Sequence[float]] = {**util, **{f"q:{q}": tl.waiting[q] for q in sorted(tl.waiting)},
                                          **{f"a:{q}": tl.queue_cpu.get(q, zeros) for q in shares},
                                          **{f"d:{q}": tl.deserved_cpu.get(q, zeros) for q in shares}}
    how = {k: "max" for k in series if k.startswith("q:")}
    xs, ys = downsample(tl.t, series, end, PLOT_BINS, how)
    xs = [x / scale for x in xs]

    with matplotlib.rc_context({"svg.hashsalt": "phalanx-sim", "svg.fonttype": "path", "path.simplify": True,
                                "font.size": 9}):
        fig, (ax1, ax2, ax3) = plt.subplots(3, 1, sharex=True, figsize=(10, 8.5), constrained_layout=True,
                                            gridspec_kw={"height_ratios": [1, 0.8, 1.2]})
        for res, c in zip(RESOURCES, result.capacity):
            if c > 0:
                ax1.step(xs, [100 * y for y in ys[res]], where="post", label=res, linewidth=1)
        ax1.set_ylabel("allocated (% of capacity)")
        ax1.set_ylim(0, 105)
        ax1.legend(**_LEGEND)
        ax1.grid(True, alpha=0.3)
        title = f"{result.stats.nodes} nodes, {len(result.records)} jobs"
        evicted = sum(result.evictions.values())
        if evicted:
            title += (f", {evicted} pods evicted ({result.evictions.get('preempted', 0)} preempted, "
                      f"{result.evictions.get('reclaimed', 0)} reclaimed)")
        ax1.set_title(title)
        queues = [k for k in series if k.startswith("q:")]
        for k in queues:
            ax2.step(xs, ys[k], where="post", label=k[2:], linewidth=1)
        if not queues:
            ax2.step(xs, [0] * len(xs), where="post", linewidth=1)
        ax2.set_ylabel("PodGroups waiting")
        ax2.grid(True, alpha=0.3)
        if queues:
            ax2.legend(**_LEGEND)
        _share_panel(ax3, xs, ys, shares, result.capacity[0], Line2D)
        ax3.set_xlabel(f"virtual time ({unit})")
        written = []
        if svg:
            p = out / "utilisation.svg"
            fig.savefig(p, format="svg", metadata={"Date": None, "Creator": None})
            written.append(p)
        if png:
            p = out / "utilisation.png"
            fig.savefig(p, format="png", dpi=100, metadata={"Software": None})
            written.append(p)
        plt.close(fig)
    return written


def _share_panel(ax: Any, xs: list[float], ys: dict[str, list[float]], shares: list[str], cpu: float,
                 line: Any) -> None:
    """Each queue's cpu held (solid) and deserved share (dashed), one colour per queue.
    Lines at one level stay apart: the solid ones are nested (earlier queues wider,
    underneath), the dashed ones drawn on top with interleaved dashes."""
    n = len(shares)
    slots = min(max(n, 1), 4)
    handles = []
    for i, q in enumerate(shares):
        colour = f"C{i % 10}"
        width = 1.8 + (3.0 if n <= 3 else 2.0) * (n - 1 - i) / max(n - 1, 1)
        ax.step(xs, ys[f"a:{q}"], where="post", color=colour, linewidth=width, alpha=0.6, zorder=2 + i)
        dashes = (2.0 * (i % slots), (2.0, 2.0 * (slots - 1) if slots > 1 else 2.0))
        ax.step(xs, ys[f"d:{q}"], where="post", color=colour, linewidth=1.4, linestyle=dashes, zorder=2 + n + i)
        handles.append(line([0], [0], color=colour, linewidth=2.2, alpha=0.6, label=q))
    if shares:
        handles.append(line([0], [0], color="0.3", linewidth=1.4, linestyle=(0, (2.0, 2.0)), label="deserved"))
        ax.legend(handles=handles, **_LEGEND)
    else:
        ax.step(xs, [0] * len(xs), where="post", linewidth=1)
    ax.set_ylabel("cpu per queue (cores)")
    top = max((max(ys[f"{k}:{q}"]) for q in shares for k in "ad"), default=0.0)
    ax.set_ylim(0, max(min(top, cpu) if cpu > 0 else top, 1.0) * 1.08)
    ax.grid(True, alpha=0.3)


_LEGEND: dict[str, Any] = {"loc": "upper left", "bbox_to_anchor": (1.005, 1.0), "borderaxespad": 0.0,
                           "frameon": False}


def _time_unit(end: float) -> tuple[float, str]:
    if end >= 3 * 86400:
        return 86400.0, "days"
    if end >= 3 * 3600:
        return 3600.0, "hours"
    if end >= 180:
        return 60.0, "minutes"
    return 1.0, "seconds"
