"""The real kubectl (1.32) against a tiny standalone HTTPS app that serves only
discovery, the OpenAPI v3 documents, and Tables from ``phalanx.server``'s
openapi / tables / tls modules: `explain` reads the generated schemas, `get`
lays out the server-side Tables, `apply` leaves strict validation to the
server, and the token travels only because TLS is on."""
from __future__ import annotations

import asyncio
import os
import re
import shutil
from datetime import datetime, timedelta, timezone

import pytest
from aiohttp import web

from phalanx.objects.clock import format_time
from phalanx.server import discovery
from phalanx.server.openapi import openapi_v3_reply
from phalanx.server.tables import TABLE_CONTENT_TYPE, negotiate_table, table_for
from phalanx.server.tls import ensure_tls, ssl_context, write_kubeconfig

KUBECTL = shutil.which("kubectl")
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(60)]

TOKEN = "e2e-kubectl-token"


def objects(now: datetime) -> dict[str, list[dict]]:
    created = format_time(now - timedelta(seconds=300))
    return {
        "pytorchjobs": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                         "metadata": {"name": "pytest", "namespace": "default", "resourceVersion": "7",
                                      "creationTimestamp": created},
                         "spec": {"pytorchReplicaSpecs": {}},
                         "status": {"conditions": [{"type": "Created", "status": "True"},
                                                   {"type": "Running", "status": "True"}]}}],
        "podgroups": [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                       "metadata": {"name": "pytest", "namespace": "default", "resourceVersion": "8",
                                    "creationTimestamp": created},
                       "spec": {"minMember": 4, "queue": "default"}, "status": {"phase": "Running", "running": 4}}],
        "queues": [{"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                    "metadata": {"name": "team-a", "resourceVersion": "9", "creationTimestamp": created,
                                 "annotations": {"phalanx.dev/deserved": '{"memory":"8Gi","cpu":"4"}',
                                                 "phalanx.dev/reclaiming": "true"}},
                    "spec": {"weight": 1, "reclaimable": True, "parent": "root"},
                    "status": {"allocated": {"cpu": "2", "memory": "4Gi"}}}],
    }


def make_app(seen: list[str]) -> web.Application:
    kinds = {"pytorchjobs": "PyTorchJob", "podgroups": "PodGroup", "queues": "Queue"}

    async def handle(request: web.Request) -> web.StreamResponse:
        seen.append(f"{request.method} {request.path_qs}")
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                      "reason": "Unauthorized", "code": 401, "message": "Unauthorized"}, status=401)
        path = request.path.rstrip("/")
        parts = path.strip("/").split("/")
        if path == "/version":
            return web.json_response(discovery.version_info())
        if path == "/api":
            return web.json_response(discovery.api_versions("127.0.0.1"))
        if path == "/apis":
            return web.json_response(discovery.api_group_list())
        if path.startswith("/openapi/v3"):
            reply = openapi_v3_reply(path[len("/openapi/v3"):], request.query.get("hash"),
                                     datetime.now(timezone.utc), request.headers.get("If-None-Match"))
            if reply is None:
                return web.Response(status=404)
            return web.Response(status=reply.status, headers=reply.headers, body=reply.body)
        if parts[0] == "api" and len(parts) == 2:
            return web.json_response(discovery.resource_list("", parts[1]))
        if parts[0] == "apis" and len(parts) == 3:
            return web.json_response(discovery.resource_list(parts[1], parts[2]))
        if request.method == "GET" and parts[-1] in kinds:
            objs = objects(datetime.now(timezone.utc))[parts[-1]]
            version = negotiate_table(request.headers.get("Accept"))
            if version:
                table = table_for(kinds[parts[-1]], objs, datetime.now(timezone.utc), version=version,
                                  list_meta={"resourceVersion": "9"})
                return web.json_response(table, content_type=TABLE_CONTENT_TYPE)
            return web.json_response({"apiVersion": objs[0]["apiVersion"], "kind": kinds[parts[-1]] + "List",
                                      "metadata": {"resourceVersion": "9"}, "items": objs})
        if request.method == "POST":
            body = await request.json()
            body.setdefault("metadata", {}).update({"uid": "u1", "resourceVersion": "10"})
            return web.json_response(body, status=201)
        return web.json_response({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "NotFound",
                                  "code": 404, "message": "not found"}, status=404)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    return app


async def kubectl(env: dict, *args: str) -> tuple[int, str]:
    if KUBECTL is None:
        pytest.fail("kubectl is not on PATH: it is part of the machine image (/usr/bin/kubectl, 1.32) and this "
                    "test needs the real one; install it rather than skipping the test", pytrace=False)
    proc = await asyncio.create_subprocess_exec(KUBECTL, *args, env=env, stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT)
    out, _ = await asyncio.wait_for(proc.communicate(), 30)
    return proc.returncode, out.decode()


async def test_kubectl_explain_get_and_apply_over_tls(tmp_path):
    files = ensure_tls(tmp_path / "tls")
    seen: list[str] = []
    runner = web.AppRunner(make_app(seen))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=ssl_context(files))
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    kubeconfig = tmp_path / "kubeconfig"
    write_kubeconfig(kubeconfig, f"https://127.0.0.1:{port}", files.ca_cert, TOKEN)
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp_path), "KUBECONFIG": str(kubeconfig)}
    cache = f"--cache-dir={tmp_path / 'cache'}"
    try:
        rc, out = await kubectl(env, cache, "explain", "pytorchjob.spec.runPolicy")
        assert rc == 0, out
        assert "KIND:       PyTorchJob" in out and "backoffLimit\t<integer>" in out
        assert "BackoffLimitExceeded" in out  # the description we publish
        assert re.search(r"cleanPodPolicy\t<string>\n\s+enum: All, Running, None", out), out

        rc, out = await kubectl(env, cache, "explain", "pods.spec.containers.command")
        assert rc == 0 and "never through a shell" in out, out
        rc, out = await kubectl(env, cache, "explain", "q.spec.dequeueStrategy")  # cluster-scoped CR
        assert rc == 0 and re.search(r"FIELD: dequeueStrategy <string>\nENUM:\n\s+fifo\n\s+traverse", out), out
        rc, out = await kubectl(env, cache, "explain", "events.involvedObject.fieldPath")  # no spec at all
        assert rc == 0 and "KIND:       Event" in out, out

        rc, out = await kubectl(env, cache, "get", "pytorchjobs")
        assert rc == 0, out
        assert re.fullmatch(r"NAME\s+STATE\s+AGE\npytest\s+Running\s+(5m|5m[0-9]s|4m5[0-9]s)\n", out), out

        rc, out = await kubectl(env, cache, "get", "pg", "-o", "wide")
        assert rc == 0, out
        assert re.match(r"NAME\s+STATUS\s+MINMEMBER\s+RUNNINGS\s+AGE\s+QUEUE\npytest\s+Running\s+4\s+4\s+\S+\s+default",
                        out), out

        rc, out = await kubectl(env, cache, "get", "q")  # the share columns are priority 1: -o wide only
        assert rc == 0 and re.fullmatch(r"NAME\s+PARENT\nteam-a\s+root\n", out), out
        rc, out = await kubectl(env, cache, "get", "q", "-o", "wide")
        assert rc == 0 and re.fullmatch(
            r"NAME\s+PARENT\s+WEIGHT\s+RECLAIMABLE\s+GUARANTEE\s+DESERVED\s+ALLOCATED\s+RECLAIMING\n"
            r"team-a\s+root\s+1\s+true\s+<none>\s+cpu=4,memory=8Gi\s+cpu=2,memory=4Gi\s+true\n", out), out

        manifest = tmp_path / "job.yaml"
        manifest.write_text("apiVersion: kubeflow.org/v1\nkind: PyTorchJob\nmetadata: {name: other}\n"
                            "spec:\n  runPolicy: {backoffLimits: 3}\n  pytorchReplicaSpecs:\n"
                            "    Master: {replicas: 1, template: {spec: {containers: [{name: pytorch, image: x}]}}}\n")
        rc, out = await kubectl(env, cache, "apply", "-f", str(manifest))
        assert rc == 0 and "pytorchjob.kubeflow.org/other created" in out, out
        # kubectl found fieldValidation on the kind's PATCH operation, so it left the
        # unknown field to the server (which refuses it) instead of validating itself.
        assert any(s.startswith("POST /apis/kubeflow.org/v1/namespaces/default/pytorchjobs?")
                   and "fieldValidation=Strict" in s for s in seen), seen
        assert not any(s.startswith("GET /openapi/v2") for s in seen), seen
    finally:
        await runner.cleanup()
