"""Timelines read from the history files and written as pictures: one job's (``phalanx timeline``),
or the first jobs of a run (``phalanx simulate --out``).
"""
from __future__ import annotations

from pathlib import Path

from phalanx.store.history import JobHistories, JobKey
from phalanx.timeline import model, svg
from phalanx.timeline.png import write_png

FORMATS = (".svg", ".png", ".html")


def load(histories: JobHistories, key: JobKey, now: float | None = None) -> model.Timeline | None:
    """The job's timeline (None when it has no history); ``now`` ends a running job's picture."""
    records = histories.read(key)
    if not records:
        return None
    return model.build(records, namespace=key.namespace, kind=key.kind, name=key.name, uid=key.uid, now=now)


def check_format(path: Path) -> str:
    """The picture format of ``path`` by its suffix; ValueError naming the rule otherwise."""
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"{path}: the file name must end in {', '.join(FORMATS)} (the picture's format)")
    return suffix


def write(tl: model.Timeline, path: Path) -> None:
    """The picture in the format ``path``'s suffix names (.svg, .png, .html)."""
    suffix = check_format(path)
    if suffix == ".png":
        write_png(tl, path)
    else:
        path.write_text(svg.render_html(tl) if suffix == ".html" else svg.render(tl), encoding="utf-8")


def _created(histories: JobHistories, key: JobKey) -> float:
    for r in histories.iter(key):
        return r.t
    return float("inf")


def write_all(histories: JobHistories, out: Path, limit: int = 20) -> list[Path]:
    """``out/<namespace>_<kind>_<name>.svg`` for the first ``limit`` jobs (by creation) with a history."""
    keys = sorted(histories.keys(), key=lambda k: (_created(histories, k), k.namespace, k.kind, k.name))
    written = []
    for key in keys[:limit]:
        tl = load(histories, key)
        if tl is None:
            continue
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"{key.namespace}_{key.kind}_{key.name}.svg"
        path.write_text(svg.render(tl), encoding="utf-8")
        written.append(path)
    return written
