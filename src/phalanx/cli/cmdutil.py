"""What every object command shares: exit codes, output and failure, kubectl's error
text, connecting to the running control plane, and naming a resource as kubectl does.
"""
from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any, Callable, NoReturn

import typer

from phalanx.api import registry
from phalanx.cli import printers
from phalanx.cli.controlplane import home as phalanx_home_dir
from phalanx.cli.controlplane import read_endpoint
from phalanx.client.wire import Unreachable
from phalanx.objects.errors import ApiError

if TYPE_CHECKING:
    from phalanx.client.rest import RestClient  # loaded when a command connects (Endpoint.rest)

EXIT_OK, EXIT_ERROR, EXIT_INVALID, EXIT_UNAVAILABLE, EXIT_INTERRUPTED = 0, 1, 2, 3, 130
EXIT_CODES_HELP = ("Exit codes: 0 ok; 1 error (or the job Failed); 2 invalid input; "
                   "3 could not run (no control plane, cannot connect); 130 interrupted.")


def say(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def warn(text: str) -> None:
    sys.stderr.write(text if text.endswith("\n") else text + "\n")
    sys.stderr.flush()


def fail(msg: str, code: int = EXIT_ERROR) -> NoReturn:
    warn(msg)
    raise typer.Exit(code)


def api_error_text(e: ApiError, verb: str | None = None, source: str | None = None) -> str:
    """kubectl's ``Error from server (Reason): [error when VERB "SOURCE": ]message``."""
    if isinstance(e, Unreachable):
        return f"error: {e.message}"
    where = f'error when {verb} "{source}": ' if verb and source else ""
    return f"Error from server ({e.reason}): {where}{e.message}"


def exit_code_of(e: ApiError) -> int:
    if isinstance(e, Unreachable):
        return EXIT_UNAVAILABLE
    return EXIT_INVALID if e.code in (400, 403, 422) else EXIT_ERROR


def interruptible(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Ctrl-C exits 130, as a shell reports a command killed by SIGINT."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except KeyboardInterrupt:
            sys.stderr.write("\n")
            raise typer.Exit(EXIT_INTERRUPTED) from None

    return wrapper


NO_CONTROL_PLANE = ("error: no Phalanx control plane is running; start one with `phalanx up` "
                    "(or run a job with `phalanx run FILE`)")


def connect() -> RestClient:
    """A RestClient for the running control plane; exit 3 when there is none."""
    ep = read_endpoint(phalanx_home_dir())
    if ep is None:
        fail(NO_CONTROL_PLANE, EXIT_UNAVAILABLE)
    return ep.rest()


def resource(kind_name: str) -> registry.ResourceType:
    rt = registry.lookup(kind_name)
    if rt is None:
        fail(f'error: the server doesn\'t have a resource type "{kind_name}"', EXIT_INVALID)
    return rt


def ref(rt: registry.ResourceType, name: str) -> str:
    return f"{rt.singular}{'.' + rt.group if rt.group else ''}/{name}"


def quoted_ref(rt: registry.ResourceType, name: str) -> str:
    return f'{rt.singular}{"." + rt.group if rt.group else ""} "{name}"'



def dump(obj: Any, fmt: str) -> str:
    """``-o json`` or ``-o yaml`` text of one object or list."""
    return printers.to_json(obj) if fmt == "json" else printers.to_yaml(obj)
