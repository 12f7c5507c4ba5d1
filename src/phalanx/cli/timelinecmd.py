"""`phalanx timeline JOB [-o FILE.svg|.png|.html]`: a job's life drawn from its state history.

Reads ``$PHALANX_HOME/history`` directly, so it works with no control plane running (a running job's
picture then ends at its last record). Without -o it prints the compact text timeline.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Optional

import typer

from phalanx.api import registry
from phalanx.cli.cmdutil import EXIT_ERROR, EXIT_INVALID, fail, resource, say, warn
from phalanx.cli.controlplane import home as phalanx_home_dir
from phalanx.cli.controlplane import read_endpoint

if TYPE_CHECKING:
    from phalanx.store.history import JobHistories, JobKey  # loaded when the command runs


def _kinds_text() -> str:
    return ", ".join(registry.by_kind(k).singular for k in registry.JOB_KINDS)


def resolve(histories: JobHistories, namespace: str, target: str) -> JobKey:
    """The history of ``TYPE/NAME`` or of the job NAME of whichever kind has one (the newest when the
    job was deleted and created again); exits 2 for a bad name or type, 1 when there is no history."""
    if "/" in target:
        type_name, name = target.split("/", 1)
        rt = resource(type_name)
        if rt.kind not in registry.JOB_KINDS:
            fail(f"error: {rt.singular}/{name} has no timeline: only jobs ({_kinds_text()}) have one", EXIT_INVALID)
        kinds = [rt.kind]
    else:
        name, kinds = target, list(registry.JOB_KINDS)
    if not name:
        fail(f"error: arguments in resource/name form must have a single resource and name: {target}", EXIT_INVALID)
    try:
        found = {kind: histories.find(namespace, kind, name) for kind in kinds}
    except ValueError as e:
        fail(f"error: {e}", EXIT_INVALID)
    found = {k: v for k, v in found.items() if v}
    if not found:
        what = f"{registry.by_kind(kinds[0]).singular}/{name}" if len(kinds) == 1 else f"job {name}"
        fail(f"error: {what}: no state history in namespace {namespace} (looked in {histories.root}; the "
             "control plane records one for each job while the job exists)", EXIT_ERROR)
    if len(found) > 1:
        refs = ", ".join(f"{registry.by_kind(k).singular}/{name}" for k in found)
        fail(f"error: several jobs named {name} in namespace {namespace} ({refs}): name one as TYPE/NAME",
             EXIT_INVALID)
    return next(iter(found.values()))[-1]


def timeline(
    job: str = typer.Argument(..., metavar="JOB",
                              help=f"TYPE/NAME ({_kinds_text()}) or the NAME of a job of any of these kinds"),
    output: Optional[Path] = typer.Option(None, "-o", "--output",
                                          help="write the picture to FILE.svg, FILE.png or FILE.html "
                                               "(default: print the text timeline)"),
    namespace: str = typer.Option("default", "-n", "--namespace"),
) -> None:
    """A job's life: one bar per pod instance coloured by state, the job's conditions and the PodGroup's
    phases above, events as marks; read from $PHALANX_HOME/history (no control plane needed)."""
    # Lazy for start-up speed: the store and the timeline renderers load with this command only.
    from phalanx.store.history import JobHistories
    from phalanx.timeline import files, text

    if output is not None:
        try:
            files.check_format(output)
        except ValueError as e:
            fail(f"error: -o: {e}", EXIT_INVALID)
    home = phalanx_home_dir()
    histories = JobHistories(home / "history")
    key = resolve(histories, namespace, job)
    # A running control plane is still writing: the picture of an unfinished job ends now.
    now = time.time() if read_endpoint(home) is not None else None
    tl = files.load(histories, key, now=now)
    if tl is None:
        fail(f"error: {registry.by_kind(key.kind).singular}/{key.name}: its state history is empty", EXIT_ERROR)
    if output is None:
        say(text.render(tl))
        return
    try:
        files.write(tl, output)
    except OSError as e:
        fail(f"error: cannot write {output}: {e.strerror}", EXIT_ERROR)
    warn(f"wrote {output}")
