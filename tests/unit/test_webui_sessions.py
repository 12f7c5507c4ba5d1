"""The web view's credentials: tickets are one-time and expire, sessions idle out, and the API takes a
session cookie only with its CSRF token and no foreign Origin (websessions, auth, webui on a real app)."""
from __future__ import annotations

import copy
from http.cookies import SimpleCookie

import pytest
from aiohttp import DummyCookieJar
from aiohttp.test_utils import TestClient, TestServer

from phalanx.api.admission import admit
from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.server.app import make_app
from phalanx.server.websessions import COOKIE, CSRF_HEADER, WebSessions, csrf_ok, is_public, same_origin
from phalanx.store.store import Store

pytestmark = pytest.mark.timeout(30)

TOKEN = "webui-test-token-0123456789"
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1", "namespace": "default"},
       "spec": {"containers": [{"name": "main", "image": "busybox", "command": ["true"]}]}}


# ---------------------------------------------------------------- the pure table

def test_a_ticket_buys_one_session_once():
    s: WebSessions[str] = WebSessions(FakeClock())
    t = s.issue_ticket("admin")
    got = s.redeem(t)
    assert got is not None
    sid, session = got
    assert session.user == "admin" and session.csrf and sid != t and session.csrf != sid
    assert s.redeem(t) is None  # used
    assert s.lookup(sid) is session
    assert s.lookup("x" + sid) is None


def test_tickets_expire_and_unknown_ones_buy_nothing():
    clock = FakeClock()
    s: WebSessions[str] = WebSessions(clock, ticket_ttl=120)
    t = s.issue_ticket("admin")
    clock.advance(120)
    assert s.redeem(t) is None
    assert s.redeem("") is None and s.redeem("made-up") is None
    t2 = s.issue_ticket("admin")
    clock.advance(119)
    assert s.redeem(t2) is not None


def test_sessions_idle_out_and_use_keeps_them():
    clock = FakeClock()
    s: WebSessions[str] = WebSessions(clock, idle_ttl=100)
    got = s.redeem(s.issue_ticket("u"))
    assert got is not None
    sid, _ = got
    clock.advance(99)
    assert s.lookup(sid) is not None  # used: the idle time starts again
    clock.advance(99)
    assert s.lookup(sid) is not None
    clock.advance(100)
    assert s.lookup(sid) is None
    got = s.redeem(s.issue_ticket("u"))
    assert got is not None
    s.end(got[0])
    assert s.lookup(got[0]) is None and len(s) == 0


def test_secrets_are_not_kept_in_clear():
    s: WebSessions[str] = WebSessions(FakeClock())
    t = s.issue_ticket("u")
    got = s.redeem(s.issue_ticket("u"))
    assert got is not None
    kept = repr(vars(s))
    assert t not in kept and got[0] not in kept


def test_csrf_origin_and_public_paths():
    s: WebSessions[str] = WebSessions(FakeClock())
    got = s.redeem(s.issue_ticket("u"))
    assert got is not None
    session = got[1]
    assert csrf_ok(session, session.csrf)
    assert not csrf_ok(session, None) and not csrf_ok(session, "") and not csrf_ok(session, session.csrf + "x")
    assert same_origin(None, "127.0.0.1:8443") and same_origin("https://127.0.0.1:8443", "127.0.0.1:8443")
    assert not same_origin("https://evil.example", "127.0.0.1:8443") and not same_origin("null", "127.0.0.1:1")
    assert all(is_public(p) for p in ("/ui", "/ui/", "/ui/login", "/ui/app.js", "/ui/style.css"))
    assert not any(is_public(p) for p in ("/ui/session", "/ui/logout", "/ui/tickets", "/ui/api/timeline/a/b/c",
                                          "/api/v1/pods", "/uix", "/metrics"))


# ---------------------------------------------------------------- through the API

@pytest.fixture
async def api():
    store = Store(None, FakeClock(), admission=admit)
    store.create(copy.deepcopy(POD))
    server = TestServer(make_app(LocalClient(store), TOKEN))
    client = TestClient(server, cookie_jar=DummyCookieJar())  # cookies are sent by hand below
    await client.start_server()
    yield client
    await client.close()


async def _login(api: TestClient) -> tuple[str, str]:
    r = await api.post("/ui/tickets", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status == 201
    path = (await r.json())["path"]
    r = await api.get(path, allow_redirects=False)
    assert r.status == 303 and r.headers["Location"] == "/ui/"
    cookie = SimpleCookie(r.headers["Set-Cookie"])[COOKIE]
    assert cookie["httponly"] and cookie["secure"] and cookie["samesite"] == "Strict" and cookie["path"] == "/"
    assert not cookie["domain"] and not cookie["max-age"]
    sid = cookie.value
    r = await api.get("/ui/session", headers={"Cookie": f"{COOKIE}={sid}"})
    assert r.status == 200 and r.headers["Cache-Control"] == "no-store"
    body = await r.json()
    assert body["user"] == "admin" and TOKEN not in await r.text()
    return sid, body["csrf"]


async def test_the_login_link_works_once(api):
    r = await api.post("/ui/tickets", headers={"Authorization": f"Bearer {TOKEN}"})
    path = (await r.json())["path"]
    assert (await api.get(path, allow_redirects=False)).status == 303
    again = await api.get(path, allow_redirects=False)
    assert again.status == 401 and "Set-Cookie" not in again.headers and "phalanx ui" in await again.text()


async def test_tickets_need_a_bearer_token(api):
    assert (await api.post("/ui/tickets")).status == 403  # anonymous
    assert (await api.post("/ui/tickets", headers={"Authorization": "Bearer wrong"})).status == 401
    sid, csrf = await _login(api)
    r = await api.post("/ui/tickets", headers={"Cookie": f"{COOKIE}={sid}", CSRF_HEADER: csrf})
    assert r.status == 403 and "bearer token" in (await r.json())["message"]


async def test_the_session_reads_with_its_csrf_token_only(api):
    sid, csrf = await _login(api)
    cookie = {"Cookie": f"{COOKIE}={sid}"}
    r = await api.get("/api/v1/namespaces/default/pods", headers={**cookie, CSRF_HEADER: csrf})
    assert r.status == 200 and [p["metadata"]["name"] for p in (await r.json())["items"]] == ["p1"]
    for headers in (cookie, {**cookie, CSRF_HEADER: "nope"}):
        r = await api.get("/api/v1/namespaces/default/pods", headers=headers)
        assert r.status == 403 and CSRF_HEADER in (await r.json())["message"]


async def test_a_cookie_write_without_the_csrf_token_is_refused_and_changes_nothing(api):
    sid, csrf = await _login(api)
    cookie = {"Cookie": f"{COOKIE}={sid}"}
    r = await api.delete("/api/v1/namespaces/default/pods/p1", headers=cookie)
    assert r.status == 403 and (await r.json())["kind"] == "Status"
    r = await api.get("/api/v1/namespaces/default/pods/p1", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status == 200 and not (await r.json())["metadata"].get("deletionTimestamp")
    # Same cookie and token, but sent by another site's page: refused too.
    r = await api.delete("/api/v1/namespaces/default/pods/p1",
                         headers={**cookie, CSRF_HEADER: csrf, "Origin": "https://evil.example"})
    assert r.status == 403 and "cross-origin" in (await r.json())["message"]
    r = await api.delete("/api/v1/namespaces/default/pods/p1", headers={**cookie, CSRF_HEADER: csrf})
    assert r.status == 200


async def test_logout_and_unknown_sessions(api):
    sid, csrf = await _login(api)
    cookie = {"Cookie": f"{COOKIE}={sid}"}
    r = await api.post("/ui/logout", headers={**cookie, CSRF_HEADER: csrf})
    assert r.status == 200
    r = await api.get("/api/v1/namespaces/default/pods", headers={**cookie, CSRF_HEADER: csrf})
    assert r.status == 401 and "phalanx ui" in (await r.json())["message"]
    r = await api.get("/ui/session", headers={"Cookie": f"{COOKIE}=made-up"})
    assert r.status == 401


async def test_the_page_is_public_and_locked_down(api):
    r = await api.get("/ui/")
    assert r.status == 200 and r.content_type == "text/html"
    csp = r.headers["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert TOKEN not in await r.text()
    assert (await api.get("/ui/app.js")).content_type == "text/javascript"
    assert (await api.get("/ui", allow_redirects=False)).headers["Location"] == "/ui/"
    assert (await api.get("/ui/../api/v1/pods")).status in (403, 404)  # normalized away from the UI: not public
    assert (await api.get("/ui/nothing.js")).status == 404
    r = await api.get("/ui/api/timeline/default/pytorchjobs/j1", headers={"Authorization": f"Bearer {TOKEN}"})
    assert r.status == 404  # no histories kept by this app
    r = await api.get("/ui/api/timeline/default/pytorchjobs/j1")
    assert r.status == 403  # anonymous


def test_phalanx_ui_without_a_control_plane_says_how_to_start_one(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from phalanx.cli.main import app as cli

    monkeypatch.setenv("PHALANX_HOME", str(tmp_path))
    r = CliRunner().invoke(cli, ["ui", "--no-open"])
    assert r.exit_code == 3 and "phalanx up" in r.output
    r = CliRunner().invoke(cli, ["ui", "pods", "--no-open"])
    assert r.exit_code == 2 and "jobs, queues, nodes" in r.output
