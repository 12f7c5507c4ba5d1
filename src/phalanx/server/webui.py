"""The web view's server side: its static pages, the login link, the session and a job's live timeline.

Paths (under ``/ui``, dispatched by ``app``): ``/ui/`` and its files (public: they hold no data, and
every datum the page shows comes from the API through the session, see ``websessions``);
``GET /ui/login?ticket=`` trades a one-time ticket for the session cookie and redirects to ``/ui/``
(no ticket left in the address bar); ``POST /ui/tickets`` (a bearer token only: what ``phalanx ui``
calls) makes a ticket; ``GET /ui/session`` gives the page its CSRF token; ``POST /ui/logout``;
``GET /ui/api/timeline/{namespace}/{plural}/{name}[?uid=]`` the job's timeline as SVG, drawn from
its state history at each request (the page fetches it again when the job or its pods change).
"""
from __future__ import annotations

import time
from pathlib import Path

from aiohttp import web

from phalanx.api import registry
from phalanx.objects.errors import BadRequest
from phalanx.server.auth import ACCESS, USER, WEB_SESSION
from phalanx.server.routes import not_found_response
from phalanx.server.status import failure, json_response
from phalanx.server.websessions import COOKIE
from phalanx.store.history import JobHistories
from phalanx.timeline import files, svg

UI_DIR = Path(__file__).with_name("ui")
STATIC = {
    "index.html": "text/html",
    "app.js": "text/javascript",
    "style.css": "text/css",
    "favicon.svg": "image/svg+xml",
}
# The page loads nothing from elsewhere and runs only its own script; the timeline's SVG styles inline.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff", "Referrer-Policy": "no-referrer",
           "X-Frame-Options": "DENY"}
NO_STORE = {"Cache-Control": "no-store"}
TIMELINES: web.AppKey[JobHistories | None] = web.AppKey("timelines")  # the jobs' state histories, if kept

_LOGIN_FAILED = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Phalanx: login link not valid</title>
<link rel="stylesheet" href="/ui/style.css"></head>
<body><main><h1>This login link is not valid</h1>
<p>A login link works once, within two minutes. Run <code>phalanx ui</code> for a new one.</p></main></body></html>
"""


def _static(name: str) -> web.StreamResponse:
    path = UI_DIR / name
    if name not in STATIC or not path.is_file():
        return not_found_response()
    return web.Response(body=path.read_bytes(), content_type=STATIC[name], charset="utf-8",
                        headers={**HEADERS, "Cache-Control": "no-cache"})


def _login(request: web.Request) -> web.StreamResponse:
    ticket = request.query.get("ticket") or ""
    redeemed = request.app[ACCESS].sessions.redeem(ticket) if ticket else None
    if redeemed is None:
        return web.Response(status=401, text=_LOGIN_FAILED, content_type="text/html", headers={**HEADERS, **NO_STORE})
    sid, _session = redeemed
    resp = web.Response(status=303, headers={**HEADERS, **NO_STORE, "Location": "/ui/"})
    resp.set_cookie(COOKIE, sid, path="/", secure=True, httponly=True, samesite="Strict")
    return resp


def _tickets(request: web.Request) -> web.StreamResponse:
    if request.get(WEB_SESSION) is not None:
        return failure(403, "Forbidden", "forbidden: login tickets are made for a bearer token, not a web session")
    ticket = request.app[ACCESS].sessions.issue_ticket(request[USER])
    return json_response({"ticket": ticket, "path": f"/ui/login?ticket={ticket}"}, status=201)


def _session(request: web.Request) -> web.StreamResponse:
    session = request.get(WEB_SESSION)
    if session is None:
        return failure(400, "BadRequest", "no web session: /ui/session is read with the session cookie")
    return web.json_response({"user": request[USER].name, "csrf": session.csrf}, headers=NO_STORE)


def _logout(request: web.Request) -> web.StreamResponse:
    sid = request.cookies.get(COOKIE)
    if sid:
        request.app[ACCESS].sessions.end(sid)
    resp = web.json_response({"status": "Success"}, headers=NO_STORE)
    resp.del_cookie(COOKIE, path="/", secure=True, httponly=True, samesite="Strict")
    return resp


def _timeline(request: web.Request, namespace: str, plural: str, name: str) -> web.StreamResponse:
    histories = request.app[TIMELINES]
    rt = next((registry.by_kind(k) for k in registry.JOB_KINDS if registry.by_kind(k).plural == plural), None)
    if rt is None:
        return not_found_response()
    if histories is None:
        return failure(404, "NotFound", "this control plane keeps no state histories")
    try:
        keys = histories.find(namespace, rt.kind, name)
    except ValueError as e:
        raise BadRequest(str(e)) from None
    uid = request.query.get("uid")
    keys = [k for k in keys if k.uid == uid] if uid else keys
    tl = files.load(histories, keys[-1], now=time.time()) if keys else None
    if tl is None:
        return failure(404, "NotFound", f'{rt.plural} "{name}" has no state history in namespace "{namespace}"')
    return web.Response(text=svg.render(tl), content_type="image/svg+xml", headers={**HEADERS, **NO_STORE})


async def dispatch(request: web.Request, segments: list[str], method: str) -> web.StreamResponse:
    """Serve ``segments`` (the path's, ``ui`` first)."""
    rest = segments[1:]
    if not rest:
        if request.path == "/ui":
            raise web.HTTPFound("/ui/")
        return _static("index.html")
    handlers = {("GET", "login"): _login, ("POST", "tickets"): _tickets, ("GET", "session"): _session,
                ("POST", "logout"): _logout}
    if len(rest) == 1:
        handler = handlers.get((method, rest[0]))
        if handler is not None:
            return handler(request)
        if method == "GET" and rest[0] in STATIC:
            return _static(rest[0])
        if any(rest[0] == path for _, path in handlers):
            return failure(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
    if len(rest) == 5 and rest[:2] == ["api", "timeline"] and method == "GET":
        return _timeline(request, rest[2], rest[3], rest[4])
    return not_found_response()
