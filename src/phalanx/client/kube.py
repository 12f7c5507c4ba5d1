"""KubeClient: the object API over any Kubernetes API server, from a kubeconfig.

The same ``Client`` the controllers use in-process, so the job controller and
the scheduler run unchanged against a cluster (or against ``phalanx up``, which
speaks the same protocol). Requests go through ``HttpClient`` (aiohttp: a
fraction of an HTTP/1.1 request's CPU that httpx spends, which is what a
scheduler binding hundreds of pods a second pays); the connection settings
come from lightkube's kubeconfig support (pinned), as kubectl reads them:

- the server's CA (file or data, or the system's; ``insecure-skip-tls-verify``)
  and a client certificate, as lightkube's TLS context holds them;
- the user's credentials through lightkube's auth for that user: a bearer
  token, a token file (the in-cluster service account's, re-read after a 401),
  an exec plugin (run again after a 401) or basic auth;
- proxy settings from the environment, except for a loopback server.

Objects stay plain JSON dicts exactly as the server sent them. Failures become
``phalanx.objects.errors`` exceptions with the server's words: NotFound,
AlreadyExists, Conflict, Invalid (with causes), Gone (410, also as a watch
ERROR event: the Informer relists), ...; an unreachable server is a 503
``ApiError``. Requests pass a token bucket (``qps``/``burst``, client-go's
knobs); watch streams do not. Lists come in pages of 500, as client-go's
informers ask, and writes carry ``fieldManager=phalanx``.
"""
from __future__ import annotations

import httpx2
from lightkube.config.client_adapter import user_auth, verify_cluster
from lightkube.config.kubeconfig import SingleConfig
from lightkube.config.models import User
from lightkube.core.exceptions import ConfigError as LightkubeConfigError

from phalanx.client.http import HttpClient
from phalanx.client.ratelimit import TokenBucket
from phalanx.objects.errors import ApiError

DEFAULT_QPS = 50.0
DEFAULT_BURST = 100
DEFAULT_TIMEOUT = 30.0
LIST_CHUNK = 500  # items per page, as client-go's informers ask


class UserCredentials:
    """The Authorization header lightkube's auth for a kubeconfig user sets
    (``httpx2.Auth`` flows, driven here without httpx sending anything)."""

    def __init__(self, auth: httpx2.Auth, server: str) -> None:
        self._auth = auth
        self._server = server or "https://kubernetes.default.svc"
        self._header: str | None = None
        self._asked = False

    async def _flow(self, unauthorized: bool) -> None:
        request = httpx2.Request("GET", self._server)
        flow = self._auth.async_auth_flow(request)
        try:
            request = await flow.__anext__()
            if unauthorized:
                try:
                    request = await flow.asend(httpx2.Response(401, request=request))
                except StopAsyncIteration:
                    pass
        except LightkubeConfigError as e:
            raise ApiError(f"credentials of the kubeconfig's user: {e}") from None
        finally:
            await flow.aclose()
        self._header = request.headers.get("Authorization")
        self._asked = True

    async def headers(self) -> dict[str, str]:
        if not self._asked:
            await self._flow(unauthorized=False)
        return {"Authorization": self._header} if self._header else {}

    async def refresh(self) -> bool:
        old = self._header
        await self._flow(unauthorized=True)
        return self._header != old  # the same credentials again would be refused again


class KubeClient(HttpClient):
    """``phalanx.client.interface.Client`` over a Kubernetes API server.

    ``config`` is a lightkube ``SingleConfig`` (see ``phalanx.client.kubeconfig``:
    kubeconfig file, in-cluster service account, or URL + token). ``qps`` and
    ``burst`` bound the request rate (``qps <= 0``: unbounded).
    """

    def __init__(self, config: SingleConfig, *, qps: float = DEFAULT_QPS, burst: int = DEFAULT_BURST,
                 timeout: float = DEFAULT_TIMEOUT, field_manager: str | None = "phalanx") -> None:
        server = config.cluster.server or ""
        loopback = any(h in server for h in ("://127.", "://localhost", "://[::1]"))
        user = config.user or User()
        auth = user_auth(user)
        super().__init__(
            server, None,
            ssl_context=verify_cluster(config.cluster, user, config.abs_file, trust_env=not loopback)
            if server.startswith("https://") else None,
            credentials=UserCredentials(auth, server) if auth is not None else None,
            limiter=TokenBucket(qps, burst), list_chunk=LIST_CHUNK, field_manager=field_manager,
            timeout=timeout, trust_env=not loopback)
        self.server = server

    async def __aenter__(self) -> "KubeClient":
        return self
