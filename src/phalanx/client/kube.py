"""KubeClient: the object API over any Kubernetes API server, on lightkube.

The same ``Client`` the controllers use in-process, so the job controller and
the scheduler run unchanged against a cluster (or against ``phalanx up``, which
speaks the same protocol). Built on lightkube's ``AsyncClient`` (pinned):

- Every registry kind is a lightkube *generic* resource, so objects stay plain
  JSON dicts exactly as the server sent them (no typed-model round trip that
  could drop or reorder fields); ``pods/binding`` is a generic subresource.
- ``list`` and ``delete`` go through lightkube's generic request layer, which
  takes raw selector strings (set-based selectors included) and a
  ``DeleteOptions`` body (preconditions); everything else is the public API.
- Failures become ``phalanx.objects.errors`` exceptions with the server's words:
  NotFound, AlreadyExists, Conflict, Invalid (with causes), Gone (410, also as
  a watch ERROR event: the Informer relists), ...; an unreachable server is a
  503 ``ApiError``.
- Requests pass a token bucket (``qps``/``burst``, client-go's knobs); watch
  streams do not.
"""
from __future__ import annotations

import json
from typing import Any, AsyncGenerator, AsyncIterator, cast

import httpx2
import msgspec
from lightkube import AsyncClient
from lightkube.config.kubeconfig import SingleConfig
from lightkube.core import resource as lkres
from lightkube.core.exceptions import ApiError as LightkubeApiError
from lightkube.core.generic_client import ALL_NS, GenericAsyncClient
from lightkube.generic_resource import (
    Generic,
    GenericGlobalResource,
    GenericGlobalStatus,
    GenericNamespacedResource,
    GenericNamespacedStatus,
)
from lightkube.types import PatchType

from phalanx.api.registry import ResourceType
from phalanx.client.http import error_from_status
from phalanx.client.interface import Obj, ObjectList
from phalanx.client.ratelimit import TokenBucket
from phalanx.client.wire import label_selector as selector_query
from phalanx.client.wire import object_identity, resource_type
from phalanx.objects.errors import ApiError, BadRequest
from phalanx.objects.watch import WatchEvent

DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
DEFAULT_TIMEOUT = 30.0
LIST_CHUNK = 500  # items per page, as client-go's informers ask

_PATCH_TYPES = {"merge": PatchType.MERGE, "json": PatchType.JSON, "strategic": PatchType.STRATEGIC}
_VERBS = ["delete", "deletecollection", "get", "global_list", "global_watch", "list", "patch", "post", "put", "watch"]


# ---------------------------------------------------------------- resource classes


def _api_info(rt: ResourceType) -> lkres.ApiInfo:
    return lkres.ApiInfo(resource=lkres.ResourceDef(rt.group, rt.version, rt.kind), plural=rt.plural,
                         verbs=list(_VERBS))


def _classes(rt: ResourceType) -> tuple[type, type]:
    """(main, status) generic classes for a kind, kept out of lightkube's global
    registry so they never clash with other users of the library."""
    info = _api_info(rt)
    main_base, status_base = ((GenericNamespacedResource, GenericNamespacedStatus) if rt.namespaced
                              else (GenericGlobalResource, GenericGlobalStatus))
    status_info = lkres.ApiInfo(resource=info.resource, parent=info.resource, plural=rt.plural,
                                verbs=["get", "patch", "put"], action="status")
    status = type(f"{rt.kind}Status", (status_base,), {"_api_info": status_info})
    main = type(rt.kind, (main_base,), {"_api_info": info, "Status": status})
    return main, status


# The bases of lightkube's own generic subresources (GenericNamespacedStatus), whose
# typed attributes mypy sees clash.
class PodBinding(lkres.NamespacedSubResource, Generic):  # type: ignore[misc]
    """``POST pods/{name}/binding`` with a v1 Binding; the answer (a Status) stays a dict."""

    _api_info = lkres.ApiInfo(resource=lkres.ResourceDef("", "v1", "Binding"),
                              parent=lkres.ResourceDef("", "v1", "Pod"), plural="pods", verbs=["post"],
                              action="binding")


_CLASSES: dict[str, tuple[type, type]] = {}


def resource_classes(kind: str) -> tuple[ResourceType, type, type]:
    """(resource type, main class, status class) of a registry kind; BadRequest if unknown."""
    rt = resource_type(kind)
    if kind not in _CLASSES:
        _CLASSES[kind] = _classes(rt)
    main, status = _CLASSES[kind]
    return rt, main, status


# ---------------------------------------------------------------- errors


def _unavailable(e: Exception) -> ApiError:
    err = ApiError(f"the server is not reachable: {type(e).__name__}: {e}")
    err.code = 503
    err.reason = "ServiceUnavailable"
    return err


def translate(e: BaseException) -> ApiError:
    """The ``phalanx.objects.errors`` exception a lightkube/httpx failure stands for."""
    if isinstance(e, ApiError):
        return e
    if isinstance(e, LightkubeApiError):
        status = e.status
        body: Any = None
        if e.response is not None:
            try:
                body = e.response.json()
            except (ValueError, httpx2.ResponseNotRead):
                body = None
        if not isinstance(body, dict) and status is not None:
            body = msgspec.to_builtins(status)
        code = getattr(status, "code", None) or (e.response.status_code if e.response is not None else 500)
        return error_from_status(body, int(code))
    if isinstance(e, httpx2.HTTPStatusError):
        code = e.response.status_code
        try:
            body = json.loads(e.response.content)
        except (ValueError, httpx2.ResponseNotRead):
            body = None
        return error_from_status(body if isinstance(body, dict) else {}, code)
    if isinstance(e, (httpx2.HTTPError, OSError)):
        return _unavailable(e)
    if isinstance(e, msgspec.DecodeError):
        return ApiError(f"the server sent a response that is not JSON: {e}")
    return ApiError(f"{type(e).__name__}: {e}")


_FAILURES = (LightkubeApiError, httpx2.HTTPError, OSError, msgspec.DecodeError)


def _plain(obj: Any) -> Obj:
    """A generic resource as a plain dict (lightkube may hold metadata as a model)."""
    if isinstance(obj, Generic):
        return obj.to_dict()
    return dict(obj) if isinstance(obj, dict) else {}


# ---------------------------------------------------------------- client


class KubeClient:
    """``phalanx.client.interface.Client`` over a Kubernetes API server.

    ``config`` is a lightkube ``SingleConfig`` (see ``phalanx.client.kubeconfig``:
    kubeconfig file, in-cluster service account, or URL + token). ``qps`` and
    ``burst`` bound the request rate (``qps <= 0``: unbounded).
    """

    def __init__(self, config: SingleConfig, *, qps: float = DEFAULT_QPS, burst: int = DEFAULT_BURST,
                 timeout: float = DEFAULT_TIMEOUT, field_manager: str | None = "phalanx") -> None:
        server = config.cluster.server or ""
        loopback = any(h in server for h in ("://127.", "://localhost", "://[::1]"))
        # Proxy settings from the environment never apply to a loopback server.
        self._lk = AsyncClient(config, timeout=httpx2.Timeout(timeout), field_manager=field_manager,
                               trust_env=not loopback)
        # lightkube's generic request layer, over the same connection: its public API takes no raw
        # selector strings and no DeleteOptions body (preconditions), which list and delete need.
        self._generic: GenericAsyncClient = self._lk._client  # noqa: SLF001
        self.server = server
        self.limiter = TokenBucket(qps, burst)

    # ------------------------------------------------------------------ plumbing

    async def close(self) -> None:
        await self._lk.close()

    async def __aenter__(self) -> "KubeClient":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.close()

    @staticmethod
    def _namespace(rt: ResourceType, namespace: str | None, what: str) -> str | None:
        if not rt.namespaced:
            return None
        if not namespace:
            resource = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
            raise BadRequest(f"a namespace is required to {what} {resource}")
        return namespace

    @staticmethod
    def _identity(obj: Obj, need_name: bool) -> tuple[ResourceType, type, type, str | None]:
        rt, ns, _ = object_identity(obj, need_name)
        _, main, status = resource_classes(rt.kind)
        return rt, main, status, ns

    @staticmethod
    def _with_namespace(obj: Obj, rt: ResourceType, ns: str | None) -> Obj:
        out = dict(obj)
        if rt.namespaced:
            out["metadata"] = {**(obj.get("metadata") or {}), "namespace": ns}
        return out

    # ------------------------------------------------------------------ Client

    async def get(self, kind: str, name: str, namespace: str | None = None) -> Obj:
        rt, main, _ = resource_classes(kind)
        ns = self._namespace(rt, namespace, "get")
        await self.limiter.acquire()
        try:
            return _plain(await self._lk.get(main, name, namespace=ns) if ns else await self._lk.get(main, name))
        except _FAILURES as e:
            raise translate(e) from None

    async def list(
        self,
        kind: str,
        namespace: str | None = None,
        label_selector: str | dict[str, str] | None = None,
        field_selector: str | None = None,
    ) -> ObjectList:
        rt, main, _ = resource_classes(kind)
        ns = (namespace or ALL_NS) if rt.namespaced else None
        params = {"limit": LIST_CHUNK, "labelSelector": selector_query(label_selector),
                  "fieldSelector": field_selector or None}
        items: list[Obj] = []
        rv = ""
        try:
            br = self._generic.prepare_request("list", res=main, namespace=ns, params=params)
            chunks = self._generic.list_chunks(br)
            while True:
                await self.limiter.acquire()
                try:
                    chunk_rv, chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    break
                rv = rv or (chunk_rv or "")
                items.extend(_plain(o) for o in chunk)
        except _FAILURES as e:
            raise translate(e) from None
        for item in items:  # a real apiserver leaves kind/apiVersion out of built-in list items
            item.setdefault("kind", rt.kind)
            item.setdefault("apiVersion", rt.api_version)
        return ObjectList(items, rv)

    async def create(self, obj: Obj) -> Obj:
        rt, main, _, ns = self._identity(obj, need_name=False)
        await self.limiter.acquire()
        try:
            return _plain(await self._lk.create(main(self._with_namespace(obj, rt, ns))))
        except _FAILURES as e:
            raise translate(e) from None

    async def update(self, obj: Obj) -> Obj:
        rt, main, _, ns = self._identity(obj, need_name=True)
        await self.limiter.acquire()
        try:
            return _plain(await self._lk.replace(main(self._with_namespace(obj, rt, ns))))
        except _FAILURES as e:
            raise translate(e) from None

    async def update_status(self, obj: Obj) -> Obj:
        """PUT ``/status``; for kinds without a status subresource (PodGroup,
        Event) the whole object, as their CRDs/types only allow."""
        rt, main, status, ns = self._identity(obj, need_name=True)
        cls = status if rt.has_status else main
        await self.limiter.acquire()
        try:
            return _plain(await self._lk.replace(cls(self._with_namespace(obj, rt, ns))))
        except _FAILURES as e:
            raise translate(e) from None

    async def patch(
        self, kind: str, name: str, namespace: str | None, patch: Any,
        patch_type: str = "merge", subresource: str | None = None,
    ) -> Obj:
        rt, main, status = resource_classes(kind)
        ns = self._namespace(rt, namespace, "patch")
        ptype = _PATCH_TYPES.get(patch_type)
        if ptype is None:
            raise BadRequest(f'unsupported patch type "{patch_type}" (supported: "merge", "json", "strategic")')
        if subresource not in (None, "status"):
            raise BadRequest(f'unsupported subresource "{subresource}" (supported: "status")')
        cls = status if subresource == "status" else main  # the server answers 404 where there is none
        await self.limiter.acquire()
        try:
            if ns:
                out = await self._lk.patch(cls, name, patch, namespace=ns, patch_type=ptype)
            else:
                out = await self._lk.patch(cls, name, patch, patch_type=ptype)
            return _plain(out)
        except _FAILURES as e:
            raise translate(e) from None

    async def delete(
        self, kind: str, name: str, namespace: str | None = None,
        grace_period_seconds: int | None = None,
        preconditions_uid: str | None = None,
        propagation_policy: str | None = None,
    ) -> Obj | None:
        """DELETE with a ``DeleteOptions`` body; returns the object when the
        server keeps it (graceful or foreground deletion), else None."""
        rt, main, _ = resource_classes(kind)
        ns = self._namespace(rt, namespace, "delete")
        options: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1",
                                   "propagationPolicy": propagation_policy or "Background"}
        if grace_period_seconds is not None:
            options["gracePeriodSeconds"] = grace_period_seconds
        if preconditions_uid is not None:
            options["preconditions"] = {"uid": preconditions_uid}
        await self.limiter.acquire()
        try:
            br = self._generic.prepare_request("delete", res=main, name=name, namespace=ns)
            br.data = options
            resp = await self._generic.send(self._generic.build_adapter_request(br))
            self._generic.raise_for_status(resp)
            body = json.loads(resp.content) if resp.content else None
        except _FAILURES as e:
            raise translate(e) from None
        except ValueError:
            return None
        if not isinstance(body, dict) or body.get("kind") == "Status":
            return None
        return body

    async def bind(self, namespace: str, name: str, node_name: str) -> None:
        binding = PodBinding.from_dict({"apiVersion": "v1", "kind": "Binding",
                                        "metadata": {"name": name, "namespace": namespace},
                                        "target": {"apiVersion": "v1", "kind": "Node", "name": node_name}})
        await self.limiter.acquire()
        try:
            await self._lk.create(binding, name, namespace=namespace)
        except _FAILURES as e:
            raise translate(e) from None

    async def watch(
        self, kind: str, namespace: str | None = None, resource_version: str | None = None,
    ) -> AsyncIterator[WatchEvent]:
        """Events after ``resource_version`` (every current object as ADDED
        first without one); lightkube re-opens a stream the server ended, from
        the last resourceVersion seen. Raises Gone when that is too old."""
        rt, main, _ = resource_classes(kind)
        kwargs: dict[str, Any] = {"resource_version": resource_version or None}
        if rt.namespaced:
            kwargs["namespace"] = namespace or ALL_NS
        # Typed as an AsyncIterable; it is an async generator (GenericAsyncClient.watch).
        stream = cast("AsyncGenerator[tuple[str, Any], None]", self._lk.watch(main, **kwargs))
        try:
            async for type_, obj in stream:
                yield WatchEvent(type_, _plain(obj))
        except _FAILURES as e:
            raise translate(e) from None
        finally:
            await stream.aclose()
