"""Container logs on disk: where they live, reading, following.

Layout (like the kubelet's /var/log/pods): one file per container instance,
``<state>/pods/<ns>_<pod>_<uid>/<container>/<restartCount>.log``, holding the
instance's stdout and stderr. Logs stay on disk after the pod is deleted.
"""
from __future__ import annotations

import asyncio
import codecs
import inspect
from pathlib import Path
from typing import Any, AsyncIterator, Awaitable, Callable

from ..api.errors import BadRequest, NotFound
from .names import check_dns_label, check_dns_subdomain, check_uid

_NAME_MAX = 255
_CHUNK = 64 * 1024


def pod_dir_name(namespace: str, name: str, uid: str) -> str:
    check_dns_label(namespace, "metadata.namespace")
    check_dns_subdomain(name, "metadata.name")
    check_uid(uid)
    room = _NAME_MAX - len(namespace) - len(uid) - 2
    return f"{namespace}_{name[:room]}_{uid}"


def pod_dir(state_dir: Path, namespace: str, name: str, uid: str) -> Path:
    """The pod's directory: its containers' logs and its working directory."""
    return Path(state_dir) / "pods" / pod_dir_name(namespace, name, uid)


def container_dir(state_dir: Path, namespace: str, name: str, uid: str, container: str) -> Path:
    check_dns_label(container, "container name")
    return pod_dir(state_dir, namespace, name, uid) / container


def container_log_path(state_dir: Path, namespace: str, name: str, uid: str, container: str,
                       restart_count: int) -> Path:
    return container_dir(state_dir, namespace, name, uid, container) / f"{int(restart_count)}.log"


def instance_logs(cdir: Path) -> list[Path]:
    """The instance log files of a container directory, oldest first."""
    try:
        files = [p for p in cdir.iterdir() if p.suffix == ".log" and p.stem.isdigit()]
    except OSError:
        return []
    return sorted(files, key=lambda p: int(p.stem))


def find_logs(state_dir: Path, namespace: str, name: str, container: str,
              uid: str | None = None) -> tuple[Path | None, Path | None]:
    """(current, previous) log files of a container. Without ``uid`` the most
    recently used pod directory of that name is taken."""
    check_dns_label(container, "container name")
    if uid is not None:
        cdir = container_dir(state_dir, namespace, name, uid, container)
    else:
        check_dns_label(namespace, "metadata.namespace")
        check_dns_subdomain(name, "metadata.name")
        base = Path(state_dir) / "pods"
        prefix = f"{namespace}_{name}_"
        try:
            candidates = [p / container for p in base.iterdir()
                          if p.name.startswith(prefix) and "_" not in p.name[len(prefix):]]
        except OSError:
            candidates = []
        candidates = [c for c in candidates if c.is_dir()]
        if not candidates:
            return None, None
        cdir = max(candidates, key=lambda c: c.stat().st_mtime)
    files = instance_logs(cdir)
    current = files[-1] if files else None
    previous = files[-2] if len(files) > 1 else None
    return current, previous


def read_log(path: Path, tail: int | None = None, limit_bytes: int | None = None) -> str:
    """The log as text (invalid UTF-8 replaced); ``tail`` keeps the last lines."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return ""
    if tail is not None:
        data = _tail_bytes(data, tail)
    if limit_bytes is not None and limit_bytes >= 0:
        data = data[:limit_bytes]
    return data.decode("utf-8", errors="replace")


def _tail_bytes(data: bytes, lines: int) -> bytes:
    if lines <= 0:
        return b""
    body = data[:-1] if data.endswith(b"\n") else data
    idx = len(body)
    for _ in range(lines):
        idx = body.rfind(b"\n", 0, idx)
        if idx < 0:
            return data
    return data[idx + 1:]


DoneCheck = Callable[[], "bool | Awaitable[bool]"]


async def follow(path: Path, *, is_done: DoneCheck | None = None, tail: int | None = None,
                 poll_interval: float = 0.2) -> AsyncIterator[str]:
    """Yield the log's text as it grows (like ``tail -f``) until ``is_done()``
    says the writer has finished; then yield what is left and stop."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    path = Path(path)
    while not path.exists():
        if is_done is not None and await _call(is_done):
            return
        await asyncio.sleep(poll_interval)
    with path.open("rb") as f:
        if tail is not None:
            start = f.read()
            chunk = _tail_bytes(start, tail)
            if chunk:
                yield decoder.decode(chunk)
        while True:
            data = f.read(_CHUNK)
            if data:
                text = decoder.decode(data)
                if text:
                    yield text
                continue
            if is_done is not None and await _call(is_done):
                rest = f.read()
                text = decoder.decode(rest, final=True)
                if text:
                    yield text
                return
            await asyncio.sleep(poll_interval)


async def _call(fn: DoneCheck) -> bool:
    r = fn()
    if inspect.isawaitable(r):
        r = await r
    return bool(r)


class LogProvider:
    """``pods/log`` for the API server and the CLI, read from the state directory.

    Errors are the apiserver's/kubelet's: NotFound for a missing pod,
    BadRequest for an ambiguous or unknown container, a container that has not
    started, or a missing previous instance. An unscheduled pod has no logs ("").
    """

    def __init__(self, state_dir: Path, client: Any, poll_interval: float = 0.2) -> None:
        self.state_dir = Path(state_dir)
        self.client = client
        self.poll_interval = poll_interval

    async def read(self, namespace: str, name: str, container: str | None = None, *,
                   previous: bool = False, tail_lines: int | None = None,
                   limit_bytes: int | None = None) -> str:
        pod = await self.client.get("Pod", name, namespace)
        path = self._path(pod, container, previous)
        if path is None:
            return ""
        return read_log(path, tail=tail_lines, limit_bytes=limit_bytes)

    async def follow(self, namespace: str, name: str, container: str | None = None, *,
                     tail_lines: int | None = None) -> AsyncIterator[str]:
        """Stream the current instance's log until the container stops running."""
        pod = await self.client.get("Pod", name, namespace)
        path = self._path(pod, container, False)
        if path is None:
            return
        cname = self._container(pod, container)
        uid = pod["metadata"].get("uid", "")

        async def done() -> bool:
            try:
                fresh = await self.client.get("Pod", name, namespace)
            except NotFound:
                return True
            if fresh["metadata"].get("uid") != uid:
                return True
            files = instance_logs(path.parent)
            if files and files[-1] != path:
                return True
            st = _find_status(fresh, cname)
            return st is None or "running" not in (st.get("state") or {})

        async for chunk in follow(path, is_done=done, tail=tail_lines, poll_interval=self.poll_interval):
            yield chunk

    # ------------------------------------------------------------------ helpers

    def _container(self, pod: dict, container: str | None) -> str:
        spec = pod.get("spec") or {}
        names = [c.get("name", "") for c in spec.get("containers") or []]
        inits = [c.get("name", "") for c in spec.get("initContainers") or []]
        pname = pod["metadata"]["name"]
        if not container:
            if len(names) == 1:
                return names[0]
            default = ((pod.get("metadata") or {}).get("annotations") or {}).get(
                "kubectl.kubernetes.io/default-container")
            if default in names:
                return default
            if not names:
                raise BadRequest(f"no containers in pod {pname}")
            msg = f"a container name must be specified for pod {pname}, choose one of: [{' '.join(names)}]"
            if inits:
                msg += f" or one of the init containers: [{' '.join(inits)}]"
            raise BadRequest(msg)
        if container not in names and container not in inits:
            raise BadRequest(f"container {container} is not valid for pod {pname}")
        return container

    def _path(self, pod: dict, container: str | None, previous: bool) -> Path | None:
        cname = self._container(pod, container)
        meta = pod["metadata"]
        if not (pod.get("spec") or {}).get("nodeName"):
            return None
        try:
            current, prev = find_logs(self.state_dir, meta.get("namespace", ""), meta["name"], cname,
                                      uid=meta.get("uid"))
        except ValueError as e:
            raise BadRequest(str(e)) from None
        if previous:
            if prev is None:
                raise BadRequest(f'previous terminated container "{cname}" in pod "{meta["name"]}" not found')
            return prev
        if current is None:
            st = _find_status(pod, cname) or {}
            reason = ((st.get("state") or {}).get("waiting") or {}).get("reason") or "ContainerCreating"
            raise BadRequest(f'container "{cname}" in pod "{meta["name"]}" is waiting to start: {reason}')
        return current


def _find_status(pod: dict, container: str) -> dict | None:
    status = pod.get("status") or {}
    for key in ("containerStatuses", "initContainerStatuses"):
        for st in status.get(key) or []:
            if isinstance(st, dict) and st.get("name") == container:
                return st
    return None
