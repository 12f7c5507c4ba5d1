"""The ops endpoints of a long-running program: ``/metrics`` (Prometheus text of one registry),
``/healthz`` and ``/readyz`` (named checks, printed as controller-runtime's healthz handler does).

``OpsEndpoints`` serves them on up to two addresses (controller-runtime's metrics and probe
servers; Volcano's ``--listen-address`` and ``--healthz-address``). An address is ``host:port``
(``:8080`` = every interface); ``0`` or empty disables that server. Checks are plain callables:
true (or None) passes, false or an exception fails. The reason is withheld from the response
(the endpoint is unauthenticated), as controller-runtime does, and logged instead.
"""
from __future__ import annotations

import logging
from typing import Callable, Mapping

import prometheus_client
from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest

log = logging.getLogger(__name__)

# Go's client emits no ``<name>_created`` series; neither do we (a process-wide switch).
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]

Check = Callable[[], object]
# The classic text format, which generate_latest writes (legacy names, underscores escaping).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def exposition(registry: CollectorRegistry) -> web.Response:
    """The text exposition of ``registry`` as a response (version 0.0.4, as Go's promhttp)."""
    return web.Response(body=generate_latest(registry), headers={"Content-Type": CONTENT_TYPE})


def parse_bind_address(flag: str, value: str | None) -> tuple[str, int] | None:
    """``host:port``, ``:port`` (every interface) or ``[v6]:port`` -> (host, port); ``0`` or empty: None
    (disabled). ValueError names the flag and the rule."""
    v = (value or "").strip()
    if v in ("", "0"):
        return None
    host, sep, port_s = v.rpartition(":")
    if not sep or not port_s.isdigit() or not 0 <= int(port_s) <= 65535:
        raise ValueError(f'{flag}: must be "host:port", ":port" or "0" (disabled), got {value!r}')
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if any(c.isspace() for c in host) or (":" in host and not v.startswith("[")):
        raise ValueError(f'{flag}: an IPv6 host must be in brackets ("[::1]:8080"), got {value!r}')
    return host, int(port_s)


def _passes(name: str, check: Check) -> bool:
    try:
        ok = check()
    except Exception as e:  # a check that raises is a failing check, never a crash
        log.info("%s check failed: %s", name, e)
        return False
    if ok is False:
        log.info("%s check failed", name)
        return False
    return True


def _aggregate(endpoint: str, checks: Mapping[str, Check], request: web.Request) -> web.Response:
    """controller-runtime's healthz handler: ``ok`` when every check passes (without ``?verbose``),
    else one ``[+]name ok`` / ``[-]name failed: reason withheld`` line per check (sorted),
    then ``<endpoint> check passed|failed``; 500 when one fails. ``?exclude=name`` skips a check."""
    excluded = set(request.query.getall("exclude", []))
    parts: list[tuple[str, bool, bool]] = []  # (name, healthy, excluded)
    for name in sorted(checks or {"ping": lambda: True}):
        check = checks.get(name, lambda: True)
        if name in excluded:
            excluded.discard(name)
            parts.append((name, True, True))
        else:
            parts.append((name, _passes(name, check), False))
    failed = not all(ok for _, ok, _ in parts)
    headers = {"X-Content-Type-Options": "nosniff"}
    if not failed and "verbose" not in request.query:
        return web.Response(text="ok", content_type="text/plain", headers=headers)
    lines = []
    for name, ok, skipped in parts:
        lines.append(f"[+]{name} excluded: ok" if skipped else f"[+]{name} ok" if ok
                     else f"[-]{name} failed: reason withheld")
    if excluded:
        lines.append("warn: some health checks cannot be excluded: no matches for "
                     + ",".join(f'"{n}"' for n in sorted(excluded)))
    lines.append(f"{endpoint} check {'failed' if failed else 'passed'}")
    return web.Response(status=500 if failed else 200, text="\n".join(lines) + "\n", content_type="text/plain",
                        headers=headers)


def _single(checks: Mapping[str, Check], name: str) -> web.Response:
    """``/<endpoint>/<name>``: that check alone."""
    check = checks.get(name) or ({"ping": lambda: True}.get(name) if not checks else None)
    if check is None:
        return web.Response(status=404, text="404 page not found\n", content_type="text/plain")
    if _passes(name, check):
        return web.Response(text="ok", content_type="text/plain")
    return web.Response(status=500, text=f"internal server error: {name} check failed\n", content_type="text/plain")


def metrics_app(registry: CollectorRegistry) -> web.Application:
    """GET ``/metrics``: the registry's series."""
    async def handler(request: web.Request) -> web.StreamResponse:
        return exposition(registry)

    app = web.Application()
    app.router.add_get("/metrics", handler)
    return app


def health_app(healthz: Mapping[str, Check], readyz: Mapping[str, Check]) -> web.Application:
    """``/healthz`` and ``/readyz`` (and ``/healthz/<check>``, ``/readyz/<check>``)."""
    app = web.Application()
    for endpoint, checks in (("healthz", dict(healthz)), ("readyz", dict(readyz))):
        def routes(endpoint: str = endpoint, checks: Mapping[str, Check] = checks) -> None:
            async def aggregated(request: web.Request) -> web.StreamResponse:
                return _aggregate(endpoint, checks, request)

            async def single(request: web.Request) -> web.StreamResponse:
                return _single(checks, request.match_info["check"])

            app.router.add_get(f"/{endpoint}", aggregated)
            app.router.add_get(f"/{endpoint}/{{check}}", single)
        routes()
    return app


class OpsEndpoints:
    """The metrics server and the probe server of one program (either may be off)."""

    def __init__(self, registry: CollectorRegistry | None, readyz: Mapping[str, Check],
                 healthz: Mapping[str, Check] | None = None) -> None:
        self.registry = registry
        self.readyz = dict(readyz)
        self.healthz = dict(healthz or {"ping": lambda: True})
        self._runners: list[web.AppRunner] = []
        self.metrics_url: str | None = None
        self.health_url: str | None = None

    async def start(self, metrics_address: tuple[str, int] | None,
                    health_address: tuple[str, int] | None) -> list[str]:
        """Listen on both addresses (None: that server stays off). An address that cannot be
        bound (in use: two programs run by hand on one machine) leaves that server off: the
        returned list says which and why."""
        problems: list[str] = []
        if metrics_address is not None and self.registry is not None:
            try:
                self.metrics_url = await self._serve(metrics_app(self.registry), metrics_address)
            except OSError as e:
                problems.append(f"metrics on {_show(metrics_address)}: {e.strerror or e}")
        if health_address is not None:
            try:
                self.health_url = await self._serve(health_app(self.healthz, self.readyz), health_address)
            except OSError as e:
                problems.append(f"probes on {_show(health_address)}: {e.strerror or e}")
        return problems

    async def _serve(self, app: web.Application, address: tuple[str, int]) -> str:
        host, port = address
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
        await runner.setup()
        site = web.TCPSite(runner, host or None, port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runners.append(runner)
        server = getattr(site, "_server", None)
        sockets = getattr(server, "sockets", None) or []
        bound = sockets[0].getsockname()[1] if sockets else port
        return f"http://{_show((host, bound))}"

    async def stop(self) -> None:
        runners, self._runners = self._runners, []
        for runner in runners:
            await runner.cleanup()


def _show(address: tuple[str, int]) -> str:
    host, port = address
    shown = host or "0.0.0.0"
    return f"{'[' + shown + ']' if ':' in shown else shown}:{port}"
