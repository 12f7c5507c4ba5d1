"""Who a request comes from and whether it may do what it asks: bearer tokens, then RBAC.

The admin token (the kubeconfig's) is compared in constant time and makes the user
``admin`` in ``system:masters``, which RBAC never consults. A ServiceAccount token
(``tokens``) makes ``system:serviceaccount:<ns>:<name>`` while its ServiceAccount exists
with the uid it names. Any other bearer token gets the apiserver's 401 (docs/REFERENCE.md
golden 63); a request without one is ``system:anonymous``, whom nothing is granted
(403, golden 62) whatever the stored policy says. Everyone else is authorized by
``rbac.Policy`` over the stored ClusterRoles, ClusterRoleBindings, Roles and RoleBindings,
watched by informers that start with the first such request; decisions are cached until
one of those changes. ``Impersonate-*`` headers are not served: a request is its sender's.
A request with no Authorization header may present the web view's session cookie
(``websessions``): it is then its ticket's user, if it also carries the session's CSRF token
and no foreign ``Origin``.
"""
from __future__ import annotations

import hmac
import logging
from pathlib import Path
from typing import Awaitable, Callable

from aiohttp import web
from aiohttp.typedefs import Middleware
from cryptography.hazmat.primitives.asymmetric import rsa

from phalanx.client.interface import Client
from phalanx.objects.clock import Clock
from phalanx.objects.errors import NotFound
from phalanx.objects.meta import uid_of
from phalanx.runtime.informer import Informer
from phalanx.server import requestinfo
from phalanx.server.rbac import (
    ANONYMOUS,
    AUTHENTICATED,
    MASTERS,
    Decision,
    Policy,
    UserInfo,
    forbidden_status,
    service_account_user,
)
from phalanx.server.requestinfo import RequestInfo
from phalanx.server.status import failure, json_response
from phalanx.server.tokens import Claims, InvalidToken, TokenSigner, ensure_signing_key
from phalanx.server.websessions import (
    COOKIE,
    CSRF_HEADER,
    Session,
    WebSessions,
    csrf_ok,
    is_public,
    same_origin,
)

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

ADMIN = UserInfo("admin", (MASTERS, AUTHENTICATED))
RBAC_KINDS = ("ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")
SYNC_TIMEOUT = 10.0
_MAX_CACHED = 4096
USER: web.RequestKey[UserInfo] = web.RequestKey("user")
WEB_SESSION: web.RequestKey[Session[UserInfo]] = web.RequestKey("web_session")  # set for cookie requests
CSRF_EXEMPT = ("GET", "/ui/session")  # where the page, holding only its cookie, reads its CSRF token


def bearer_token(header: str | None) -> str | None:
    """The token of ``Bearer <token>`` (scheme case-insensitive); None when there is none
    (no header, another scheme, an empty token): the request is then anonymous."""
    if not header:
        return None
    scheme, _, presented = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return presented.strip() or None


class AccessControl:
    """Authentication and authorization for one API server over ``client``."""

    def __init__(self, token: str, client: Client, clock: Clock, key_path: Path | None = None) -> None:
        if not token:
            raise ValueError("the API token must not be empty: the server never runs unauthenticated")
        self._admin = token.encode("utf-8")
        self.client = client
        self.clock = clock
        self._key_path = key_path
        self._signer: TokenSigner | None = None
        self._verified: dict[str, Claims] = {}  # tokens whose signature was checked
        self._informers: dict[str, Informer] = {}
        self._policy: Policy | None = None
        self._decisions: dict[tuple[str, tuple[str, ...], RequestInfo], Decision] = {}
        self.sessions: WebSessions[UserInfo] = WebSessions(clock)

    # -- tokens ----------------------------------------------------------------

    @property
    def signer(self) -> TokenSigner:
        """The ServiceAccount token signer; its key is made on first use (in memory without a path)."""
        if self._signer is None:
            if self._key_path is not None:
                key = ensure_signing_key(self._key_path)
            else:
                key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self._signer = TokenSigner(key)
        return self._signer

    async def authenticate(self, header: str | None) -> UserInfo | None:
        """The request's user; None for a bearer token that is not valid (401)."""
        token = bearer_token(header)
        if token is None:
            return ANONYMOUS
        if hmac.compare_digest(token.encode("utf-8", "surrogateescape"), self._admin):
            return ADMIN
        try:
            return (await self.service_account_user(token))[0]
        except InvalidToken as e:
            log.debug("refused a bearer token: %s", e)
            return None

    async def review(self, token: str, audiences: tuple[str, ...] | None = None) -> tuple[UserInfo, tuple[str, ...]]:
        """TokenReview: the user of any valid token and the audiences it is good for; raises InvalidToken."""
        if hmac.compare_digest(token.encode("utf-8", "surrogateescape"), self._admin):
            return ADMIN, audiences or self.signer.api_audiences
        return await self.service_account_user(token, audiences)

    async def service_account_user(self, token: str, audiences: tuple[str, ...] | None = None
                                   ) -> tuple[UserInfo, tuple[str, ...]]:
        """The ServiceAccount user of ``token`` and the audiences (of ``audiences``, the API's by
        default) it is good for; raises InvalidToken saying why it is not one."""
        claims = self._verified.get(token)
        if claims is None:
            claims = self.signer.verify_signature(token)
            if claims is None:
                raise InvalidToken("invalid bearer token")
            if len(self._verified) >= _MAX_CACHED:
                self._verified.clear()
            self._verified[token] = claims
        matched = self.signer.check(claims, self.clock.now(), audiences)
        sa = await self._service_account(claims.namespace, claims.name)
        if sa is None:
            raise InvalidToken(f"service account {claims.namespace}/{claims.name} has been deleted")
        if uid_of(sa) != claims.uid:
            raise InvalidToken(f"service account UID ({uid_of(sa)}) does not match claim ({claims.uid})")
        extra = {"authentication.kubernetes.io/credential-id": (f"JTI={claims.jti}",)} if claims.jti else None
        return service_account_user(claims.namespace, claims.name, claims.uid, extra), matched

    async def _service_account(self, namespace: str, name: str) -> dict | None:
        informer = await self._informer("ServiceAccount")
        sa = informer.get(namespace, name)
        if sa is not None:
            return sa
        try:  # created a moment ago: not in the cache yet
            return await self.client.get("ServiceAccount", name, namespace)
        except NotFound:
            return None

    # -- RBAC ------------------------------------------------------------------

    async def _informer(self, kind: str) -> Informer:
        informer = self._informers.get(kind)
        if informer is None:
            informer = self._informers[kind] = Informer(self.client, kind)
            if kind in RBAC_KINDS:
                informer.add_handler(self._invalidate)
            await informer.start()
        if not informer.synced:
            await informer.wait_synced(SYNC_TIMEOUT)
        return informer

    def _invalidate(self, _type: str, _obj: object, _old: object) -> None:
        self._policy = None
        self._decisions.clear()

    async def policy(self) -> Policy:
        if self._policy is None:
            informers = [await self._informer(k) for k in RBAC_KINDS]
            self._policy = Policy(*(i.list() for i in informers))  # one consistent view: no await in between
        return self._policy

    async def authorize(self, user: UserInfo, info: RequestInfo) -> Decision:
        if user is ADMIN:
            return Decision(True)
        if user is ANONYMOUS:
            return Decision(False)
        key = (user.name, user.groups, info)
        decision = self._decisions.get(key)
        if decision is None:
            policy = await self.policy()
            decision = policy.authorize(user, info)
            if len(self._decisions) >= _MAX_CACHED:
                self._decisions.clear()
            self._decisions[key] = decision
        return decision

    async def stop(self) -> None:
        for informer in self._informers.values():
            await informer.stop()
        self._informers.clear()


ACCESS: web.AppKey[AccessControl] = web.AppKey("access", AccessControl)


def access_middleware(access: AccessControl) -> Middleware:
    """Authenticate, then authorize; the user is kept on the request (``USER``)."""

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        if is_public(request.path):
            return await handler(request)
        header = request.headers.get("Authorization")
        cookie = request.cookies.get(COOKIE)
        if header is None and cookie:
            session = access.sessions.lookup(cookie)
            if session is None:
                return failure(401, "Unauthorized", "Unauthorized: the web session has ended (run phalanx ui "
                                                    "for a new login link)")
            if not same_origin(request.headers.get("Origin"), request.host):
                return failure(403, "Forbidden", "forbidden: a cross-origin request with the web session cookie")
            if (request.method, request.path) != CSRF_EXEMPT and \
                    not csrf_ok(session, request.headers.get(CSRF_HEADER)):
                return failure(403, "Forbidden", f"forbidden: the web session's {CSRF_HEADER} header is missing "
                                                 "or wrong")
            request[WEB_SESSION] = session
            user: UserInfo | None = session.user
        else:
            user = await access.authenticate(header)
        if user is None:
            return failure(401, "Unauthorized", "Unauthorized")
        request[USER] = user
        if user is not ADMIN:
            query = {k: request.query.getall(k) for k in request.query.keys()}
            info = requestinfo.parse(request.method, request.path, query)
            decision = await access.authorize(user, info)
            if not decision.allowed:
                return json_response(forbidden_status(user, info, decision.reason), status=403)
        return await handler(request)

    return middleware

