"""The web view's credentials: one-time login tickets, browser sessions and their CSRF tokens.

A ticket is made for a caller holding a bearer token (``phalanx ui``), is good for one use within
``TICKET_TTL`` seconds, and buys a session: a random id the browser keeps in an HttpOnly,
SameSite=Strict, Secure cookie, and a CSRF token the page reads once (``/ui/session``) and sends
in ``X-CSRF-Token`` with every API call. A session acts as the user whose token bought the ticket;
it ends after ``IDLE_TTL`` seconds unused, at logout, or when the control plane stops (kept in
memory only). Secrets are kept as SHA-256 digests, so a dump of this table grants nothing.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Generic, TypeVar
from urllib.parse import urlsplit

from phalanx.objects.clock import Clock

COOKIE = "__Host-phalanx-session"  # __Host-: Secure, Path=/, no Domain, so no other site or path sets it
CSRF_HEADER = "X-CSRF-Token"
TICKET_TTL = 120.0
IDLE_TTL = 12 * 3600.0
MAX_TICKETS = 64
MAX_SESSIONS = 256
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})

U = TypeVar("U")


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8", "surrogateescape")).digest()


@dataclass
class Session(Generic[U]):
    user: U
    csrf: str
    last_used: float


class WebSessions(Generic[U]):
    """Tickets and sessions over ``clock``; every method is synchronous and never blocks."""

    def __init__(self, clock: Clock, ticket_ttl: float = TICKET_TTL, idle_ttl: float = IDLE_TTL) -> None:
        self.clock = clock
        self.ticket_ttl = ticket_ttl
        self.idle_ttl = idle_ttl
        self._tickets: dict[bytes, tuple[U, float]] = {}
        self._sessions: dict[bytes, Session[U]] = {}

    def issue_ticket(self, user: U) -> str:
        """A one-time ticket for ``user``; the oldest outstanding ticket goes when too many are."""
        now = self.clock.monotonic()
        self._tickets = {k: v for k, v in self._tickets.items() if v[1] > now}
        while len(self._tickets) >= MAX_TICKETS:
            del self._tickets[next(iter(self._tickets))]
        ticket = secrets.token_urlsafe(32)
        self._tickets[_digest(ticket)] = (user, now + self.ticket_ttl)
        return ticket

    def redeem(self, ticket: str) -> tuple[str, Session[U]] | None:
        """Exchange a ticket (used up whatever the outcome) for a new session's id and the session;
        None when it is unknown, used or expired."""
        entry = self._tickets.pop(_digest(ticket), None)
        now = self.clock.monotonic()
        if entry is None or entry[1] <= now:
            return None
        self._expire(now)
        while len(self._sessions) >= MAX_SESSIONS:  # the least recently used goes
            del self._sessions[min(self._sessions, key=lambda k: self._sessions[k].last_used)]
        sid = secrets.token_urlsafe(32)
        session = Session(entry[0], secrets.token_urlsafe(32), now)
        self._sessions[_digest(sid)] = session
        return sid, session

    def lookup(self, sid: str) -> Session[U] | None:
        """The live session of cookie value ``sid`` (its idle time starts again); None if there is none."""
        now = self.clock.monotonic()
        session = self._sessions.get(_digest(sid))
        if session is None:
            return None
        if now - session.last_used >= self.idle_ttl:
            del self._sessions[_digest(sid)]
            return None
        session.last_used = now
        return session

    def end(self, sid: str) -> None:
        self._sessions.pop(_digest(sid), None)

    def _expire(self, now: float) -> None:
        self._sessions = {k: s for k, s in self._sessions.items() if now - s.last_used < self.idle_ttl}

    def __len__(self) -> int:
        return len(self._sessions)


def csrf_ok(session: Session[U], presented: str | None) -> bool:
    """The request carries the session's CSRF token (compared in constant time)."""
    return bool(presented) and hmac.compare_digest(str(presented).encode("utf-8", "surrogateescape"),
                                                   session.csrf.encode("utf-8"))


def same_origin(origin: str | None, host: str | None) -> bool:
    """A request's ``Origin``, when the browser sent one, names this server (scheme aside: the
    server speaks one); a request without it (same-origin GETs) passes."""
    if not origin:
        return True
    if origin == "null":
        return False
    return bool(host) and urlsplit(origin).netloc.lower() == str(host).lower()


def is_public(path: str) -> bool:
    """The web view's paths served without credentials: the static pages and the login link
    (``/ui/login`` checks its own ticket). Nothing under them reads or changes an object."""
    if path in ("/ui", "/ui/", "/ui/login"):
        return True
    if not path.startswith("/ui/"):
        return False
    rest = path[len("/ui/"):]
    return "/" not in rest and rest not in ("session", "logout", "tickets")
