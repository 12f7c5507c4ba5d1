"""The timeline as a PNG picture, drawn with matplotlib from the same model and colours as the SVG.

matplotlib is loaded when a PNG is asked for only (it takes a second to import).
"""
from __future__ import annotations

from pathlib import Path

from phalanx.timeline.model import STATES, Timeline
from phalanx.timeline.svg import color, drawn_end, human, tick_step, view_end


def write_png(tl: Timeline, path: Path, dpi: int = 110) -> None:
    """Draw ``tl`` into ``path``: bands on top, one row per pod instance, marks, a legend."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    lanes = ["job", "podgroup", "events"]
    seen: dict[str, int] = {}
    for row in tl.rows:
        seen[row.name] = seen.get(row.name, 0) + 1
        lanes.append(row.name + (f" #{seen[row.name]}" if seen[row.name] > 1 else ""))
    span = view_end(tl)
    fig, ax = plt.subplots(figsize=(11, 1.2 + 0.32 * len(lanes)))
    try:
        y_of = {name: len(lanes) - 1 - i for i, name in enumerate(lanes)}
        for band, lane in ((tl.job, "job"), (tl.podgroup, "podgroup")):
            for s in band.spans:
                width = drawn_end(tl, s.end, s.open) - s.start
                ax.broken_barh([(s.start, max(width, span / 2000))], (y_of[lane] - 0.4, 0.8),
                               facecolors=color(s.state), edgecolor="white", linewidth=0.5)
                if width / span > 0.06:
                    ax.text(s.start + span / 300, y_of[lane], s.state, va="center", fontsize=7)
        rows_y = {}
        for row, lane in zip(tl.rows, lanes[3:]):
            y = rows_y[row.uid] = y_of[lane]
            for seg in row.segments:
                ax.broken_barh([(seg.start, max(drawn_end(tl, seg.end, seg.open) - seg.start, span / 2000))], (y - 0.4, 0.8),
                               facecolors=color(seg.state), edgecolor="white", linewidth=0.5)
            for g in row.gaps():
                ax.plot([g.start, g.end], [y - 0.47, y - 0.47], color="#e6550d", linewidth=1.5)
        for m in tl.marks:
            if m.kind == "event":
                ym = rows_y.get(m.pod_uid, y_of["events"]) + 0.45
                ax.plot([m.t], [ym], marker="v", markersize=4, linestyle="none",
                        color="#d62728" if m.type == "Warning" else "#555555")
            else:
                ax.axvline(m.t, color="#d62728", linestyle="--", linewidth=1.5)
                ax.text(m.t, len(lanes) - 0.5, " " + m.reason, color="#d62728", fontsize=7, va="bottom")
        step = tick_step(span)
        ticks = [i * step for i in range(int(span // step) + 1)]
        ax.set_xticks(ticks, [human(t) for t in ticks])
        ax.set_xlim(0, span)
        ax.set_ylim(-0.6, len(lanes) - 0.4)
        ax.set_yticks(list(range(len(lanes))), list(reversed(lanes)), fontsize=8)
        ax.set_xlabel("seconds since created")
        ax.set_title(f"{tl.job_kind or 'Job'} {tl.namespace}/{tl.job_name}: {tl.state or 'no state'}", fontsize=10)
        ax.legend(handles=[Patch(facecolor=color(s), label=s) for s in STATES], loc="upper center",
                  bbox_to_anchor=(0.5, -0.18 - 1.2 / (1.2 + 0.32 * len(lanes)) * 0.3), ncol=len(STATES),
                  fontsize=7, frameon=False)
        fig.tight_layout()
        fig.savefig(path, format="png", dpi=dpi, metadata={"Software": None})
    finally:
        plt.close(fig)
