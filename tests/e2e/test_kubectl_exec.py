"""The real kubectl 1.32 `exec` (plain, -i, -it), `cp` both ways, `port-forward` and
`attach` against a control plane serving pods/exec over websockets, with pods
that are real processes on this machine.

One control plane (`phalanx serve`) serves the module; the last test reads the access log: no
request got a 5xx.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import pty
import select
import shutil
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
import yaml

from phalanx.cli.controlplane import read_endpoint

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(120)]

KUBECTL = shutil.which("kubectl")
ROOT = Path(__file__).resolve().parents[2]


class Plane:
    def __init__(self, home: Path, env: dict[str, str]) -> None:
        self.home = home
        self.env = env

    def kubectl(self, *args: str, check: bool = True, timeout: float = 30,
                input: bytes | None = None) -> subprocess.CompletedProcess:
        r = subprocess.run([KUBECTL or "kubectl", *args], env=self.env, capture_output=True, timeout=timeout,
                           input=input if input is not None else b"", cwd=self.home.parent)
        if check and r.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} -> {r.returncode}\n{r.stdout!r}\n{r.stderr!r}")
        return r

    def apply(self, doc: dict) -> None:
        self.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc).encode())

    def wait_running(self, pod: str, container: str = "main", timeout: float = 30) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.kubectl("get", "pod", pod, "-o", "json", check=False)
            if r.returncode == 0:
                obj = json.loads(r.stdout)
                for cs in obj.get("status", {}).get("containerStatuses") or []:
                    if cs["name"] == container and "running" in (cs.get("state") or {}):
                        return obj
            time.sleep(0.1)
        raise AssertionError(f"container {container} of pod {pod} is not running after {timeout}s")


def wait_for(predicate, timeout: float = 15, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def pod(name: str, containers: list[dict], labels: dict | None = None) -> dict:
    meta: dict = {"name": name, "namespace": "default"}
    if labels:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"nodeName": "las1", "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                     "containers": containers}}


SLEEPER = {"name": "main", "image": "busybox", "command": ["sleep", "600"],
           "env": [{"name": "GREETING", "value": "hi"}]}


@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    if KUBECTL is None:
        pytest.fail("kubectl is not on PATH: it is part of the machine image (/usr/bin/kubectl, 1.32)", pytrace=False)
    tmp = tmp_path_factory.mktemp("kexec")
    home = tmp / "home"
    home.mkdir()
    (home / "cluster.yaml").write_text(yaml.safe_dump({
        "nodes": [{"name": "las1", "cpu": 8, "memory": "16Gi"}], "agent": {"backoffBase": 0.2, "backoffCap": 2}}))
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(tmp), "PHALANX_HOME": str(home),
           "LANG": "C.UTF-8", "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)]),
           "KUBECONFIG": str(home / "kubeconfig")}
    log = open(tmp / "plane.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "phalanx.cli.main", "serve"], env=env, stdin=subprocess.DEVNULL, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_for(lambda: (ep := read_endpoint(home)) is not None and ep.pid == proc.pid or proc.poll() is not None,
                 timeout=30, what="the control plane")
        assert proc.poll() is None, (tmp / "plane.log").read_text()
        p = Plane(home, env)
        p.apply(pod("box", [SLEEPER, {"name": "side", "image": "busybox", "command": ["true"]}],
                    labels={"app": "box"}))
        p.wait_running("box")
        yield p
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def pod_dir(plane: Plane, name: str) -> Path:
    obj = plane.wait_running(name)
    return plane.home / "pods" / f"default_{name}_{obj['metadata']['uid']}" / "work"  # its working directory


def test_exec_runs_in_the_containers_context_and_returns_its_exit_code(plane):
    r = plane.kubectl("exec", "box", "-c", "main", "--", "sh", "-c",
                      'echo "$GREETING from $(pwd)"; echo oops >&2; exit 3', check=False)
    assert r.returncode == 3, r
    assert r.stdout.decode() == f"hi from {pod_dir(plane, 'box')}\n"
    assert r.stderr.decode() == "oops\ncommand terminated with exit code 3\n"
    assert plane.kubectl("exec", "box", "-c", "main", "--", "true").returncode == 0


def test_exec_i_pipes_stdin_to_the_end(plane):
    data = os.urandom(300_000)
    r = plane.kubectl("exec", "-i", "box", "-c", "main", "--", "sha256sum", input=data)
    assert r.stdout.decode().split()[0] == hashlib.sha256(data).hexdigest()


def test_exec_it_gets_a_terminal_its_size_and_ctrl_c(plane):
    pid, fd = pty.fork()
    if pid == 0:  # the child: kubectl on a terminal of 31 rows, 97 columns
        fcntl.ioctl(0, termios.TIOCSWINSZ, struct.pack("HHHH", 31, 97, 0, 0))
        os.execve(KUBECTL, [KUBECTL, "exec", "-it", "box", "-c", "main", "--", "sh"], plane.env)
    buf = bytearray()

    def read_until(marker: bytes, timeout: float = 20) -> str:
        deadline = time.monotonic() + timeout
        while marker not in buf:
            assert time.monotonic() < deadline, f"no {marker!r} in {bytes(buf)!r}"
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    chunk = b""
                if not chunk:
                    raise AssertionError(f"kubectl closed the terminal before {marker!r}: {bytes(buf)!r}")
                buf.extend(chunk)
        return buf.decode(errors="replace")

    try:
        os.write(fd, b"tty; stty size; echo sum=$((6*7))\r")
        out = read_until(b"sum=42\r\n")
        assert "/dev/pts/" in out and "31 97\r\n" in out, out
        os.write(fd, b"sleep 601\r")
        wait_for(lambda: _processes(["sleep", "601"]), what="sleep to run in the pod's terminal")
        os.write(fd, b"\x03")  # Ctrl-C on the terminal: SIGINT to the foreground job in the pod
        read_until(b"^C")
        os.write(fd, b"echo status=$?\r")
        read_until(b"status=130\r\n")
        os.write(fd, b"exit 5\r")
        read_until(b"command terminated with exit code 5")
        _, status = os.waitpid(pid, 0)
        pid = 0
        assert os.waitstatus_to_exitcode(status) == 5
    finally:
        if pid:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        os.close(fd)


def test_killing_kubectl_ends_the_remote_process(plane):
    marker = pod_dir(plane, "box") / "exec-victim.pid"
    proc = subprocess.Popen([KUBECTL, "exec", "box", "-c", "main", "--", "sh", "-c",
                             f"echo $$ > {marker.name}; exec sleep 600"], env=plane.env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        remote = wait_for(lambda: marker.exists() and marker.read_text().strip(), what="the remote command")
        remote_pid = int(remote)
        # The shell writes its pid, then execs: wait for the exec to land.
        wait_for(lambda: Path(f"/proc/{remote_pid}/cmdline").read_bytes().split(b"\0")[:2] == [b"sleep", b"600"],
                 what=f"process {remote_pid} to exec sleep")
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        proc.wait(10)
        wait_for(lambda: not _alive(remote_pid), what=f"process {remote_pid} to end with kubectl")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _processes(argv: list[str]) -> list[int]:
    """The pids of the processes running ``argv``."""
    out = []
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and (entry / "cmdline").read_bytes().split(b"\0")[:-1] == \
                    [a.encode() for a in argv]:
                out.append(int(entry.name))
        except OSError:
            continue
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_cp_into_the_pods_working_directory_and_back(plane, tmp_path):
    src = tmp_path / "payload.bin"
    src.write_bytes(os.urandom(1_000_000) + b"\0end")
    plane.kubectl("cp", str(src), "box:payload.bin", "-c", "main")
    assert (pod_dir(plane, "box") / "payload.bin").read_bytes() == src.read_bytes()
    back = tmp_path / "back.bin"
    plane.kubectl("cp", "box:payload.bin", str(back), "-c", "main")
    assert back.read_bytes() == src.read_bytes()


def test_exec_errors_in_the_apiservers_words(plane):
    r = plane.kubectl("exec", "nobody", "--", "true", check=False)
    assert (r.returncode, r.stderr.decode()) == (1, 'Error from server (NotFound): pods "nobody" not found\n')
    r = plane.kubectl("exec", "box", "-c", "nope", "--", "true", check=False)
    assert (r.returncode, r.stderr.decode()) == (
        1, "Error from server (BadRequest): container nope is not valid for pod box\n")
    wait_for(lambda: any("terminated" in (cs.get("state") or {}) for cs in json.loads(
        plane.kubectl("get", "pod", "box", "-o", "json").stdout)["status"]["containerStatuses"]
        if cs["name"] == "side"), what="container side to end")
    r = plane.kubectl("exec", "box", "-c", "side", "--", "true", check=False)
    assert (r.returncode, r.stderr.decode()) == (
        1, 'Error from server (BadRequest): unable to upgrade connection: container not found ("side")\n')
    r = plane.kubectl("exec", "box", "-c", "main", "--", "no-such-command", check=False)
    assert r.returncode == 127
    assert 'exec: "no-such-command": executable file not found in $PATH' in r.stderr.decode()


def test_port_forward_and_attach_say_what_to_use_instead(plane):
    plane.apply({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "box", "namespace": "default"},
                 "spec": {"selector": {"app": "box"}, "ports": [{"name": "http", "port": 8080}]}})
    svc = json.loads(plane.kubectl("get", "svc", "box", "-o", "json").stdout)
    host_port = json.loads(svc["metadata"]["annotations"]["phalanx.dev/host-ports"])["http"]
    r = plane.kubectl("port-forward", "box", "8080:8080", check=False, timeout=20)
    err = r.stderr.decode()
    assert r.returncode == 1, r
    assert "port-forward is not supported by the Phalanx local runtime" in err
    assert f"service/box port http={host_port}" in err and "phalanx exec box" in err
    r = plane.kubectl("attach", "box", "-c", "main", check=False, timeout=20)
    assert r.returncode == 1 and "attach is not supported" in r.stderr.decode(), r


def test_no_request_got_a_5xx(plane):
    lines = (plane.home / "api-access.log").read_text().splitlines()
    statuses = [(line.split('"')[1], int(line.split('"')[2].split()[0])) for line in lines]
    assert any("/exec?" in request and code == 101 for request, code in statuses), lines
    assert [(r, c) for r, c in statuses if c >= 500] == []
