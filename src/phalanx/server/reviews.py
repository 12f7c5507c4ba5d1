"""The create-only authentication and authorization resources: nothing stored, an answer computed.

``serviceaccounts/{name}/token`` (TokenRequest: ``kubectl create token``), ``tokenreviews``
and ``selfsubjectreviews`` (``kubectl auth whoami``) in authentication.k8s.io/v1, and
``selfsubjectaccessreviews`` (``kubectl auth can-i``) in authorization.k8s.io/v1, with the
kube-apiserver's defaults, rules and messages.
"""
from __future__ import annotations

from typing import Any

from aiohttp import web

from phalanx.api.registry import ResourceType
from phalanx.objects.clock import format_time
from phalanx.objects.errors import BadRequest, FieldError, Invalid
from phalanx.objects.meta import uid_of
from phalanx.server import bodies
from phalanx.server.auth import ACCESS, USER, AccessControl
from phalanx.server.rbac import UserInfo
from phalanx.server.requestinfo import RequestInfo
from phalanx.server.routes import Route, not_found_response
from phalanx.server.status import error_response, failure, json_response
from phalanx.server.tokens import DEFAULT_EXPIRATION_SECONDS, InvalidToken, validate_expiration

AUTHN = "authentication.k8s.io"
AUTHZ = "authorization.k8s.io"
TOKEN_REQUEST = ResourceType("TokenRequest", f"{AUTHN}/v1", "token", "", has_status=False)
TOKEN_REVIEW = ResourceType("TokenReview", f"{AUTHN}/v1", "tokenreviews", "tokenreview", namespaced=False,
                            has_status=False)
SELF_SUBJECT_REVIEW = ResourceType("SelfSubjectReview", f"{AUTHN}/v1", "selfsubjectreviews", "selfsubjectreview",
                                   namespaced=False, has_status=False)
SELF_SUBJECT_ACCESS_REVIEW = ResourceType("SelfSubjectAccessReview", f"{AUTHZ}/v1", "selfsubjectaccessreviews",
                                          "selfsubjectaccessreview", namespaced=False, has_status=False)
REVIEWS: tuple[ResourceType, ...] = (SELF_SUBJECT_REVIEW, TOKEN_REVIEW, SELF_SUBJECT_ACCESS_REVIEW)
GROUPS = frozenset({AUTHN, AUTHZ})


def _invalid(rt: ResourceType, name: str, errors: list[FieldError]) -> Invalid:
    return Invalid(errors, prefix=f'{rt.kind}.{rt.group} "{name}" is invalid: ')


async def _body(request: web.Request, rt: ResourceType) -> dict[str, Any]:
    body = await bodies.object_body(request, rt)
    if body.get("kind") not in (None, "", rt.kind) or body.get("apiVersion") not in (None, "", rt.api_version):
        raise BadRequest(f"the body of a {rt.kind} request must be a {rt.api_version} {rt.kind}, "
                         f"not {body.get('apiVersion')} {body.get('kind')}")
    for key in ("metadata", "spec"):
        if not isinstance(body.get(key) or {}, dict):
            raise BadRequest(f"{key} must be a JSON object")
    return body


def _user_status(user: UserInfo) -> dict[str, Any]:
    out: dict[str, Any] = {"username": user.name}
    if user.uid:
        out["uid"] = user.uid
    out["groups"] = list(user.groups)
    if user.extra:
        out["extra"] = {k: list(v) for k, v in user.extra.items()}
    return out


def _created(rt: ResourceType, body: dict[str, Any], status: dict[str, Any],
             metadata: dict[str, Any] | None = None) -> web.Response:
    return json_response({"kind": rt.kind, "apiVersion": rt.api_version,
                          "metadata": metadata or {"creationTimestamp": None},
                          "spec": body.get("spec") or {}, "status": status}, status=201)


# ---------------------------------------------------------------- serviceaccounts/{name}/token

async def token_request(request: web.Request, route: Route) -> web.StreamResponse:
    """POST .../serviceaccounts/{name}/token: a token for the ServiceAccount (404 when it does not exist)."""
    access: AccessControl = request.app[ACCESS]
    name, namespace = route.name or "", route.namespace or ""
    body = await _body(request, TOKEN_REQUEST)
    meta = body.get("metadata") or {}
    for key, want in (("name", name), ("namespace", namespace)):
        given = meta.get(key)
        if given and given != want:
            what = "name" if key == "name" else "namespace"
            raise _invalid(TOKEN_REQUEST, name, [FieldError(f"metadata.{key}", "Invalid",
                                                            f"must match the service account {what} if specified",
                                                            given)])
    sa = await access.client.get("ServiceAccount", name, namespace)
    spec = dict(body.get("spec") or {})
    audiences = spec.get("audiences") or list(access.signer.api_audiences)
    if not isinstance(audiences, list) or not all(isinstance(a, str) for a in audiences):
        raise _invalid(TOKEN_REQUEST, "", [FieldError("spec.audiences", "Invalid", "must be a list of strings",
                                                      str(audiences))])
    seconds = spec.get("expirationSeconds")
    seconds = DEFAULT_EXPIRATION_SECONDS if seconds is None else seconds
    problem = validate_expiration(seconds)
    if problem:
        raise _invalid(TOKEN_REQUEST, "", [FieldError("spec.expirationSeconds", "Invalid", problem, seconds)])
    if spec.get("boundObjectRef"):
        raise _invalid(TOKEN_REQUEST, "", [FieldError("spec.boundObjectRef", "Forbidden",
                                                      "tokens bound to an object are not supported by Phalanx")])
    now = access.clock.now()
    token, claims = access.signer.issue(namespace, name, uid_of(sa), audiences, seconds, now)
    spec.update(audiences=audiences, expirationSeconds=seconds, boundObjectRef=None)
    metadata = {"name": name, "namespace": namespace, "creationTimestamp": format_time(now)}
    status = {"token": token, "expirationTimestamp": format_time(now.fromtimestamp(claims.expires, now.tzinfo))}
    return _created(TOKEN_REQUEST, {"spec": spec}, status, metadata)


# ---------------------------------------------------------------- the review resources

async def dispatch(request: web.Request, group: str, version: str, rest: list[str]) -> web.StreamResponse:
    """``/apis/{authentication,authorization}.k8s.io/v1/<review>``: POST only."""
    rt = next((r for r in REVIEWS if r.group == group and r.version == version and [r.plural] == rest), None)
    if rt is None:
        return not_found_response()
    if request.method != "POST":
        return failure(405, "MethodNotAllowed", "the server does not allow this method on the requested resource")
    try:
        body = await _body(request, rt)
        if rt is TOKEN_REVIEW:
            return await _token_review(request, body)
        if rt is SELF_SUBJECT_REVIEW:
            return _created(rt, {}, {"userInfo": _user_status(request[USER])})
        return await _self_subject_access_review(request, body)
    except Invalid as e:
        return error_response(e, rt)


async def _token_review(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
    access: AccessControl = request.app[ACCESS]
    spec = body.get("spec") or {}
    token = spec.get("token")
    if not isinstance(token, str) or not token:
        raise _invalid(TOKEN_REVIEW, "", [FieldError("spec.token", "Required", "")])
    wanted = spec.get("audiences") or None
    if wanted is not None and (not isinstance(wanted, list) or not all(isinstance(a, str) for a in wanted)):
        raise _invalid(TOKEN_REVIEW, "", [FieldError("spec.audiences", "Invalid", "must be a list of strings",
                                                     str(wanted))])
    status: dict[str, Any] = {"user": {}}
    try:
        user, audiences = await access.review(token, tuple(wanted) if wanted else None)
        status = {"authenticated": True, "user": _user_status(user), "audiences": list(audiences)}
    except InvalidToken as e:
        status["error"] = str(e) if str(e) == "invalid bearer token" else f"[invalid bearer token, {e}]"
    return _created(TOKEN_REVIEW, body, status)


def _attributes(spec: dict[str, Any]) -> RequestInfo:
    res, nonres = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if isinstance(res, dict) and not nonres:
        def s(key: str) -> str:
            v = res.get(key)
            return v if isinstance(v, str) else ""
        return RequestInfo(s("verb"), "", True, s("group"), s("version"), s("resource"), s("subresource"),
                           s("namespace"), s("name"))
    if isinstance(nonres, dict) and not res:
        path, verb = nonres.get("path"), nonres.get("verb")
        return RequestInfo(verb if isinstance(verb, str) else "", path if isinstance(path, str) else "")
    detail = "exactly one of nonResourceAttributes or resourceAttributes must be specified"
    raise _invalid(SELF_SUBJECT_ACCESS_REVIEW, "", [FieldError("spec.resourceAttributes", "Invalid", detail,
                                                               "null" if not res else "{...}")])


async def _self_subject_access_review(request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
    access: AccessControl = request.app[ACCESS]
    user: UserInfo = request[USER]
    decision = await access.authorize(user, _attributes(body.get("spec") or {}))
    status: dict[str, Any] = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    return _created(SELF_SUBJECT_ACCESS_REVIEW, body, status)
