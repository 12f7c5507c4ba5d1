"""``pods/{name}/exec`` over the websocket remote-command protocol kubectl 1.32 speaks,
and the answers for ``attach`` and ``portforward``, which the local runtime does not serve.

Protocol (``v5.channel.k8s.io``, also ``v4.channel.k8s.io``): binary messages
whose first byte is the channel: 0 stdin, 1 stdout, 2 stderr, 3 error (one
``metav1.Status`` JSON when the command ends: Success, or Failure with reason
``NonZeroExitCode`` and a cause ``ExitCode`` holding the exit status), 4
resize (``{"Width": w, "Height": h}``, with a tty). ``[255, ch]`` closes a
channel: from the client, ``[255, 0]`` is the end of stdin. The server ends
the stream with a normal websocket close after the error message.

The command runs through the exec provider the wiring injects (on the local
runtime: ``phalanx exec``'s own argv, so it gets the container's environment,
working directory and resolver, and dies with the container); it is exec'd as
argv. A stream cut by the client (kubectl killed) kills the command's process group.
"""
from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Protocol, Sequence

from aiohttp import WSMsgType, web

from phalanx.api.constants import ANNOTATION_HOST_PORTS
from phalanx.client.interface import Client
from phalanx.objects.errors import BadRequest
from phalanx.objects.meta import match_labels
from phalanx.server import execprocess
from phalanx.server.status import dumps, failure

log = logging.getLogger(__name__)

PROTOCOLS = ("v5.channel.k8s.io", "v4.channel.k8s.io")
STDIN, STDOUT, STDERR, ERROR, RESIZE = 0, 1, 2, 3, 4
CLOSE = 255
DRAIN_AFTER_EXIT = 2.0  # seconds to collect output still buffered once the command has exited
MAX_MESSAGE = 1024 * 1024


class ExecProvider(Protocol):
    """Where a pod's command runs: what the wiring injects (``make_app(exec_provider=)``)."""

    def command(self, namespace: str, pod: str, container: str, argv: Sequence[str]) -> list[str]:
        """The argv that runs ``argv`` in the running container; an ``ApiError``
        (e.g. BadRequest) when the container does not run here now."""
        ...


# --------------------------------------------------------------------------- request checks


def _flag(request: web.Request, name: str, default: bool = False) -> bool:
    """A boolean query parameter as the apiserver's parameter codec reads it."""
    values = request.query.getall(name, [])
    if not values:
        return default
    value = values[0]
    if value in ("true", "True", "TRUE", "1", "t", "T"):
        return True
    if value in ("false", "False", "FALSE", "0", "f", "F", ""):
        return False
    raise BadRequest(f'{name}: Invalid value: "{value}": strconv.ParseBool: parsing "{value}": invalid syntax')


def pick_container(pod: dict[str, Any], name: str | None) -> str:
    """The container a request names, checked against the pod spec as the apiserver does."""
    spec = pod.get("spec") or {}
    pod_name = (pod.get("metadata") or {}).get("name", "")
    regular = [c.get("name") for c in spec.get("containers") or [] if isinstance(c, dict)]
    others = [c.get("name") for key in ("initContainers", "ephemeralContainers")
              for c in spec.get(key) or [] if isinstance(c, dict)]
    if name:
        if name not in regular and name not in others:
            raise BadRequest(f"container {name} is not valid for pod {pod_name}")
        return name
    if len(regular) == 1:
        return str(regular[0])
    raise BadRequest(f"a container name must be specified for pod {pod_name}, choose one of: "
                     f"[{' '.join(str(n) for n in regular)}]")


def exec_options(request: web.Request) -> tuple[list[str], bool, bool, bool, bool]:
    """(command, stdin, stdout, stderr, tty) from the query, validated as PodExecOptions."""
    command = request.query.getall("command", [])
    stdin, stdout = _flag(request, "stdin"), _flag(request, "stdout", True)
    stderr, tty = _flag(request, "stderr", True), _flag(request, "tty")
    if not command:
        raise BadRequest("you must specify at least one command for the container")
    if not (stdin or stdout or stderr):
        raise BadRequest("you must specify at least 1 of stdin, stdout, stderr")
    if tty and stderr:
        stderr = False  # with a tty, stderr is the terminal too (kubectl never asks for both)
    return command, stdin, stdout, stderr, tty


def _upgrade_problem(request: web.Request) -> str | None:
    if request.headers.get("Upgrade", "").lower() != "websocket":
        return ("Upgrade request required: Phalanx serves exec over websockets "
                f"({', '.join(PROTOCOLS)}), not SPDY")
    offered = [p.strip() for h in request.headers.getall("Sec-WebSocket-Protocol", []) for p in h.split(",")]
    if not any(p in PROTOCOLS for p in offered):
        return f"requested protocol(s) are not supported: {offered}; supports {list(PROTOCOLS)}"
    return None


# --------------------------------------------------------------------------- handlers


async def exec_handler(request: web.Request, client: Client, provider: ExecProvider | None,
                       namespace: str, name: str) -> web.StreamResponse:
    """``GET|POST .../pods/{name}/exec``: checks in the apiserver's order, then the stream."""
    command, stdin, stdout, stderr, tty = exec_options(request)
    pod = await client.get("Pod", name, namespace)  # 404 in the apiserver's words
    container = pick_container(pod, request.query.get("container"))
    if not (pod.get("spec") or {}).get("nodeName"):
        raise BadRequest(f"pod {name} does not have a host assigned")
    if provider is None:
        raise BadRequest("exec is not served by this API server: no node runtime is attached to it")
    argv = await asyncio.to_thread(provider.command, namespace, name, container, command)
    problem = _upgrade_problem(request)
    if problem is not None:
        return failure(400, "BadRequest", problem)
    ws = web.WebSocketResponse(protocols=PROTOCOLS, autoping=True, max_msg_size=MAX_MESSAGE)
    await ws.prepare(request)
    try:
        proc = execprocess.spawn(argv, stdin=stdin, stdout=stdout, stderr=stderr, tty=tty)
    except OSError as e:
        log.warning("exec in %s/%s: cannot start %s: %s", namespace, name, argv[0], e)
        await ws.send_bytes(bytes([ERROR]) + dumps({"metadata": {}, "status": "Failure", "reason": "InternalError",
                                                    "message": f"unable to start the command: {e.strerror or e}"
                                                    }).encode())
        await ws.close()
        return ws
    try:
        await _stream(ws, proc, command)
    finally:
        proc.close()
        if not ws.closed:
            await ws.close()
    return ws


async def attach_handler(request: web.Request, client: Client, namespace: str, name: str) -> web.StreamResponse:
    pod = await client.get("Pod", name, namespace)
    container = pick_container(pod, request.query.get("container"))
    raise BadRequest(f"attach is not supported by the Phalanx local runtime: read container {container}'s "
                     f"output with `kubectl logs -f {name} -c {container}`, run a command in it with "
                     f"`kubectl exec {name} -c {container} -- COMMAND` (or `phalanx exec {name} -- COMMAND`)")


async def portforward_handler(request: web.Request, client: Client, namespace: str, name: str) -> web.StreamResponse:
    pod = await client.get("Pod", name, namespace)
    ports = await host_ports(client, pod)
    where = ("; its Services' ports are these host ports on 127.0.0.1: " + ", ".join(ports)) if ports else ""
    raise BadRequest(f"port-forward is not supported by the Phalanx local runtime: a pod's processes run on "
                     f"this machine and listen on its ports directly{where}; run a command in the pod with "
                     f"`phalanx exec {name} -- COMMAND`")


async def host_ports(client: Client, pod: dict[str, Any]) -> list[str]:
    """``service/port=hostport`` for each Service selecting the pod, from its
    ``phalanx.dev/host-ports`` annotation."""
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    services = await client.list("Service", meta.get("namespace") or "default")
    out: list[str] = []
    for svc in services.items:
        selector = (svc.get("spec") or {}).get("selector") or {}
        if not isinstance(selector, dict) or not selector or not match_labels(selector, labels):
            continue
        raw = ((svc.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_HOST_PORTS)
        try:
            ports = json.loads(raw) if raw else {}
        except ValueError:
            continue
        if isinstance(ports, dict):
            out.extend(f"service/{svc['metadata']['name']} port {p}={h}" for p, h in sorted(ports.items()))
    return out


# --------------------------------------------------------------------------- the stream


def exit_status(code: int, command: Sequence[str]) -> dict[str, Any]:
    """The error channel's message for a command that exited with ``code``."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {"metadata": {}, "status": "Failure",
            "message": f"command terminated with non-zero exit code: error executing command "
                       f"[{' '.join(command)}], exit code {code}",
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}}


async def _stream(ws: web.WebSocketResponse, proc: execprocess.ExecProcess, command: Sequence[str]) -> None:
    # The first (empty) message on the lowest output channel tells the client the stream is up.
    await ws.send_bytes(bytes([STDOUT if proc.stdout is not None else STDERR if proc.stderr is not None
                               else ERROR]))
    outputs = [asyncio.create_task(_pump(ws, fd, channel))
               for fd, channel in ((proc.stdout, STDOUT), (proc.stderr, STDERR)) if fd is not None]
    inbound = asyncio.create_task(_receive(ws, proc))
    exited = asyncio.create_task(proc.wait())
    try:
        await asyncio.wait({inbound, exited}, return_when=asyncio.FIRST_COMPLETED)
        if not exited.done():  # the client went away first: the command goes too
            proc.kill()
            return
        if outputs:
            await asyncio.wait(outputs, timeout=DRAIN_AFTER_EXIT)
        for t in outputs:
            if t.done() and not t.cancelled() and t.exception() is not None:
                return  # the client cannot take output any more
        await ws.send_bytes(bytes([ERROR]) + dumps(exit_status(exited.result(), command)).encode())
        await ws.close()
    finally:
        for task in (*outputs, inbound, exited):
            task.cancel()
        await asyncio.gather(*outputs, inbound, exited, return_exceptions=True)


async def _pump(ws: web.WebSocketResponse, fd: int, channel: int) -> None:
    prefix = bytes([channel])
    while True:
        data = await execprocess.read_chunk(fd)
        if not data:
            return
        await ws.send_bytes(prefix + data)


async def _receive(ws: web.WebSocketResponse, proc: execprocess.ExecProcess) -> None:
    """Client messages until the client closes: stdin data, its end, resizes."""
    resize = b""
    async for msg in ws:
        if msg.type != WSMsgType.BINARY or not msg.data:
            continue
        channel, data = msg.data[0], msg.data[1:]
        if channel == STDIN and proc.stdin is not None:
            try:
                await execprocess.write_all(proc.stdin, data)
            except OSError:  # the command stopped reading: what it did not take is dropped
                proc.close_stdin()
        elif channel == CLOSE and data[:1] == bytes([STDIN]):
            proc.close_stdin()
        elif channel == RESIZE:
            resize = _apply_resizes(proc, resize + data)


def _apply_resizes(proc: execprocess.ExecProcess, buffered: bytes) -> bytes:
    """Apply each complete ``{"Width":..,"Height":..}`` in ``buffered``; return the rest."""
    decoder = json.JSONDecoder()
    text = buffered.decode("utf-8", "replace")
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            return b""
        try:
            size, end = decoder.raw_decode(text, pos)
        except ValueError:
            return text[pos:].encode()[-4096:]  # incomplete (or garbage, bounded)
        pos = end
        if isinstance(size, dict):
            w, h = size.get("Width"), size.get("Height")
            if isinstance(w, int) and isinstance(h, int):
                try:
                    proc.resize(w, h)
                except OSError:
                    pass
