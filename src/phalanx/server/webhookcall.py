"""The AdmissionReview exchange with one webhook: the request, the HTTPS POST, the answer checked.

Errors are worded as the apiserver words them: a failed call is
``failed calling webhook "<name>": failed to call webhook: Post "<url>": <why>``,
a denial ``admission webhook "<name>" denied the request: <message>``.
"""
from __future__ import annotations

import asyncio
import base64
import binascii
import json
import ssl
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from phalanx.api.webhookconfig import Webhook
from phalanx.objects.errors import ApiError
from phalanx.server.webhookmatch import Attributes
from phalanx.store.patch import JsonPatchError, json_patch

Obj = dict[str, Any]

ADMIN_USER: Obj = {"username": "system:admin", "groups": ["system:masters", "system:authenticated"]}
MAX_RESPONSE_BYTES = 3 * 1024 * 1024


class CallFailed(Exception):
    """The webhook could not be asked or answered nonsense (ErrCallingWebhook): its failurePolicy decides."""

    def __init__(self, webhook: str, reason: str) -> None:
        super().__init__(f'failed calling webhook "{webhook}": {reason}')
        self.webhook = webhook


class InternalError(ApiError):
    """apierrors.NewInternalError: 500, the cause repeated in ``details.causes``."""

    code = 500
    reason = "InternalError"

    def __init__(self, cause: str) -> None:
        super().__init__(f"Internal error occurred: {cause}")
        self.cause = cause

    def to_status(self) -> dict[str, Any]:
        status = super().to_status()
        status["details"] = {"causes": [{"message": self.cause}]}
        return status


class WebhookRejection(ApiError):
    """A webhook said no: its Status, with the code at least 400 and the message prefixed (ToStatusErr)."""

    def __init__(self, webhook: str, result: Any) -> None:
        result = dict(result) if isinstance(result, dict) else {}
        code = result.get("code")
        self.code = code if isinstance(code, int) and not isinstance(code, bool) and 400 <= code <= 599 else 400
        self.reason = str(result.get("reason") or "")
        denied = f'admission webhook "{webhook}" denied the request'
        message = result.get("message")
        if isinstance(message, str) and message:
            text = f"{denied}: {message}"
        elif self.reason:
            text = f"{denied}: {self.reason}"
        else:
            text = f"{denied} without explanation"
        super().__init__(text)
        self.details = result.get("details") if isinstance(result.get("details"), dict) else None
        self.webhook = webhook

    def to_status(self) -> dict[str, Any]:
        status = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                  "message": self.message, "code": self.code}
        if self.reason:
            status["reason"] = self.reason
        if self.details:
            status["details"] = self.details
        return status


@dataclass
class Request:
    """Who asks and how: what the AdmissionReview says beside the objects."""

    user: Obj = field(default_factory=lambda: dict(ADMIN_USER))
    dry_run: bool = False
    options: Obj | None = None


@dataclass
class Answer:
    allowed: bool
    result: Any = None
    patch: list[Any] | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Target:
    """Where a webhook is reached: the URL named in errors, what is dialled, the name checked by TLS."""

    url: str
    connect_url: str
    server_hostname: str | None = None


_OPTIONS_KIND = {"CREATE": "CreateOptions", "UPDATE": "UpdateOptions", "DELETE": "DeleteOptions"}


def review(hook: Webhook, attrs: Attributes, uid: str, request: Request) -> Obj:
    """The AdmissionReview sent (admission.k8s.io/v1, or v1beta1 when that is all the webhook speaks)."""
    req: Obj = {
        "uid": uid,
        "kind": {"group": attrs.kind_group, "version": attrs.kind_version, "kind": attrs.kind},
        "resource": {"group": attrs.group, "version": attrs.version, "resource": attrs.resource},
        "requestKind": {"group": attrs.kind_group, "version": attrs.kind_version, "kind": attrs.kind},
        "requestResource": {"group": attrs.group, "version": attrs.version, "resource": attrs.resource},
        "name": attrs.name,
        "operation": attrs.operation,
        "userInfo": request.user,
        "object": attrs.object,
        "oldObject": attrs.old_object,
        "dryRun": request.dry_run,
    }
    if attrs.subresource:
        req["subResource"] = req["requestSubResource"] = attrs.subresource
    if attrs.namespace and attrs.resource != "namespaces":
        req["namespace"] = attrs.namespace
    if attrs.operation in _OPTIONS_KIND:
        req["options"] = {"kind": _OPTIONS_KIND[attrs.operation], "apiVersion": "meta.k8s.io/v1",
                          **(request.options or {})}
    return {"kind": "AdmissionReview", "apiVersion": f"admission.k8s.io/{hook.review_version}", "request": req}


def ssl_context(hook: Webhook) -> ssl.SSLContext:
    """Verified against ``caBundle`` (the system's CAs when there is none)."""
    if hook.ca_bundle:
        try:
            return ssl.create_default_context(cadata=hook.ca_bundle.decode("ascii", "replace"))
        except (ssl.SSLError, ValueError) as e:
            raise CallFailed(hook.name, f"could not get REST client: unable to load root certificates: {e}") from None
    return ssl.create_default_context()


async def call(session: aiohttp.ClientSession, hook: Webhook, target: Target, body: Obj,
               ctx: ssl.SSLContext) -> Obj:
    """POST the review; the decoded answer. Raises CallFailed."""
    timeout = hook.timeout_seconds
    shown = with_timeout(target.url, timeout)
    try:
        async with asyncio.timeout(timeout):
            async with session.post(with_timeout(target.connect_url, timeout), json=body, ssl=ctx,
                                    server_hostname=target.server_hostname,
                                    headers={"Accept": "application/json"}) as resp:
                raw = await resp.content.read(MAX_RESPONSE_BYTES + 1)
                status = resp.status
    except TimeoutError:
        raise CallFailed(hook.name, f'failed to call webhook: Post "{shown}": context deadline exceeded') from None
    except aiohttp.ClientConnectorCertificateError as e:
        why = f"tls: failed to verify certificate: x509: {_cert_reason(e)}"
        raise CallFailed(hook.name, f'failed to call webhook: Post "{shown}": {why}') from None
    except aiohttp.ClientConnectorError as e:
        why = f"dial tcp {e.host}:{e.port}: connect: {_errno_text(e)}"
        raise CallFailed(hook.name, f'failed to call webhook: Post "{shown}": {why}') from None
    except (aiohttp.ClientError, OSError, ssl.SSLError, ValueError) as e:
        raise CallFailed(hook.name, f'failed to call webhook: Post "{shown}": {e or type(e).__name__}') from None
    if status < 200 or status > 299:
        raise CallFailed(hook.name, f"failed to call webhook: {_status_error(status, raw)}")
    if len(raw) > MAX_RESPONSE_BYTES:
        raise CallFailed(hook.name, "received invalid webhook response: the response is too large")
    try:
        out = json.loads(raw)
    except ValueError as e:
        raise CallFailed(hook.name, f"received invalid webhook response: json parse error: {e}") from None
    if not isinstance(out, dict):
        raise CallFailed(hook.name, "received invalid webhook response: the response is not a JSON object")
    return out


def verify(hook: Webhook, uid: str, sent: Obj, body: Obj) -> Answer:
    """VerifyAdmissionResponse, then the patch decoded (mutating webhooks only)."""
    def bad(why: str) -> CallFailed:
        return CallFailed(hook.name, f"received invalid webhook response: {why}")

    want = sent["apiVersion"]
    if body.get("apiVersion") != want or body.get("kind") != "AdmissionReview":
        raise bad(f"expected webhook response of {want}, Kind=AdmissionReview, got "
                  f"{body.get('apiVersion') or ''}, Kind={body.get('kind') or ''}")
    resp = body.get("response")
    if not isinstance(resp, dict):
        raise bad("webhook response was absent")
    if resp.get("uid") != uid:
        raise bad(f'expected response.uid="{uid}", got "{resp.get("uid") or ""}"')
    allowed = resp.get("allowed")
    if not isinstance(allowed, bool):
        raise bad("response.allowed must be a boolean")
    warnings = [w for w in resp.get("warnings") or [] if isinstance(w, str) and w.isprintable() and w.strip()]
    patch_b64, patch_type = resp.get("patch"), resp.get("patchType")
    if not hook.mutating:
        if patch_b64:
            raise bad("validating webhook may not return response.patch")
        if patch_type is not None:
            raise bad("validating webhook may not return response.patchType")
        return Answer(allowed, resp.get("status"), None, warnings)
    if patch_b64 and patch_type is None:
        raise bad("webhook returned response.patch but not response.patchType")
    if not patch_b64 and patch_type is not None:
        raise bad("webhook returned response.patchType but not response.patch")
    patch = None
    if patch_b64:
        if patch_type != "JSONPatch":
            raise CallFailed(hook.name, f'unsupported patch type "{patch_type}"')
        try:
            patch = json.loads(base64.b64decode(str(patch_b64), validate=True))
        except (binascii.Error, ValueError) as e:
            raise bad(f"response.patch: {e}") from None
        if not isinstance(patch, list):
            raise InternalError("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    return Answer(allowed, resp.get("status"), patch, warnings)


def apply_patch(obj: Obj, patch: list[Any]) -> Obj:
    """A mutating webhook's JSONPatch applied; a patch that does not apply is an internal error."""
    try:
        out = json_patch(obj, patch)
    except JsonPatchError as e:
        raise InternalError(str(e)) from None
    if not isinstance(out, dict):
        raise InternalError("the patched object is not a JSON object")
    return out


def with_timeout(url: str, seconds: int) -> str:
    """The URL as the apiserver posts to it: with ``?timeout=<n>s``."""
    sep = "&" if urllib.parse.urlsplit(url).query else "?"
    return f"{url}{sep}timeout={seconds}s"


def _errno_text(e: aiohttp.ClientConnectorError) -> str:
    err = e.os_error
    if isinstance(err, ConnectionRefusedError):
        return "connection refused"
    return (err.strerror or str(err)).lower() if isinstance(err, OSError) else str(err)


def _cert_reason(e: aiohttp.ClientConnectorCertificateError) -> str:
    cert_error = e.certificate_error
    text = getattr(cert_error, "verify_message", "") or str(cert_error)
    if "unable to get local issuer" in text or "self-signed" in text or "self signed" in text:
        return "certificate signed by unknown authority"
    if "hostname mismatch" in text or "match" in text:
        return f"certificate is not valid for the name asked: {text}"
    return text


def _status_error(code: int, raw: bytes) -> str:
    """What client-go says of a non-2xx answer: the Status's message, else by code."""
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if isinstance(body, dict) and body.get("kind") == "Status" and isinstance(body.get("message"), str):
        return body["message"]
    if code == 404:
        return "the server could not find the requested resource"
    text = raw[:1024].decode("utf-8", "replace").strip()
    if code >= 500 and text:
        return f'an error on the server ("{text}") has prevented the request from succeeding'
    return f"the server responded with the status code {code} but did not return more information"


__all__ = ["Answer", "CallFailed", "InternalError", "Request", "Target", "WebhookRejection", "apply_patch", "call", "with_timeout",
           "review", "ssl_context", "verify"]
