"""How the process runtime stops a container, as a container runtime does: SIGTERM to the
container's main process only, its other processes killed once it is gone.

Seeds 003/004: a deleted seed pod (``trap exit INT TERM; sleep 30s & wait``) ends in
``Error`` (exit 143). Signalling the whole process group kills the ``sleep`` too, and
the shell's trap then exits 0 — ``Completed`` — which is not what the notes show.
"""
from __future__ import annotations

import asyncio

import psutil
import pytest

from phalanx.node.processes import ProcessRuntime
from phalanx.objects.clock import Clock

pytestmark = pytest.mark.e2e


def _pod(command: list[str]) -> dict:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "seed", "namespace": "default", "uid": "0f0e0d0c-0000-4000-8000-000000000001"},
            "spec": {"containers": [{"name": "main", "image": "busybox", "command": command}]}}


async def _children(pid: int, n: int, timeout: float = 3.0) -> list[psutil.Process]:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        kids = psutil.Process(pid).children(recursive=True)
        if len(kids) >= n:
            return kids
        assert loop.time() < deadline, "the container's child process never appeared"
        await asyncio.sleep(0.02)


async def test_sigterm_goes_to_the_main_process_so_the_seed_shell_exits_143(tmp_path):
    rt = ProcessRuntime(tmp_path, Clock(), cgroups="off")
    pod = _pod(["sh", "-c", "trap exit INT TERM; sleep 30 & wait"])
    inst = await rt.start(pod, "main")
    child = (await _children(inst.pid, 1))[0]
    await asyncio.sleep(0.1)  # let the shell install its trap
    await rt.kill_pod(pod["metadata"]["uid"], 5)
    assert inst.termination is not None and inst.termination.exit_code == 143
    assert inst.termination.effective_reason == "Error"
    # The shell's child did not outlive it (SIGKILLed with the group once the shell exited).
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 3
    while True:
        try:
            if not child.is_running() or child.status() == psutil.STATUS_ZOMBIE:
                break
        except psutil.NoSuchProcess:
            break
        assert loop.time() < deadline, "the container's child outlived its main process"
        await asyncio.sleep(0.02)
    rt.forget(pod["metadata"]["uid"])
