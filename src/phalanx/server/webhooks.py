"""Dynamic admission in the API server: the registered webhooks called on every write that matches them.

``AdmittingClient`` wraps the server's ``Client``: on create, update, patch,
status writes, delete and pods/binding it computes the object to be stored,
calls the matching MutatingWebhookConfiguration webhooks in order (their
JSONPatch applied, then the object admitted again by the schema), then the
ValidatingWebhookConfiguration webhooks at once, and writes with a
resourceVersion precondition (retried on a conflict, as the apiserver's patch
is, unless the caller pinned it). ``enable(app)`` installs it on an API app.

Where a webhook is reached: ``clientConfig.url`` as given; a
``clientConfig.service`` on this machine is ``https://127.0.0.1:<p><path>``
where ``p`` is the Service port's numeric ``targetPort`` (its ``port`` when
none is set), and the certificate must be valid for
``<name>.<namespace>.svc`` — so a webhook server run on the host (as
``phalanx operator`` is) is reached through the Service ``phalanx install``
writes. Not sent to webhooks: dry runs (answered by admission alone), the
writes of the embedded components (they do not go through HTTP) and
``matchConditions`` (not evaluated: a webhook with some is called as without).
"""
from __future__ import annotations

import asyncio
import contextvars
import copy
import json
import logging
import uuid
from typing import Any, Awaitable, Callable

import aiohttp
from aiohttp import web

from phalanx.api.registry import ResourceType, by_kind
from phalanx.api.webhookconfig import KINDS, Webhook, ordered
from phalanx.client.interface import Client, ObjectList
from phalanx.objects.errors import Conflict, NotFound
from phalanx.server import webhookcall
from phalanx.server.app import ADMISSION, CLIENT, WARNINGS
from phalanx.server.webhookcall import CallFailed, InternalError, Request, Target, WebhookRejection
from phalanx.server.webhookmatch import Attributes, namespace_to_look_up, rules_match, selectors_match
from phalanx.store.rules import check_preconditions, keep_system_fields, patched, resource_type_of

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Admission = Callable[..., Obj]
Hooks = list[Webhook]
MAX_ATTEMPTS = 5  # read-call-write rounds before a conflict is given to the caller

_REQUEST: contextvars.ContextVar[web.Request | None] = contextvars.ContextVar("webhook_request", default=None)


class AdmittingClient:
    """A ``Client`` whose writes pass the registered admission webhooks first."""

    def __init__(self, inner: Client, admission: Admission) -> None:
        self._inner = inner
        self._admission = admission
        self._session: aiohttp.ClientSession | None = None
        self._parsed: dict[tuple[str, str, str], Hooks] = {}

    def __getattr__(self, name: str) -> Any:  # reads, watch and anything else: the inner client's
        return getattr(self._inner, name)

    async def get(self, kind: str, name: str, namespace: str | None = None) -> Obj:
        return await self._inner.get(kind, name, namespace)

    async def list(self, kind: str, namespace: str | None = None, label_selector: str | dict[str, str] | None = None,
                   field_selector: str | None = None) -> ObjectList:
        return await self._inner.list(kind, namespace, label_selector, field_selector)

    # ------------------------------------------------------------------ writes

    async def create(self, obj: Obj) -> Obj:
        rt = resource_type_of(obj)
        hooks = await self._hooks(rt, "CREATE", "")
        if not hooks:
            return await self._inner.create(obj)
        candidate = self._admission(obj)
        meta = candidate.get("metadata") or {}
        attrs = Attributes.of(rt, "CREATE", meta.get("namespace"), str(meta.get("name") or ""), object=candidate)
        final = await self._run(hooks, attrs)
        return await self._inner.create(final if final is not None else candidate)

    async def update(self, obj: Obj) -> Obj:
        rt = resource_type_of(obj)
        hooks = await self._hooks(rt, "UPDATE", "")
        if not hooks:
            return await self._inner.update(obj)
        meta: Obj = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}
        name, ns = str(meta.get("name") or ""), meta.get("namespace")
        return await self._write(rt, name, ns, hooks, "", lambda current: copy.deepcopy(obj),
                                 pinned=meta.get("resourceVersion") not in (None, ""))

    async def update_status(self, obj: Obj) -> Obj:
        rt = resource_type_of(obj)
        if not rt.has_status:
            return await self.update(obj)
        hooks = await self._hooks(rt, "UPDATE", "status")
        if not hooks:
            return await self._inner.update_status(obj)
        meta: Obj = obj["metadata"] if isinstance(obj.get("metadata"), dict) else {}

        def with_status(current: Obj) -> Obj:
            new = copy.deepcopy(current)
            new["metadata"]["resourceVersion"] = meta.get("resourceVersion")
            new["status"] = copy.deepcopy(obj.get("status"))
            return new
        return await self._write(rt, str(meta.get("name") or ""), meta.get("namespace"), hooks, "status",
                                 with_status, pinned=meta.get("resourceVersion") not in (None, ""))

    async def patch(self, kind: str, name: str, namespace: str | None, patch: Any, patch_type: str = "merge",
                    subresource: str | None = None) -> Obj:
        rt = by_kind(kind)
        sub = subresource or ""
        hooks = await self._hooks(rt, "UPDATE", sub) if sub in ("", "status") else []
        if not hooks:
            return await self._inner.patch(kind, name, namespace, patch, patch_type, subresource)
        ns = namespace if rt.namespaced else None

        def patched_copy(current: Obj) -> Obj:
            new = patched(rt, ns, name, copy.deepcopy(current), patch, patch_type)
            if not _pins_resource_version(patch, patch_type):
                new["metadata"]["resourceVersion"] = None
            return new
        return await self._write(rt, name, ns, hooks, sub, patched_copy, pinned=_pins_resource_version(patch,
                                                                                                       patch_type))

    async def delete(self, kind: str, name: str, namespace: str | None = None,
                     grace_period_seconds: int | None = None, preconditions_uid: str | None = None,
                     propagation_policy: str | None = None) -> Obj | None:
        rt = by_kind(kind)
        hooks = await self._hooks(rt, "DELETE", "")
        if hooks:
            current = await self._inner.get(kind, name, namespace)
            attrs = Attributes.of(rt, "DELETE", namespace, name, old_object=current)
            options: Obj = {k: v for k, v in (("gracePeriodSeconds", grace_period_seconds),
                                              ("propagationPolicy", propagation_policy)) if v is not None}
            if preconditions_uid is not None:
                options["preconditions"] = {"uid": preconditions_uid}
            await self._run(hooks, attrs, options)
        kwargs: Obj = {"grace_period_seconds": grace_period_seconds}
        if preconditions_uid is not None:
            kwargs["preconditions_uid"] = preconditions_uid
        if propagation_policy is not None:
            kwargs["propagation_policy"] = propagation_policy
        return await self._inner.delete(kind, name, namespace, **kwargs)

    async def bind(self, namespace: str, name: str, node_name: str) -> None:
        rt = by_kind("Pod")
        hooks = await self._hooks(rt, "CREATE", "binding")
        if hooks:
            binding = {"kind": "Binding", "apiVersion": "v1", "metadata": {"name": name, "namespace": namespace},
                       "target": {"kind": "Node", "name": node_name}}
            attrs = Attributes.of(rt, "CREATE", namespace, name, subresource="binding", object=binding,
                                  kind=("", "v1", "Binding"))
            final = await self._run(hooks, attrs)
            target = (final or binding).get("target")
            if isinstance(target, dict) and isinstance(target.get("name"), str):
                node_name = target["name"]
        await self._inner.bind(namespace, name, node_name)

    async def close(self) -> None:
        """Close the connections to the webhooks (the inner client is its owner's to close)."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _write(self, rt: ResourceType, name: str, ns: str | None, hooks: Hooks, sub: str,
                     build: Callable[[Obj], Obj], *, pinned: bool) -> Obj:
        """Read, build the new object, call the webhooks, write with the read's resourceVersion."""
        for attempt in range(MAX_ATTEMPTS):
            current = await self._inner.get(rt.kind, name, ns)
            new = build(current)
            meta = new.setdefault("metadata", {})
            check_preconditions(rt, name, meta, current)
            meta["resourceVersion"] = current["metadata"].get("resourceVersion")
            if sub == "status":
                candidate = new
            else:
                candidate = self._admission(new, copy.deepcopy(current))
                keep_system_fields(rt, candidate, current)
            attrs = Attributes.of(rt, "UPDATE", ns, name, subresource=sub, object=candidate, old_object=current)
            final = await self._run(hooks, attrs)
            out = final if final is not None else candidate
            try:
                if sub == "status":
                    return await self._inner.update_status(out)
                return await self._inner.update(out)
            except Conflict:
                if pinned or attempt == MAX_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable")

    # ------------------------------------------------------------------ webhooks

    async def _hooks(self, rt: ResourceType, operation: str, sub: str) -> Hooks:
        """The webhooks whose rules name this request (selectors are asked later, with the object)."""
        attrs = Attributes.of(rt, operation, "x" if rt.namespaced else None, "", subresource=sub)
        if rt.kind in KINDS:
            return []
        out = []
        for kind in KINDS:
            for hook in await self._configured(kind):
                # Scope is decided by the resource alone, so a placeholder namespace tells it.
                if rules_match(hook, attrs):
                    out.append(hook)
        return out

    async def _configured(self, kind: str) -> Hooks:
        configs = (await self._inner.list(kind)).items
        out: Hooks = []
        live = set()
        for c in sorted(configs, key=lambda o: o["metadata"]["name"]):
            key = (kind, c["metadata"]["name"], str(c["metadata"].get("resourceVersion")))
            live.add(key)
            if key not in self._parsed:
                self._parsed[key] = ordered([c])
            out += self._parsed[key]
        for key in [k for k in self._parsed if k[0] == kind and k not in live]:
            del self._parsed[key]
        return out

    async def _run(self, hooks: Hooks, attrs: Attributes, options: Obj | None = None) -> Obj | None:
        """Mutating webhooks in order, then validating ones at once. The object
        to store when a mutation changed it (admitted again), else None."""
        request = _request_info(attrs.operation, options)
        ns_labels = await self._namespace_labels(hooks, attrs)
        called = [h for h in hooks if selectors_match(h, attrs, ns_labels.get(namespace_to_look_up(h, attrs)))]
        mutating = [h for h in called if h.mutating]
        validating = [h for h in called if not h.mutating]
        obj, changed = attrs.object, False
        after: dict[str, Any] = {}  # each webhook's output, to see whether a later one changed the object
        for hook in mutating:
            out = await self._call_one(hook, _replace(attrs, obj), request)
            if out is not None and out != obj:
                obj, changed = out, True
            after[hook.name] = copy.deepcopy(obj)
        if changed:  # reinvocationPolicy IfNeeded: once more when a later webhook changed the object
            for hook in [h for h in mutating if h.reinvocation == "IfNeeded" and after[h.name] != obj]:
                out = await self._call_one(hook, _replace(attrs, obj), request)
                if out is not None:
                    obj = out
        if changed and obj is not None and attrs.subresource == "":
            obj = self._admission(obj, attrs.old_object) if attrs.operation != "DELETE" else obj
        final = _replace(attrs, obj)
        results = await asyncio.gather(*(self._call_one(h, final, request) for h in validating),
                                       return_exceptions=True)
        for r in results:
            if isinstance(r, BaseException):
                raise r
        return obj if changed else None

    async def _namespace_labels(self, hooks: Hooks, attrs: Attributes) -> dict[str | None, dict[str, str]]:
        out: dict[str | None, dict[str, str]] = {}
        for hook in hooks:
            ns = namespace_to_look_up(hook, attrs)
            if ns is None or ns in out:
                continue
            namespace = await self._inner.get("Namespace", ns)  # NotFound: the request fails with it
            labels = (namespace.get("metadata") or {}).get("labels")
            out[ns] = labels if isinstance(labels, dict) else {}
        return out

    async def _call_one(self, hook: Webhook, attrs: Attributes, request: Request) -> Obj | None:
        """One webhook: None, or the object as it patched it. Raises its denial,
        or its failure when the failurePolicy is Fail."""
        uid = str(uuid.uuid4())
        try:
            target = await self._target(hook)
            body = webhookcall.review(hook, attrs, uid, request)
            answer = webhookcall.verify(hook, uid, body, await webhookcall.call(
                self._http(), hook, target, body, webhookcall.ssl_context(hook)))
        except CallFailed as e:
            if hook.failure_policy == "Ignore":
                log.warning("Failed calling webhook, failing open %s: %s", hook.name, e)
                return None
            log.warning("Failed calling webhook, failing closed %s: %s", hook.name, e)
            raise InternalError(str(e)) from None
        _add_warnings(answer.warnings)
        if not answer.allowed:
            raise WebhookRejection(hook.name, answer.result)
        if answer.patch is None or attrs.object is None:
            return None
        return webhookcall.apply_patch(attrs.object, answer.patch)

    async def _target(self, hook: Webhook) -> Target:
        if hook.url is not None:
            return Target(hook.url, hook.url)
        svc = hook.service
        assert svc is not None  # a valid configuration has one of url and service
        url = f"https://{svc.name}.{svc.namespace}.svc:{svc.port}{svc.path}"
        shown = webhookcall.with_timeout(url, hook.timeout_seconds)
        try:
            service = await self._inner.get("Service", svc.name, svc.namespace)
        except NotFound:
            raise CallFailed(hook.name, f'failed to call webhook: Post "{shown}": service "{svc.name}" not found'
                             ) from None
        port = _local_port(service, svc.port)
        if port is None:
            raise CallFailed(hook.name, f'failed to call webhook: Post "{shown}": no service port {svc.port} found '
                                        f'for service "{svc.name}"')
        return Target(url, f"https://127.0.0.1:{port}{svc.path}", f"{svc.name}.{svc.namespace}.svc")

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64))
        return self._session


def _local_port(service: Obj, port: int) -> int | None:
    for p in (service.get("spec") or {}).get("ports") or []:
        if isinstance(p, dict) and p.get("port") == port:
            target = p.get("targetPort")
            return target if isinstance(target, int) and not isinstance(target, bool) else port
    return None


def _pins_resource_version(patch: Any, patch_type: str) -> bool:
    if patch_type == "json":
        return isinstance(patch, list) and any(
            isinstance(op, dict) and op.get("path") == "/metadata/resourceVersion" and op.get("op") != "test"
            for op in patch)
    meta = patch.get("metadata") if isinstance(patch, dict) else None
    return isinstance(meta, dict) and meta.get("resourceVersion") is not None


def _replace(attrs: Attributes, obj: Obj | None) -> Attributes:
    return Attributes(attrs.group, attrs.version, attrs.resource, attrs.subresource, attrs.operation,
                      attrs.namespace, attrs.name, attrs.kind, attrs.kind_group, attrs.kind_version, obj,
                      attrs.old_object)


def _request_info(operation: str, options: Obj | None) -> Request:
    req = _REQUEST.get()
    out = Request(options=dict(options or {}))
    if req is not None:
        manager = req.query.get("fieldManager")
        if manager and operation != "DELETE":
            out.options = {**(out.options or {}), "fieldManager": manager}
    return out


def _add_warnings(warnings: list[str]) -> None:
    req = _REQUEST.get()
    if req is not None and warnings:
        req.setdefault(WARNINGS, []).extend("299 - " + json.dumps(w, ensure_ascii=False) for w in warnings)


@web.middleware
async def _bind_request(request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
                        ) -> web.StreamResponse:
    """The request the webhook calls of this task are about (for warnings and options)."""
    token = _REQUEST.set(request)
    try:
        return await handler(request)
    finally:
        _REQUEST.reset(token)


async def _close(app: web.Application) -> None:
    client = app[CLIENT]
    if isinstance(client, AdmittingClient):
        await client.close()


def enable(app: web.Application, admission: Admission) -> AdmittingClient:
    """Call the registered webhooks on the writes ``app`` (``make_app``) serves, and
    answer dry runs with ``admission``; before the app starts."""
    client = AdmittingClient(app[CLIENT], admission)
    app[CLIENT] = client
    app[ADMISSION] = admission
    app.middlewares.append(_bind_request)
    app.on_cleanup.append(_close)
    return client


__all__ = ["AdmittingClient", "enable"]
