"""The container shim: one small supervisor process per container instance.

It outlives the control plane, so a crash or restart of the node agent kills
no container: the shim starts the container, forwards the signals it gets to
it, waits for it and records how it ended in a status file the agent reads
when it comes back (``processes.ProcessRuntime.adopt``).

Forked, in a session of its own, by the shim fork server (``shimd.py``), which
has this module imported already, on the descriptors the runtime sent it; or,
when no fork server can run, started by the runtime as ``python -I -S shim.py
LOCK_FD``. Either way the same ``main`` on the same descriptors. Standard
library only (no ``phalanx``, ``json`` or ``subprocess`` import), so that a
shim started alone starts fast and stays small.

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

Start-up cost: the container is started with ``posix_spawn`` (vfork: no copy
of the shim's memory, no Python between fork and exec) unless it must join
cgroups first, then by ``fork`` + ``execve`` (glibc's posix_spawn leaves its own
signals 32 and 33, below SIGRTMIN, ignored in the child; nothing else differs).
The executable is searched on the container's ``PATH`` here, as ``os.execvpe``
would (which imports ``warnings`` from disk in every child). Signals are
forwarded from a ``sigwaitinfo`` loop, not handlers. Only the exit record is
fsynced: the running record (pid, start) means nothing after a reboot, the
exit code does.
"""
import marshal
import os
import signal
import sys
import time

# The C functions: ``signal``'s Python wrappers of these convert to enums, which
# in a freshly forked shim copies memory pages on every call.
from _signal import SIG_DFL as _SIG_DFL  # type: ignore[import-not-found]  # noqa: PLC2701  # CPython's C module
from _signal import pthread_sigmask as _sigmask  # noqa: PLC2701  # CPython's C module: no enum wrapping
from _signal import signal as _setsig  # noqa: PLC2701  # CPython's C module: no enum wrapping

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
DEFAULTED = (signal.SIGPIPE, signal.SIGXFSZ)  # Python ignores these; a program expects the default
WAITED = FORWARDED + (signal.SIGCHLD,)
EXEC_FAILED = 127
SPAWN = hasattr(os, "posix_spawn") and hasattr(os, "POSIX_SPAWN_DUP2")  # else fork + exec


def _json(value):
    """Minimal JSON for the flat status records (``json`` is not imported: it would grow every shim)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        if '"' not in value and "\\" not in value and value.isprintable():
            return '"' + value + '"'
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


def write_status(path, record, sync=True):
    """Replace the status file atomically (write, fsync unless ``sync`` is false, rename)."""
    tmp = "%s.%d.tmp" % (path, os.getpid())
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
    try:
        os.write(fd, (_json(record) + "\n").encode())
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def start_ticks(pid):
    """The process's start time in clock ticks since boot (field 22 of
    /proc/PID/stat): with the pid, it names one process for good."""
    try:
        fd = os.open("/proc/%d/stat" % pid, os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.read(fd, 1024)  # ~300 bytes: pid, (comm), then 50 numbers
        finally:
            os.close(fd)
        return int(data[data.rindex(b")") + 2:].split(None, 20)[19])
    except (OSError, ValueError, IndexError):
        return 0


def cpu_seconds(pid):
    """User + system CPU of an exited, unreaped process and of the children it
    reaped (fields 14-17 of /proc/PID/stat), in seconds; None if unreadable."""
    try:
        fd = os.open("/proc/%d/stat" % pid, os.O_RDONLY | os.O_CLOEXEC)
        try:
            data = os.read(fd, 1024)
        finally:
            os.close(fd)
        ticks = data[data.rindex(b")") + 2:].split(None, 16)[11:15]
        return sum(int(t) for t in ticks) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def exec_candidates(file, env):
    """The paths ``os.execvpe(file, ..., env)`` tries, in order: ``file`` itself
    when it has a slash, else ``file`` in each directory of the env's ``PATH``."""
    if "/" in file:
        return [file]
    path = env.get("PATH")
    if path is None:
        path = os.defpath
    return [os.path.join(d, file) for d in path.split(os.pathsep)]


def _search(file, env, attempt):
    """``attempt(path)`` for each of ``exec_candidates`` until one does not raise
    (its result is returned), with ``os.execvpe``'s choice of error: the first
    one that is not "no such file", else the last one."""
    last = saved = None
    for full in exec_candidates(file, env):
        try:
            return attempt(full)
        except (FileNotFoundError, NotADirectoryError) as e:
            last = e
        except OSError as e:
            last = e
            if saved is None:
                saved = e
    raise saved or last


def _execvpe(argv, env):
    """``os.execvpe`` without its per-call ``import warnings``: same search, same error."""
    _search(argv[0], env, lambda full: os.execve(full, argv, env))


def _failure(step, e):
    """Why the container could not be started, as reported and recorded."""
    return {"errno": getattr(e, "errno", None) or 0, "strerror": getattr(e, "strerror", None) or str(e),
            "step": step}


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
        for sig in DEFAULTED:
            _setsig(sig, _SIG_DFL)
        _sigmask(signal.SIG_SETMASK, ())
        step = "chdir"
        os.chdir(spec["cwd"])
        step = "log"
        log_fd = os.open(spec["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        null_fd = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null_fd, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        step = "exec"
        _execvpe(spec["argv"], spec["env"])
    except BaseException as e:  # report why, in the parent's words
        try:
            os.write(err_w, marshal.dumps(_failure(step, e)))
        finally:
            os._exit(EXEC_FAILED)
    os._exit(EXEC_FAILED)  # not reached


def _fork_exec(spec):
    """Start the container by fork + exec (it may first join cgroups): ``(pid, None)``,
    or ``(None, failure)`` when it could not be started."""
    err_r, err_w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(err_r)
        _exec_child(spec, err_w)
    os.close(err_w)
    failure = _read_all(err_r)
    os.close(err_r)
    if not failure:
        return pid, None
    os.waitpid(pid, 0)
    return None, marshal.loads(failure)


def _spawn(spec):
    """Start the container by ``posix_spawn``, as ``_exec_child`` would (a session
    of its own, default SIGPIPE/SIGXFSZ, no blocked signal, the cwd, stdin from
    /dev/null, stdout and stderr to the log): ``(pid, None)`` or ``(None, failure)``.
    The shim itself changes to the cwd for the spawn (and back to /)."""
    argv, env = spec["argv"], spec["env"]
    step = "chdir"
    try:
        os.chdir(spec["cwd"])
        try:
            step = "log"
            log_fd = os.open(spec["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
            try:
                step = "exec"
                actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                           (os.POSIX_SPAWN_DUP2, log_fd, 1), (os.POSIX_SPAWN_DUP2, log_fd, 2)]

                def attempt(full):
                    try:
                        os.stat(full)  # a missing candidate costs no process (raises "no such file")
                    except (FileNotFoundError, NotADirectoryError):
                        raise
                    except OSError:
                        pass  # let the exec say why
                    return os.posix_spawn(full, argv, env, file_actions=actions, setsid=True, setsigmask=(),
                                          setsigdef=DEFAULTED), None
                return _search(argv[0], env, attempt)  # os.execvpe's search and errors
            finally:
                os.close(log_fd)
        finally:
            os.chdir("/")
    except OSError as e:
        return None, _failure(step, e)


def _read_all(fd):
    """Everything up to EOF, in reads sized to the file when it has a size
    (a 64 KiB buffer per read would cost a forked shim 16 fresh pages)."""
    try:
        size = os.fstat(fd).st_size
    except OSError:
        size = 0
    chunks = []
    while True:
        b = os.read(fd, max(size + 1, 4096))
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
    """Forward the signals we get to the container until it exits (``FORWARDED``
    and SIGCHLD are blocked: taken with ``sigwaitinfo``, no handler runs);
    leave it unreaped. Its exit code and signal."""
    while True:
        try:
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT | os.WNOHANG)
        except ChildProcessError:
            return None, None
        if info is not None:
            break
        sig = signal.sigwaitinfo(WAITED).si_signo
        if sig != signal.SIGCHLD:
            try:
                os.kill(pid, sig)
            except OSError:
                pass
    if info.si_code == os.CLD_EXITED:
        return info.si_status, None
    return 128 + info.si_status, info.si_status


def run(spec, lock_fd):
    """Start the container, supervise it, record its end. Returns the shim's exit code."""
    os.set_inheritable(lock_fd, False)  # the lock is the shim's, not the container's
    status_path = spec["status"]
    _sigmask(signal.SIG_BLOCK, WAITED)  # to forward, not to kill us; the container unblocks them
    if SPAWN and not spec.get("cgroup_procs"):
        pid, err = _spawn(spec)
    else:
        pid, err = _fork_exec(spec)
    if err is not None:
        write_status(status_path, {"startError": _json_safe(err), "argv0": spec["argv"][0],
                                   "finishedAt": time.time()})
        _report(err)
        return 1
    started = {"pid": pid, "startedAt": time.time(), "startTicks": start_ticks(pid), "shimPid": os.getpid()}
    try:
        write_status(status_path, started, sync=False)  # read by an agent of this boot only
    except OSError as e:  # unrecorded, it could outlive us unseen: stop it
        os.killpg(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        _report(_failure("status", e))
        return 1
    _report(started)
    code, sig = _wait_exit(pid)
    try:
        os.killpg(pid, signal.SIGKILL)  # the container's other processes die with it
    except OSError:
        pass
    end = dict(started)
    end.update(exitCode=137 if code is None else code, signal=sig, finishedAt=time.time())
    cpu = cpu_seconds(pid) if code is not None else None  # the leader is still unreaped: its times are readable
    if cpu is not None:
        end["cpuSeconds"] = cpu
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
