"""Copy each example script into the manifests that run it.

The local runtime runs a container's command on this host with no image to
hold files, so a manifest carries its script inline: a YAML item
``- &NAME |`` is followed by the text of ``NAME.py`` from the manifest's
directory. Edit the .py file, then run

    python3 examples/ddp/embed.py            # rewrites examples/{ddp,tf-config}/*.yaml and
                                             # examples/<kind>job*.yaml from examples/<kind>/
    python3 examples/ddp/embed.py --check    # exit 1 if a manifest is stale
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[1]
DEFAULT_DIRS = ("ddp", "tf-config", "elastic")
# examples/<kind>job.yaml (and examples/<kind>job-<variant>.yaml) carry the scripts of examples/<kind>/.
KIND_EXAMPLES = ("jax", "mpi", "paddle", "xgboost")
_ANCHOR = re.compile(r"^(?P<indent> *)- &(?P<name>[a-z_][a-z0-9_]*) \|$")


def render(manifest: str, directory: Path) -> str:
    """The manifest text with every anchored block replaced by its script."""
    lines = manifest.splitlines(keepends=True)
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        out.append(line)
        i += 1
        m = _ANCHOR.match(line.rstrip("\n"))
        if not m:
            continue
        script = directory / f"{m['name']}.py"
        if not script.is_file():
            continue
        indent = " " * (len(m["indent"]) + 2)
        end = i
        while end < len(lines) and (lines[end].startswith(indent) or not lines[end].strip()):
            end += 1  # the old block: indented lines and the blank lines inside it
        while end > i and not lines[end - 1].strip():
            end -= 1  # blank lines after it are not part of it
        i = end
        text = script.read_text()
        out.extend(indent + ln if ln.strip() else "\n" for ln in text.splitlines(keepends=True))
    return "".join(out)


def manifests(dirs: tuple[str, ...] = DEFAULT_DIRS) -> list[tuple[Path, Path]]:
    """(manifest, the directory of its scripts)."""
    found = [(p, p.parent) for d in dirs for p in (EXAMPLES / d).glob("*.yaml")]
    found += [(p, EXAMPLES / k) for k in KIND_EXAMPLES
              for p in [EXAMPLES / f"{k}job.yaml", *sorted(EXAMPLES.glob(f"{k}job-*.yaml"))] if p.is_file()]
    return sorted(found)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path, scripts in manifests():
        old = path.read_text()
        new = render(old, scripts)
        if new != old:
            stale.append(path)
            if not check:
                path.write_text(new)
    for path in stale:
        print(f"{'stale' if check else 'updated'}: {path.relative_to(EXAMPLES.parent)}")
    return 1 if check and stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
