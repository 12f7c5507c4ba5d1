"""pods/{name}/exec over the websocket remote-command protocol (channels, the error
channel's Status, stdin's close, a pty and its resizes, a cut stream) against
the real app, with a provider that runs the command directly; attach and
portforward answers; the pure helpers."""
from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from types import SimpleNamespace
from typing import Sequence

import aiohttp
import pytest

from phalanx.api.admission import admit
from phalanx.api.constants import ANNOTATION_HOST_PORTS
from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.objects.errors import BadRequest
from phalanx.server import execprocess, remotecommand
from phalanx.server.app import make_app, serve
from phalanx.store.store import Store

pytestmark = pytest.mark.timeout(30)

TOKEN = "s3cret-token"
PODS = "/api/v1/namespaces/default/pods"
V5 = "v5.channel.k8s.io"


class DirectProvider:
    """Runs the command as given; container ``stopped`` does not run."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def command(self, namespace: str, pod: str, container: str, argv: Sequence[str]) -> list[str]:
        self.calls.append((namespace, pod, container, list(argv)))
        if container == "stopped":
            raise BadRequest(f'unable to upgrade connection: container not found ("{container}")')
        return list(argv)


def pod(name: str, containers: Sequence[str] = ("main",), node: str | None = "n1",
        labels: dict | None = None) -> dict:
    spec: dict = {"containers": [{"name": c, "image": "busybox", "command": ["sleep", "1"]} for c in containers]}
    if node:
        spec["nodeName"] = node
    meta: dict = {"name": name, "namespace": "default"}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


@pytest.fixture
async def api():
    store = Store(None, FakeClock(), admission=admit)
    local = LocalClient(store)
    provider = DirectProvider()
    runner, url = await serve(make_app(local, TOKEN, exec_provider=provider))
    session = aiohttp.ClientSession(headers={"Authorization": f"Bearer {TOKEN}"})
    await local.create(pod("p"))
    try:
        yield SimpleNamespace(url=url, local=local, provider=provider, session=session)
    finally:
        await session.close()
        await runner.cleanup()
        store.close()


def exec_url(api, pod_name: str, command: Sequence[str], **flags: str) -> str:
    query = [("command", c) for c in command] + list(flags.items())
    return api.url + f"{PODS}/{pod_name}/exec?" + "&".join(f"{k}={aiohttp.helpers.quote(v, safe='')}"
                                                          for k, v in query)


async def run_exec(api, command: Sequence[str], stdin: bytes | None = None, protocol: str = V5,
                   **flags: str) -> tuple[dict[int, bytes], dict, str]:
    """(bytes per channel, the error channel's Status, the negotiated protocol)."""
    flags.setdefault("stdout", "true")
    flags.setdefault("stderr", "true")
    if stdin is not None:
        flags["stdin"] = "true"
    out: dict[int, bytes] = {}
    async with api.session.ws_connect(exec_url(api, "p", command, **flags), protocols=(protocol,)) as ws:
        if stdin is not None:
            await ws.send_bytes(b"\x00" + stdin)
            await ws.send_bytes(bytes([255, 0]))
        async for msg in ws:
            assert msg.type == aiohttp.WSMsgType.BINARY
            out[msg.data[0]] = out.get(msg.data[0], b"") + msg.data[1:]
        negotiated = ws.protocol
        assert ws.close_code == 1000
    return out, json.loads(out.get(3, b"{}")), negotiated


async def test_stdout_stderr_and_a_nonzero_exit_code_on_the_error_channel(api):
    code = "import sys; print('out'); print('err', file=sys.stderr); sys.exit(3)"
    out, status, proto = await run_exec(api, [sys.executable, "-c", code], container="main")
    assert proto == V5
    assert out[1] == b"out\n" and out[2] == b"err\n"
    assert status["status"] == "Failure" and status["reason"] == "NonZeroExitCode"
    assert status["details"]["causes"] == [{"reason": "ExitCode", "message": "3"}]
    assert api.provider.calls == [("default", "p", "main", [sys.executable, "-c", code])]


async def test_success_status_and_v4_is_accepted(api):
    out, status, proto = await run_exec(api, ["true"], protocol="v4.channel.k8s.io")
    assert proto == "v4.channel.k8s.io"
    assert status == {"metadata": {}, "status": "Success"}


async def test_stdin_is_piped_and_closed_by_the_close_message(api):
    data = os.urandom(200_000)
    out, status, _ = await run_exec(api, ["cat"], stdin=data)
    assert out[1] == data
    assert status["status"] == "Success"


async def test_a_tty_is_the_controlling_terminal_and_resizes_apply(api, tmp_path):
    url = exec_url(api, "p", ["sh", "-c", "read line; tty; stty size; echo $line"],
                   stdin="true", stdout="true", tty="true")
    got = b""
    async with api.session.ws_connect(url, protocols=(V5,)) as ws:
        await ws.send_bytes(b"\x04" + json.dumps({"Width": 100, "Height": 3}).encode())
        await ws.send_bytes(b'\x04{"Width": 123, "He')  # one size across two messages
        await ws.send_bytes(b'\x04ight": 45}\n')  # messages are taken in order: sizes before the line
        await ws.send_bytes(b"\x00hello\r")
        async for msg in ws:
            assert msg.data[0] in (1, 3), msg.data
            if msg.data[0] == 1:
                got += msg.data[1:]
            else:
                assert json.loads(msg.data[1:])["status"] == "Success"
    lines = got.decode().splitlines()
    assert lines[-3].startswith("/dev/pts/") and lines[-2] == "45 123" and lines[-1] == "hello", lines


async def test_a_cut_stream_kills_the_command_and_what_it_started(api, tmp_path):
    pids = tmp_path / "pids"
    script = f"sleep 300 & echo $$ $! > {pids}; wait"
    ws = await api.session.ws_connect(exec_url(api, "p", ["sh", "-c", script], stdout="true"),
                                      protocols=(V5,))
    deadline = time.monotonic() + 10
    while not (pids.exists() and pids.read_text().endswith("\n")):
        assert time.monotonic() < deadline, "the command did not start"
        await asyncio.sleep(0.05)
    shell, child = (int(p) for p in pids.read_text().split())
    await ws.close()
    for pid in (shell, child):
        while _alive(pid):
            assert time.monotonic() < deadline, f"process {pid} outlived its stream"
            await asyncio.sleep(0.05)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


async def status_of(api, path: str, method: str = "GET", headers: dict | None = None) -> tuple[int, dict]:
    async with api.session.request(method, api.url + path, headers=headers) as resp:
        return resp.status, await resp.json()


WS_HEADERS = {"Connection": "Upgrade", "Upgrade": "websocket", "Sec-WebSocket-Version": "13",
              "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Protocol": V5}


@pytest.mark.parametrize("path, code, message", [
    ("/nope/exec?command=true&stdout=true", 404, 'pods "nope" not found'),
    ("/p/exec?command=true&container=side", 400, "container side is not valid for pod p"),
    ("/p/exec?command=true&container=main&stdout=maybe", 400,
     'stdout: Invalid value: "maybe": strconv.ParseBool: parsing "maybe": invalid syntax'),
    ("/p/exec?stdout=true", 400, "you must specify at least one command for the container"),
    ("/p/exec?command=true&stdout=false&stderr=false", 400, "you must specify at least 1 of stdin, stdout, stderr"),
])
async def test_bad_requests_get_the_apiservers_status(api, path, code, message):
    status, body = await status_of(api, PODS + path, headers=WS_HEADERS)
    assert (status, body["code"], body["message"]) == (code, code, message)
    assert body["kind"] == "Status" and body["status"] == "Failure"


async def test_pod_without_host_stopped_container_and_no_upgrade(api):
    await api.local.create(pod("unbound", node=None))
    await api.local.create(pod("two", ["main", "stopped"]))
    cases = [(f"{PODS}/unbound/exec?command=true", WS_HEADERS, "pod unbound does not have a host assigned"),
             (f"{PODS}/two/exec?command=true", WS_HEADERS,
              "a container name must be specified for pod two, choose one of: [main stopped]"),
             (f"{PODS}/two/exec?command=true&container=stopped", WS_HEADERS,
              'unable to upgrade connection: container not found ("stopped")'),
             (f"{PODS}/p/exec?command=true", {}, "Upgrade request required"),
             (f"{PODS}/p/exec?command=true", {**WS_HEADERS, "Sec-WebSocket-Protocol": "v9.channel.k8s.io"},
              "requested protocol(s) are not supported")]
    for path, headers, message in cases:
        status, body = await status_of(api, path, headers=headers)
        assert status == 400 and body["message"].startswith(message), (path, body)


async def test_exec_needs_the_token(api):
    async with aiohttp.ClientSession() as anonymous:
        async with anonymous.get(exec_url(api, "p", ["true"], stdout="true"), headers=WS_HEADERS) as resp:
            assert resp.status == 403  # system:anonymous may not get pods/exec
        async with anonymous.get(exec_url(api, "p", ["true"], stdout="true"),
                                 headers={**WS_HEADERS, "Authorization": "Bearer wrong"}) as resp:
            assert resp.status == 401
    assert api.provider.calls == []


async def test_attach_and_portforward_answer_400_naming_what_to_use(api):
    await api.local.create(pod("w", labels={"app": "w"}))
    # No network plugin here: the annotation it would add is written by the test.
    svc = {"apiVersion": "v1", "kind": "Service",
           "metadata": {"name": "w", "namespace": "default",
                        "annotations": {ANNOTATION_HOST_PORTS: json.dumps({"http": 30123})}},
           "spec": {"selector": {"app": "w"}, "ports": [{"name": "http", "port": 80}]}}
    await api.local.create(svc)
    status, body = await status_of(api, f"{PODS}/w/attach?container=main&stdout=true", "POST")
    assert status == 400 and "attach is not supported" in body["message"] and "kubectl logs -f w" in body["message"]
    status, body = await status_of(api, f"{PODS}/w/portforward?ports=80", "POST")
    assert status == 400 and "port-forward is not supported" in body["message"]
    assert "phalanx exec w" in body["message"]
    assert "service/w port http=30123" in body["message"]
    status, body = await status_of(api, f"{PODS}/gone/portforward?ports=80", "POST")
    assert status == 404


async def test_host_ports_come_from_the_selecting_services_annotation():
    class Client:
        async def list(self, kind, namespace):
            assert (kind, namespace) == ("Service", "ns")
            annotated = {ANNOTATION_HOST_PORTS: json.dumps({"http": 30080, "grpc": 30081})}
            return SimpleNamespace(items=[
                {"metadata": {"name": "mine", "annotations": annotated}, "spec": {"selector": {"app": "a"}}},
                {"metadata": {"name": "other", "annotations": annotated}, "spec": {"selector": {"app": "b"}}},
                {"metadata": {"name": "headless"}, "spec": {}}])

    ports = await remotecommand.host_ports(Client(), {"metadata": {"namespace": "ns", "labels": {"app": "a"}}})
    assert ports == ["service/mine port grpc=30081", "service/mine port http=30080"]


def test_exit_status_messages():
    assert remotecommand.exit_status(0, ["x"]) == {"metadata": {}, "status": "Success"}
    failed = remotecommand.exit_status(130, ["sh", "-c", "exit 130"])
    assert failed["message"] == ("command terminated with non-zero exit code: error executing command "
                                 "[sh -c exit 130], exit code 130")
    assert failed["details"]["causes"] == [{"reason": "ExitCode", "message": "130"}]


def test_pick_container():
    p = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "a"}], "initContainers": [{"name": "i"}]}}
    assert remotecommand.pick_container(p, None) == "a"
    assert remotecommand.pick_container(p, "i") == "i"
    with pytest.raises(BadRequest, match="container b is not valid for pod p"):
        remotecommand.pick_container(p, "b")


async def test_a_command_killed_by_a_signal_exits_128_plus_n_and_unasked_streams_are_devnull():
    proc = execprocess.spawn(["sh", "-c", "cat; kill -TERM $$"], stdin=False, stdout=True, stderr=False, tty=False)
    try:
        assert (proc.stdin, proc.stderr) == (None, None)
        assert await asyncio.wait_for(proc.wait(), 10) == 128 + 15
        assert await execprocess.read_chunk(proc.stdout) == b""  # cat read /dev/null: nothing to pass on
    finally:
        proc.close()
