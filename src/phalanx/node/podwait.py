"""``python -m phalanx.node.podwait [--home DIR] -n NS [--timeout S] POD [POD...]``.

The MPI launcher's init container on the local runtime: mpirun must start
only once every worker runs (the original's kubectl-delivery init container
plays that part on a cluster). Reads the exec context files of the pods'
containers (``execctx``), so it needs no API server. Prints a line per pod as
it runs; exit 0 once all run, 1 after the timeout.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Sequence

from phalanx.node.execctx import default_home, pod_running
from phalanx.node.names import check_dns_label, check_dns_subdomain

POLL_INTERVAL = 0.1
DEFAULT_TIMEOUT = 600.0


def wait_for_pods(home: Path, namespace: str, pods: Sequence[str], timeout: float,
                  interval: float = POLL_INTERVAL) -> list[str]:
    """Wait until each pod has a running container; the pods that still have
    none at the timeout (empty: all run)."""
    waiting = list(dict.fromkeys(pods))
    deadline = time.monotonic() + max(0.0, timeout)
    while True:
        for name in list(waiting):
            if pod_running(home, namespace, name):
                waiting.remove(name)
                print(f"pod/{name} running", flush=True)
        if not waiting or time.monotonic() >= deadline:
            return waiting
        time.sleep(max(0.0, min(interval, deadline - time.monotonic())))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m phalanx.node.podwait",
                                     description="Wait until pods run on this machine.")
    parser.add_argument("--home", type=Path, help="Phalanx home; default: $PHALANX_HOME, or the pod's own")
    parser.add_argument("-n", "--namespace", default="default")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                        help=f"give up after this many seconds (default {DEFAULT_TIMEOUT:g})")
    parser.add_argument("pods", nargs="+", metavar="POD")
    args = parser.parse_args(argv)
    try:
        check_dns_label(args.namespace, "namespace")
        for p in args.pods:
            check_dns_subdomain(p, "pod name")
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1
    if args.timeout < 0:
        print(f"error: --timeout: Invalid value: {args.timeout:g}: must be 0 or more", file=sys.stderr, flush=True)
        return 1
    left = wait_for_pods(args.home or default_home(), args.namespace, args.pods, args.timeout)
    if left:
        print(f"timed out waiting for pods: {', '.join(left)}", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
