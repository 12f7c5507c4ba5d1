"""``phalanx exec [-n NS] [-c CONTAINER] [--home DIR] [--wait S] POD -- COMMAND [ARG...]``.

``kubectl exec`` for the local runtime: COMMAND is exec'd as argv on this
machine with the environment, working directory and resolver settings of the
running instance of the pod's container (see ``phalanx.node.execctx``), with
stdin/stdout/stderr inherited; the exit status is COMMAND's. It reads only
files, so it works without an API server, from inside a pod's process (the
MPI launcher's rsh agent runs it), and dies with the container.
Also runnable as ``python -m phalanx.cli.execcmd`` (same arguments).
"""
from __future__ import annotations

import errno
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, List, NoReturn, Optional, Sequence

import typer

from phalanx.cli.lazy import lazy_module
from phalanx.node.names import check_dns_label, check_dns_subdomain

if TYPE_CHECKING:
    import argparse

    from phalanx.node import execctx
else:
    # Loaded when `phalanx exec` runs, not whenever the CLI starts.
    argparse = lazy_module("argparse")
    execctx = lazy_module("phalanx.node.execctx")

POLL_INTERVAL = 0.1
EXIT_ERROR = 1
EXIT_CANNOT_INVOKE = 126
EXIT_NOT_FOUND = 127


class ExecError(Exception):
    """An error reported as ``error: <message>`` with an exit status."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


def resolve_target(home: Path, namespace: str, pod: str, container: str | None,
                   wait: float) -> execctx.ExecTarget:
    """The running container to exec into, waiting up to ``wait`` seconds for it."""
    try:
        check_dns_label(namespace, "namespace")
        check_dns_subdomain(pod, "pod name")
        if container:
            check_dns_label(container, "container name")
    except ValueError as e:
        raise ExecError(str(e)) from None
    deadline = time.monotonic() + max(0.0, wait)
    while True:
        try:
            return execctx.locate(home, namespace, pod, container)
        except execctx.ExecTargetError as e:
            if e.final or time.monotonic() >= deadline:
                raise ExecError(str(e)) from None
        time.sleep(max(0.0, min(POLL_INTERVAL, deadline - time.monotonic())))


def exec_in(target: execctx.ExecTarget, command: Sequence[str]) -> NoReturn:
    """Become ``command`` inside the target container (never returns)."""
    ctx = target.context
    pod = ctx.pod
    try:
        reg = execctx.register_exec(target.container_dir, os.getpid(), ctx.container_id)
    except OSError as e:
        raise ExecError(f"unable to exec: {e.strerror or e}") from None
    # Registered first, checked second: the runtime's sweep when the container
    # ends either sees the registration or we see the container gone.
    if not execctx.instance_running(target.container_dir, ctx):
        _unlink(reg)
        raise ExecError(f"unable to exec: container {ctx.container} of pod {pod} is not running")
    try:
        os.chdir(ctx.cwd)
    except OSError as e:
        _unlink(reg)
        raise ExecError(f'unable to exec: chdir to "{ctx.cwd}": {e.strerror or e}') from None
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores these; the command expects the default
        signal.signal(sig, signal.SIG_DFL)
    sys.stdout.flush()
    sys.stderr.flush()
    try:
        os.execvpe(command[0], list(command), ctx.env)
    except OSError as e:
        _unlink(reg)
        raise _exec_failure(command[0], e) from None
    raise AssertionError("not reached")  # pragma: no cover


def _exec_failure(argv0: str, e: OSError) -> ExecError:
    """Why exec failed, in the words of runc, with a shell's exit status."""
    if isinstance(e, FileNotFoundError):
        where = f"stat {argv0}: no such file or directory" if "/" in argv0 else "executable file not found in $PATH"
        return ExecError(f'exec: "{argv0}": {where}', EXIT_NOT_FOUND)
    if isinstance(e, PermissionError):
        return ExecError(f'exec: "{argv0}": permission denied', EXIT_CANNOT_INVOKE)
    if e.errno == errno.ENOEXEC:
        return ExecError(f'exec: "{argv0}": exec format error', EXIT_CANNOT_INVOKE)
    return ExecError(f'exec: "{argv0}": {e.strerror or e}', EXIT_CANNOT_INVOKE)


def run(pod: str, command: Sequence[str], *, namespace: str = "default", container: str | None = None,
        home: Path | None = None, wait: float = 0.0) -> int:
    """Exec ``command`` in the pod's container; returns only on an error (its exit status)."""
    try:
        if not command:
            raise ExecError("you must specify at least one command for the container")
        if wait < 0:
            raise ExecError(f"--wait: Invalid value: {wait:g}: must be 0 or more")
        target = resolve_target(Path(home) if home else execctx.default_home(), namespace, pod, container, wait)
        if target.note:
            print(target.note, file=sys.stderr, flush=True)
        exec_in(target, command)
    except ExecError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return e.code


def _unlink(path: Path) -> None:
    try:
        path.unlink()
    except OSError:
        pass


# --------------------------------------------------------------------------- entry points


def exec_command(
    pod: str = typer.Argument(..., metavar="POD", help="the pod to run the command in"),
    command: Optional[List[str]] = typer.Argument(None, metavar="-- COMMAND [ARG...]",
                                                  help="the command and its arguments, after --"),
    namespace: str = typer.Option("default", "-n", "--namespace"),
    container: Optional[str] = typer.Option(None, "-c", "--container",
                                            help="container name; default: the pod's default container"),
    home: Optional[Path] = typer.Option(None, "--home", help="Phalanx home; default: $PHALANX_HOME"),
    wait: float = typer.Option(0.0, "--wait", help="wait up to this many seconds for the container to run"),
) -> None:
    """Execute a command in a running container of a pod on this machine (like kubectl exec)."""
    raise typer.Exit(run(pod, command or [], namespace=namespace, container=container, home=home, wait=wait))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m phalanx.cli.execcmd``: the same arguments as ``phalanx exec``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" in args:
        i = args.index("--")
        args, command = args[:i], args[i + 1:]
    else:
        command = []
    parser = argparse.ArgumentParser(prog="phalanx exec", description=__doc__.split("\n")[0])
    parser.add_argument("-n", "--namespace", default="default")
    parser.add_argument("-c", "--container")
    parser.add_argument("--home", type=Path)
    parser.add_argument("--wait", type=float, default=0.0)
    parser.add_argument("pod")
    parser.add_argument("command", nargs="*")
    ns = parser.parse_args(args)
    return run(ns.pod, [*ns.command, *command], namespace=ns.namespace, container=ns.container,
               home=ns.home, wait=ns.wait)


if __name__ == "__main__":
    sys.exit(main())
