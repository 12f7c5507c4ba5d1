"""The container shim: one small supervisor process per container instance.

It outlives the control plane, so a crash or restart of the node agent kills
no container: the shim starts the container, forwards the signals it gets to
it, waits for it and records how it ended in a status file the agent reads
when it comes back (``runtime.ProcessRuntime.adopt``).

Forked, in a session of its own, by the shim fork server (``shimd.py``), which
has this module imported already, on the descriptors the runtime sent it; or,
when no fork server can run, started by the runtime as ``python -I -S shim.py
LOCK_FD``. Either way the same ``main`` on the same descriptors. Standard
library only (no ``phalanx``, ``json`` or ``subprocess`` import): started
alone, it takes ~20 ms and ~3 MB of private memory.

Protocol with the runtime:

- stdin: the spec, a ``marshal``-ed dict: ``argv``, ``env``, ``cwd``, ``log``
  (file the container's stdout and stderr are appended to), ``status`` (path
  of the status file), ``cgroup_procs`` (``cgroup.procs`` files to join).
- ``LOCK_FD``: an open file on which the runtime holds a ``flock``; the shim
  inherits it and keeps it until it exits, so "the lock is held" means "the
  shim lives" — immune to pid reuse.
- stdout: one ``marshal``-ed report, then closed: ``{"pid", "startedAt",
  "startTicks", "shimPid"}`` once the container runs, or ``{"errno",
  "strerror", "step"}`` when it could not be started.
- the status file (JSON, replaced atomically): the same record while the
  container runs (``startTicks``: its start in clock ticks since boot, which
  with the pid names the process for good), plus ``exitCode`` (killed by
  signal N -> 128+N), ``signal`` and ``finishedAt`` once it ended; or
  ``{"startError": {...}, "argv0", "finishedAt"}``.

The container is the shim's child in a session (process group) of its own;
when it exits its remaining processes are SIGKILLed while the shim still holds
the exited leader (``waitid(WNOWAIT)``), so the group id cannot be reused in
between.
"""
import marshal
import os
import signal
import sys
import time

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
EXEC_FAILED = 127


def _json(value):
    """Minimal JSON for the flat status records (``json`` is not imported: it costs ~1 MB)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        out = ['"']
        for ch in value:
            if ch in '"\\':
                out.append("\\" + ch)
            elif ord(ch) < 0x20:
                out.append("\\u%04x" % ord(ch))
            else:
                out.append(ch)
        out.append('"')
        return "".join(out)
    if isinstance(value, dict):
        return "{" + ", ".join(_json(str(k)) + ": " + _json(v) for k, v in value.items()) + "}"
    raise TypeError("cannot encode %r" % (value,))


def write_status(path, record):
    """Replace the status file atomically (write, fsync, rename)."""
    tmp = "%s.%d.tmp" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, (_json(record) + "\n").encode())
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def start_ticks(pid):
    """The process's start time in clock ticks since boot (field 22 of
    /proc/PID/stat): with the pid, it names one process for good."""
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read()
        return int(data[data.rindex(b")") + 2:].split()[19])
    except (OSError, ValueError, IndexError):
        return 0


def _exec_child(spec, err_w):
    """In the forked child: become the container. Never returns."""
    step = "setsid"
    try:
        os.setsid()
        step = "cgroup"
        me = str(os.getpid()).encode()
        for procs in spec.get("cgroup_procs") or ():
            try:
                fd = os.open(procs, os.O_WRONLY)
                try:
                    os.write(fd, me)
                finally:
                    os.close(fd)
            except OSError:
                pass  # the runtime checks membership and falls back to its watchdog
        step = "signals"
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):  # Python ignores these; a program expects the default
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        step = "chdir"
        os.chdir(spec["cwd"])
        step = "log"
        log_fd = os.open(spec["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null_fd = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null_fd, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        step = "exec"
        argv = spec["argv"]
        os.execvpe(argv[0], argv, spec["env"])
    except BaseException as e:  # report why, in the parent's words
        try:
            os.write(err_w, marshal.dumps({"errno": getattr(e, "errno", None) or 0,
                                           "strerror": getattr(e, "strerror", None) or str(e), "step": step}))
        finally:
            os._exit(EXEC_FAILED)
    os._exit(EXEC_FAILED)  # not reached


def _read_all(fd):
    chunks = []
    while True:
        b = os.read(fd, 65536)
        if not b:
            return b"".join(chunks)
        chunks.append(b)


def _report(record):
    """Tell the runtime (stdout pipe), then let go of the pipe."""
    try:
        os.write(1, marshal.dumps(record))
    except OSError:
        pass  # the runtime is gone: the status file says it all
    null_fd = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null_fd, 1)
    os.close(null_fd)


def _wait_exit(pid):
    """Wait until the container exits, leaving it unreaped; its exit code."""
    while True:
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            return None, None
        if info is not None:
            break
    if info.si_code == os.CLD_EXITED:
        return info.si_status, None
    return 128 + info.si_status, info.si_status


def run(spec, lock_fd):
    """Start the container, supervise it, record its end. Returns the shim's exit code."""
    os.set_inheritable(lock_fd, False)  # the lock is the shim's, not the container's
    status_path = spec["status"]
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)  # none may kill us between fork and handler
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(err_r)
        _exec_child(spec, err_w)
    os.close(err_w)
    failure = _read_all(err_r)
    os.close(err_r)
    if failure:
        os.waitpid(pid, 0)
        err = marshal.loads(failure)
        write_status(status_path, {"startError": _json_safe(err), "argv0": spec["argv"][0],
                                   "finishedAt": time.time()})
        _report(err)
        return 1
    started = {"pid": pid, "startedAt": time.time(), "startTicks": start_ticks(pid), "shimPid": os.getpid()}
    try:
        write_status(status_path, started)
    except OSError as e:  # unrecorded, it could outlive us unseen: stop it
        os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        _report({"errno": e.errno or 0, "strerror": e.strerror or str(e), "step": "status"})
        return 1
    _report(started)

    def forward(signum, frame):
        try:
            os.kill(pid, signum)
        except OSError:
            pass

    for sig in FORWARDED:
        signal.signal(sig, forward)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)

    code, sig = _wait_exit(pid)
    try:
        os.killpg(pid, signal.SIGKILL)  # the container's other processes die with it
    except OSError:
        pass
    end = dict(started)
    end.update(exitCode=137 if code is None else code, signal=sig, finishedAt=time.time())
    write_status(status_path, end)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    return 0


def _json_safe(err):
    return {"errno": int(err.get("errno") or 0), "strerror": str(err.get("strerror") or ""),
            "step": str(err.get("step") or "")}


def main(argv):
    """The shim on fds 0 (spec), 1 (report), 2 (its own errors) and ``argv[1]`` (the
    locked record): as a process of its own, or forked by the fork server (``shimd``)."""
    lock_fd = int(argv[1])
    spec = marshal.loads(_read_all(0))
    null_fd = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null_fd, 0)
    os.close(null_fd)
    return run(spec, lock_fd)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
