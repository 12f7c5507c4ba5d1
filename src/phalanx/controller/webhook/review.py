"""AdmissionReview (admission.k8s.io/v1) requests to responses: the validating webhooks
run Phalanx's own admission rules, the mutating ones return its defaults as a JSONPatch.

Paths are the original's (``/validate-kubeflow-org-v1-pytorchjob``, ...; MPIJob has no
validating webhook there). A denial carries what Phalanx's admission says after
``denied the request: ``, so the kube-apiserver prints the same message Phalanx's own
server does. Pure: bytes in, (HTTP status, JSON body) out; never raises on bad input.
"""
from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from typing import Any

from phalanx.api import admission
from phalanx.api.registry import JOB_KINDS, by_kind
from phalanx.objects.errors import ApiError

Obj = dict[str, Any]
REVIEW_API_VERSION = "admission.k8s.io/v1"
MAX_BODY_BYTES = 3 * 1024 * 1024 + 64 * 1024  # the apiserver's request limit, plus the review's envelope

# The original registers validating webhooks for these kinds only (MPIJob: validated in its controller).
VALIDATING_KINDS: tuple[str, ...] = ("PyTorchJob", "TFJob", "XGBoostJob", "PaddleJob", "JAXJob")
MUTATING_KINDS: tuple[str, ...] = tuple(JOB_KINDS)
VALIDATING_CONFIG_NAME = "validator.training-operator.kubeflow.org"  # the original's configuration
MUTATING_CONFIG_NAME = "defaulter.training-operator.kubeflow.org"  # Phalanx's (the original has none)


def validate_path(kind: str) -> str:
    return f"/validate-kubeflow-org-v1-{kind.lower()}"


def mutate_path(kind: str) -> str:
    return f"/mutate-kubeflow-org-v1-{kind.lower()}"


def validator_name(kind: str) -> str:
    return f"validator.{kind.lower()}.training-operator.kubeflow.org"


def defaulter_name(kind: str) -> str:
    return f"defaulter.{kind.lower()}.training-operator.kubeflow.org"


@dataclass(frozen=True)
class Route:
    kind: str
    mutating: bool


ROUTES: dict[str, Route] = {
    **{validate_path(k): Route(k, False) for k in VALIDATING_KINDS},
    **{mutate_path(k): Route(k, True) for k in MUTATING_KINDS},
}


class BadReview(ValueError):
    """The body is not an AdmissionReview v1 request (HTTP 400)."""


def handle(path: str, body: bytes) -> tuple[int, Obj]:
    """The HTTP status and JSON body answering a POST of ``body`` to ``path``:
    404 for an unknown path, 400 for a body that is not an AdmissionReview
    request, else 200 with the review's response (same ``uid``)."""
    route = ROUTES.get(path)
    if route is None:
        return 404, _plain_error(404, f"no webhook at {path!r}: one of {', '.join(sorted(ROUTES))}")
    try:
        request = parse_request(body)
    except BadReview as e:
        return 400, _plain_error(400, str(e))
    return 200, {"apiVersion": REVIEW_API_VERSION, "kind": "AdmissionReview", "response": respond(route, request)}


def parse_request(body: bytes) -> Obj:
    """``review.request`` of an AdmissionReview v1, checked for what ``respond`` reads."""
    if len(body) > MAX_BODY_BYTES:
        raise BadReview(f"request body too large: {len(body)} bytes, at most {MAX_BODY_BYTES}")
    try:
        review = json.loads(body)
    except (ValueError, RecursionError) as e:
        raise BadReview(f"the body is not JSON: {str(e)[:200]}") from None
    if not isinstance(review, dict):
        raise BadReview("the body must be a JSON object (an AdmissionReview)")
    if review.get("apiVersion") != REVIEW_API_VERSION or review.get("kind") != "AdmissionReview":
        raise BadReview(f'expected apiVersion "{REVIEW_API_VERSION}", kind "AdmissionReview"; got '
                        f'{str(review.get("apiVersion"))[:80]!r}, {str(review.get("kind"))[:80]!r}')
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadReview("request: Required value: an AdmissionReview request")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("request.uid: Required value: a non-empty string")
    for field in ("object", "oldObject"):
        value = request.get(field)
        if value is not None and not isinstance(value, dict):
            raise BadReview(f"request.{field}: must be an object or null")
    operation = request.get("operation")
    if not isinstance(operation, str):
        raise BadReview("request.operation: Required value: CREATE, UPDATE, DELETE or CONNECT")
    return request


def respond(route: Route, request: Obj) -> Obj:
    """The AdmissionReview response to a parsed request."""
    uid = request["uid"]
    operation = request["operation"]
    obj = request.get("object")
    if operation not in ("CREATE", "UPDATE") or obj is None:
        return {"uid": uid, "allowed": True}  # DELETE and CONNECT are not this webhook's business
    old = request.get("oldObject") if operation == "UPDATE" else None
    if obj.get("kind") != route.kind or obj.get("apiVersion") != by_kind(route.kind).api_version:
        return _denied(uid, 400, "BadRequest", f'this webhook admits {by_kind(route.kind).api_version} '
                       f'{route.kind}, got {str(obj.get("apiVersion"))[:80]} {str(obj.get("kind"))[:80]}')
    namespace = request.get("namespace") if isinstance(request.get("namespace"), str) else None
    ns_default = namespace or "default"
    if route.mutating:
        return _mutate(uid, obj, old, ns_default)
    return _validate(uid, obj, old, ns_default)


def _validate(uid: str, obj: Obj, old: Obj | None, namespace: str) -> Obj:
    """Phalanx's admission on the object (already defaulted by the mutating webhook on a
    cluster; defaulted again here, which changes nothing then)."""
    warnings: list[str] = []
    try:
        admission.admit(obj, _defaulted_old(old, namespace), namespace_default=namespace, warnings=warnings)
    except admission.WebhookDenied as e:
        return _with_warnings(_denied(uid, e.code, e.reason, e.detail), warnings)
    except ApiError as e:
        return _with_warnings(_denied(uid, e.code, e.reason, e.message), warnings)
    return _with_warnings({"uid": uid, "allowed": True}, warnings)


def _defaulted_old(old: Obj | None, namespace: str) -> Obj | None:
    """The stored object as Phalanx's store would hold it (defaults applied), for the
    update rules; as given when it cannot be parsed."""
    if old is None:
        return None
    try:
        return admission.default_object(old, namespace_default=namespace)
    except ApiError:
        return old


def _mutate(uid: str, obj: Obj, old: Obj | None, namespace: str) -> Obj:
    """The kind's defaults as one JSONPatch ``add`` of ``/spec`` (``add`` replaces an
    existing member). An object that cannot be parsed is allowed unchanged: the
    schema and the validating webhook refuse it with the right message."""
    try:
        data = admission.default_object(obj, _defaulted_old(old, namespace), namespace_default=namespace)
    except ApiError:
        return {"uid": uid, "allowed": True}
    spec = data.get("spec")
    if spec is None or spec == obj.get("spec"):
        return {"uid": uid, "allowed": True}
    patch = [{"op": "add", "path": "/spec", "value": spec}]
    return {"uid": uid, "allowed": True, "patchType": "JSONPatch",
            "patch": base64.b64encode(json.dumps(patch, separators=(",", ":")).encode()).decode()}


def _denied(uid: str, code: int, reason: str, message: str) -> Obj:
    return {"uid": uid, "allowed": False,
            "status": {"status": "Failure", "code": code, "reason": reason, "message": message}}


def _with_warnings(response: Obj, warnings: list[str]) -> Obj:
    if warnings:
        response["warnings"] = list(warnings)
    return response


def _plain_error(code: int, message: str) -> Obj:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": "BadRequest" if code == 400 else "NotFound", "code": code}

