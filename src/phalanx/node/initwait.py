"""``python -m phalanx.node.initwait <host>``: the PyTorch worker init container.

The original runs ``until nslookup <master>; do echo waiting for master; sleep
2; done`` (100 tries). On the local runtime the master's name (or address) is
published in the hosts file ``$PHALANX_HOSTS_FILE`` once the master pod is
ready, so this waits for that; a name the system resolver knows also counts.
An IP address counts only once it is published: it is always "resolvable".
Exit 0 when found, 1 after the timeout.
"""
from __future__ import annotations

import argparse
import ipaddress
import os
import socket
import sys
import time
from pathlib import Path


def published_in(hosts_file: str | os.PathLike[str] | None, host: str) -> str | None:
    """The address ``host`` has in the hosts file (``host`` may be a name or an
    address), or None."""
    if not hosts_file:
        return None
    try:
        text = Path(hosts_file).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 2 and host in fields:
            return fields[0]
    return None


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def resolve(host: str, hosts_file: str | None) -> str | None:
    found = published_in(hosts_file, host)
    if found or _is_ip(host):
        return found
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError, OSError):
        return None
    return str(infos[0][4][0]) if infos else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m phalanx.node.initwait",
                                     description="Wait until a host is published (like the original nslookup loop).")
    parser.add_argument("host")
    parser.add_argument("--timeout", type=float, default=200.0, help="give up after this many seconds (default 200)")
    parser.add_argument("--interval", type=float, default=0.05,
                        help="seconds between tries (default 0.05: a hosts-file read is cheap)")
    parser.add_argument("--hosts-file", default=os.environ.get("PHALANX_HOSTS_FILE"),
                        help="default: $PHALANX_HOSTS_FILE")
    args = parser.parse_args(argv)
    deadline = time.monotonic() + max(0.0, args.timeout)
    next_note = 0.0  # say "waiting" at most every 2 s, as the original's loop did
    while True:
        address = resolve(args.host, args.hosts_file)
        if address:
            print(f"Name:\t{args.host}\nAddress: {address}", flush=True)
            return 0
        if time.monotonic() >= deadline:
            print(f"{args.host} not found after {args.timeout:g}s", file=sys.stderr, flush=True)
            return 1
        if time.monotonic() >= next_note:
            print("waiting for master", flush=True)
            next_note = time.monotonic() + 2.0
        time.sleep(max(0.01, min(args.interval, deadline - time.monotonic())))


if __name__ == "__main__":
    sys.exit(main())
