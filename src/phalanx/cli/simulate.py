"""`phalanx simulate WORKLOAD.yaml`: run a workload on a virtual clock and report.

The real job controller, scheduler and garbage collector run on simulated
nodes (``phalanx.sim``); a week of jobs takes minutes. Prints a summary and
writes per-job rows, the timeline and a picture to ``--out``, and (when the
run recorded the jobs' state histories) ``timelines/<ns>_<kind>_<name>.svg``
for the first jobs. The same workload and seed give identical files.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

if TYPE_CHECKING:
    from phalanx.store.history import JobHistories  # loaded with the simulator, when the command runs

EXIT_INVALID = 2
TIMELINES = 20  # jobs drawn into --out/timelines/, the first ones by creation


def simulate(
    workload: Path = typer.Argument(..., help="the workload file (cluster, sim, jobs and/or generator)"),
    out: Optional[Path] = typer.Option(None, "--out", "-o",
                                       help="where to write the results (default: sim-<workload name>/)"),
    seed: Optional[int] = typer.Option(None, "--seed", help="the generator's seed (default: the file's)"),
    until: Optional[str] = typer.Option(None, "--until", help="stop at this virtual time at the latest, e.g. 8d"),
    pictures: bool = typer.Option(True, "--pictures/--no-pictures", help="write utilisation.svg and .png"),
) -> None:
    """Simulate WORKLOAD: the real control plane on simulated nodes, in virtual time."""
    # Lazy for start-up speed: the simulator and rich load when `phalanx simulate` runs only.
    from rich.console import Console

    from phalanx.sim.arrivals import load_workload
    from phalanx.sim.report import print_summary, summarize, write_outputs
    from phalanx.sim.runner import Simulation
    from phalanx.sim.units import DurationError, format_duration, parse_duration
    from phalanx.sim.workload import WorkloadError  # deferred like the lines above, for start-up speed

    console = Console(highlight=False, soft_wrap=True)
    err = Console(stderr=True, highlight=False, soft_wrap=True)
    try:
        loaded = load_workload(workload)
    except WorkloadError as e:
        err.print(f"error: {e}", markup=False)
        raise typer.Exit(EXIT_INVALID)
    limit = None
    if until is not None:
        try:
            limit = parse_duration(until)
        except DurationError as e:
            err.print(f"error: --until: {e}", markup=False)
            raise typer.Exit(EXIT_INVALID)
    target = out or Path(f"sim-{workload.stem}")
    history = target / "history"  # every job's state history, as the embedded cluster keeps it
    shutil.rmtree(history, ignore_errors=True)  # a previous run's: the same job names would append to it
    sim = Simulation(loaded, seed, until=limit, history_dir=history)
    with console.status("simulating ...") if console.is_terminal else _nothing():
        result = sim.run()
    summary = summarize(result, workload.name)
    print_summary(summary, console)
    s = result.stats
    console.print(f"simulated {format_duration(s.virtual_seconds)} in {s.wall_seconds:.1f} s "
                  f"(x{s.speedup:,.0f}); {s.loop_callbacks:,} events, {s.store_writes:,} writes, "
                  f"peak RSS {s.peak_rss_mb:.0f} MB")
    files = write_outputs(result, summary, target, png=pictures, svg=pictures)
    if pictures:
        files += _timelines(sim.histories, target)
    console.print("wrote " + ", ".join(str(p) for p in files))


def _timelines(histories: JobHistories | None, target: Path) -> list[Path]:
    """The first jobs' timelines, drawn from the histories the simulator's recorder kept."""
    from phalanx.timeline.files import write_all  # lazy for start-up speed, as the imports above

    return write_all(histories, target / "timelines", limit=TIMELINES) if histories is not None else []


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None
