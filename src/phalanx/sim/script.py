"""What a container's command would do, without running it: how long, which exit code.

The seed manifests and the scenario tests write their containers as small
``sh -c`` scripts: ``trap exit INT TERM``, ``sleep 30s & wait``, ``exit 1``,
``if [ "${RANK}" = "1" ]; then ... else ... fi``, ``a && b``. ``evaluate``
interprets exactly that subset (sleep adds time, exit ends, tests compare the
container's environment), so a seed file runs in the simulation as written.
Anything else (``python train.py``) cannot be predicted: the fallback is the
last ``sleep <duration>`` in the command, else an instant clean exit.

``wait_for`` recognises the PyTorch workers' init containers, which wait until
the master's name resolves (``nslookup`` loop, or ``phalanx.node.initwait``).
"""
from __future__ import annotations

import math
import re
import shlex
from dataclasses import dataclass
from typing import Mapping

from phalanx.sim.units import DurationError, parse_duration


@dataclass(frozen=True)
class Outcome:
    """One run of a container: it lasts ``duration`` seconds (inf: until killed)
    and exits with ``exit_code``."""

    duration: float
    exit_code: int = 0


@dataclass(frozen=True)
class WaitFor:
    """A run that ends (exit 0) at the first poll after ``host`` resolves, or
    exits 1 after ``timeout`` seconds."""

    host: str
    interval: float
    timeout: float


class _Unknown(Exception):
    """A construct outside the subset: fall back to the sleep heuristic."""


_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")
_SLEEP = re.compile(r"\bsleep\s+([0-9][0-9.]*[a-z]*|infinity)\b")
_NOOPS = {"echo", "env", "printenv", "true", ":", "cat", "date", "hostname", "pwd", "ls", "set", "export",
          "cd", "printf", "sync", "id", "whoami", "uname", "nvidia-smi"}


def _sh_script(argv: list[str]) -> str | None:
    """The script of ``sh -c SCRIPT`` / ``bash -c SCRIPT``, else None."""
    if len(argv) >= 3 and argv[0].rsplit("/", 1)[-1] in ("sh", "bash", "ash", "dash") and argv[1] in ("-c", "-ec", "-xc"):
        return argv[2]
    return None


def command_of(container: Mapping) -> list[str]:
    cmd = [str(x) for x in (container.get("command") or []) if isinstance(x, (str, int, float))]
    args = [str(x) for x in (container.get("args") or []) if isinstance(x, (str, int, float))]
    return cmd + args


def wait_for(container: Mapping) -> WaitFor | None:
    """The init container's wait for a host, when its command is one."""
    argv = command_of(container)
    text = " ".join(argv)
    for i, a in enumerate(argv):
        if a.endswith("phalanx.node.initwait") and i + 1 < len(argv):
            rest = argv[i + 1:]
            host = next((x for x in rest if not x.startswith("-")), None)
            interval, timeout = 0.05, 200.0
            for flag, val in zip(rest, rest[1:]):
                try:
                    if flag == "--interval":
                        interval = float(val)
                    elif flag == "--timeout":
                        timeout = float(val)
                except ValueError:
                    pass
            return WaitFor(host, max(interval, 0.001), max(timeout, 0.0)) if host else None
    m = re.search(r"nslookup\s+([A-Za-z0-9.-]+)", text)
    if m:
        tries = re.search(r"seq\s+(\d+)", text)
        n = int(tries.group(1)) if tries else 100
        sleep = re.search(r"sleep\s+(\d+(?:\.\d+)?)", text)
        interval = float(sleep.group(1)) if sleep else 2.0
        return WaitFor(m.group(1), max(interval, 0.001), n * interval)
    return None


def evaluate(container: Mapping, env: Mapping[str, str]) -> Outcome:
    """What one run of ``container`` does with environment ``env``."""
    argv = command_of(container)
    if not argv:
        return Outcome(0.0, 0)
    script = _sh_script(argv)
    try:
        if script is None:
            return _run_argv(argv)
        return _Interpreter(env).run(script)
    except _Unknown:
        return Outcome(_last_sleep(" ".join(argv)), 0)


def _last_sleep(text: str) -> float:
    found = _SLEEP.findall(text)
    for raw in reversed(found):
        try:
            return _sleep_seconds(raw)
        except _Unknown:
            continue
    return 0.0


def _sleep_seconds(raw: str) -> float:
    if raw == "infinity":
        return math.inf
    try:
        return parse_duration(raw if not raw.replace(".", "", 1).isdigit() else raw + "s")
    except DurationError:
        raise _Unknown(raw) from None


def _run_argv(argv: list[str]) -> Outcome:
    prog = argv[0].rsplit("/", 1)[-1]
    if prog == "sleep" and len(argv) >= 2:
        return Outcome(sum(_sleep_seconds(a) for a in argv[1:]), 0)
    if prog in _NOOPS:
        return Outcome(0.0, 0)
    if prog == "false":
        return Outcome(0.0, 1)
    raise _Unknown(prog)


class _Exit(Exception):
    def __init__(self, code: int) -> None:
        self.code = code


class _Interpreter:
    """The sh subset of the seeds. Time only passes in ``sleep`` (also as
    ``sleep N & wait``: a background job and the wait for it)."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        self.time = 0.0
        self.status = 0
        self.background = 0.0  # the longest running background job

    def run(self, script: str) -> Outcome:
        tokens = self._tokens(script)
        try:
            pos = self._block(tokens, 0, ())
            if pos != len(tokens):
                raise _Unknown(tokens[pos])
        except _Exit as e:
            return Outcome(self.time, e.code)
        return Outcome(self.time, self.status)

    def _tokens(self, script: str) -> list[str]:
        script = _VAR.sub(lambda m: self.env.get(m.group(1) or m.group(2), ""), script)
        lex = shlex.shlex(script.replace("\n", " ; "), posix=True, punctuation_chars=";&|")
        lex.whitespace_split = True
        try:
            return list(lex)
        except ValueError as e:
            raise _Unknown(str(e)) from None

    def _block(self, toks: list[str], pos: int, stop: tuple[str, ...], execute: bool = True) -> int:
        """Statements until one of ``stop`` (a keyword at a statement start)."""
        while pos < len(toks):
            if toks[pos] in (";",):
                pos += 1
                continue
            if toks[pos] in stop:
                return pos
            pos = self._and_or(toks, pos, execute)
        return pos

    def _and_or(self, toks: list[str], pos: int, execute: bool) -> int:
        pos = self._statement(toks, pos, execute)
        while pos < len(toks) and toks[pos] in ("&&", "||", "&"):
            op = toks[pos]
            pos += 1
            if op == "&":
                return pos  # background: recorded by _statement
            run = execute and ((op == "&&" and self.status == 0) or (op == "||" and self.status != 0))
            pos = self._statement(toks, pos, run)
        return pos

    def _statement(self, toks: list[str], pos: int, execute: bool) -> int:
        if toks[pos] == "if":
            return self._if(toks, pos + 1, execute)
        end = pos
        while end < len(toks) and toks[end] not in (";", "&&", "||", "&"):
            end += 1
        words = toks[pos:end]
        background = end < len(toks) and toks[end] == "&"
        if execute:
            self._simple(words, background)
        return end

    def _if(self, toks: list[str], pos: int, execute: bool) -> int:
        # if COND; then BODY [elif COND; then BODY]* [else BODY] fi
        taken = False
        cond_pos = pos
        while True:
            before = self.status
            pos = self._block(toks, cond_pos, ("then",), execute and not taken)
            if pos >= len(toks):
                raise _Unknown("if without then")
            cond_ok = execute and not taken and self.status == 0
            if not (execute and not taken):
                self.status = before
            pos = self._block(toks, pos + 1, ("elif", "else", "fi"), cond_ok)
            taken = taken or cond_ok
            if pos >= len(toks):
                raise _Unknown("if without fi")
            kw = toks[pos]
            if kw == "elif":
                cond_pos = pos + 1
                continue
            if kw == "else":
                pos = self._block(toks, pos + 1, ("fi",), execute and not taken)
                if pos >= len(toks):
                    raise _Unknown("if without fi")
            return pos + 1

    def _simple(self, words: list[str], background: bool) -> None:
        if not words:
            return
        prog = words[0].rsplit("/", 1)[-1]
        if prog == "trap":
            self.status = 0
        elif prog == "sleep":
            if len(words) < 2:
                raise _Unknown("sleep")
            d = sum(_sleep_seconds(w) for w in words[1:])
            if background:
                self.background = max(self.background, d)
            else:
                self.time += d
            self.status = 0
        elif prog == "wait":
            self.time += self.background
            self.background = 0.0
            self.status = 0
        elif prog == "exit":
            code = self.status
            if len(words) > 1:
                try:
                    code = int(words[1]) & 0xFF
                except ValueError:
                    raise _Unknown("exit " + words[1]) from None
            raise _Exit(code)
        elif prog in ("[", "test"):
            self.status = 0 if self._test(words[1:-1] if prog == "[" else words[1:]) else 1
        elif prog == "false":
            self.status = 1
        elif prog in _NOOPS:
            self.status = 0
        else:
            raise _Unknown(prog)

    @staticmethod
    def _test(args: list[str]) -> bool:
        neg = False
        if args and args[0] == "!":
            neg, args = True, args[1:]
        if len(args) == 3:
            a, op, b = args
            if op in ("=", "=="):
                r = a == b
            elif op == "!=":
                r = a != b
            elif op in ("-eq", "-ne", "-lt", "-le", "-gt", "-ge"):
                try:
                    x, y = int(a), int(b)
                except ValueError:
                    raise _Unknown("test " + op) from None
                r = {"-eq": x == y, "-ne": x != y, "-lt": x < y, "-le": x <= y, "-gt": x > y, "-ge": x >= y}[op]
            else:
                raise _Unknown("test " + op)
        elif len(args) == 2 and args[0] in ("-n", "-z"):
            r = bool(args[1]) if args[0] == "-n" else not args[1]
        elif len(args) == 1:
            r = bool(args[0])
        else:
            raise _Unknown("test")
        return r != neg
