"""`phalanx ui`: a one-time login link to the running control plane's web view, printed and opened.

The link carries a ticket (good once, for two minutes), never the API token; the page it opens keeps
only an HttpOnly session cookie (server.webui, server.websessions).
"""
from __future__ import annotations

import http.client
import json
import os
import ssl
import sys
import webbrowser

import typer

from phalanx.cli.cmdutil import EXIT_ERROR, EXIT_INVALID, EXIT_UNAVAILABLE, NO_CONTROL_PLANE, fail, say
from phalanx.cli.controlplane import Endpoint, read_endpoint
from phalanx.cli.controlplane import home as phalanx_home_dir

PAGES = ("jobs", "queues", "nodes")


def login_link(ep: Endpoint, fragment: str = "", timeout: float = 10.0) -> str:
    """A fresh one-time login URL of the control plane at ``ep`` (``#fragment`` kept across the login)."""
    hostport = ep.url.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    ctx = ssl.create_default_context(cafile=ep.ca) if ep.ca else ssl.create_default_context()
    conn = http.client.HTTPSConnection(host, int(port), timeout=timeout, context=ctx)
    try:
        conn.request("POST", "/ui/tickets", body=b"", headers={"Authorization": f"Bearer {ep.token}"})
        resp = conn.getresponse()
        body = resp.read()
    finally:
        conn.close()
    if resp.status != 201:
        raise RuntimeError(f"the control plane refused a login ticket ({resp.status}): {body[:200]!r}")
    path = json.loads(body)["path"]
    return ep.url.rstrip("/") + path + (f"#/{fragment}" if fragment else "")


def _can_open_browser() -> bool:
    """A graphical session to open a browser in; without one ``webbrowser`` would start a text browser
    in this terminal."""
    return sys.platform == "darwin" or bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def ui(
    page: str = typer.Argument("jobs", metavar="[PAGE]", help="the page to open: jobs, queues or nodes"),
    open_browser: bool = typer.Option(True, "--open/--no-open", help="open the link in the desktop's browser"),
) -> None:
    """Print (and open) a one-time login link to the web view of the running control plane: jobs,
    each job's live timeline, conditions, events, pods and logs, queues and nodes."""
    if page not in PAGES:
        fail(f"error: PAGE must be one of {', '.join(PAGES)}, not {page!r}", EXIT_INVALID)
    home = phalanx_home_dir()
    ep = read_endpoint(home)
    if ep is None:
        fail(NO_CONTROL_PLANE, EXIT_UNAVAILABLE)
    try:
        url = login_link(ep, "" if page == "jobs" else page)
    except (OSError, ssl.SSLError, http.client.HTTPException, RuntimeError, ValueError, KeyError) as e:
        fail(f"error: could not get a login link from {ep.url}: {e}", EXIT_ERROR)
    say(f"Web view (the link works once, within 2 minutes):\n  {url}\n")
    if ep.ca:
        say(f"Its certificate is signed by the CA in {ep.ca}: import it into the browser to trust the page.\n")
    if open_browser and _can_open_browser():
        webbrowser.open(url)
