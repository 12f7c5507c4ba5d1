"""The layout rules `make lint` checks that ruff, mypy and import-linter do not.

Every module opens with a docstring; no module over MAX_LINES lines unless its docstring says why
("Long because ..."); no function-level import of Phalanx outside cli/ (where one may defer a heavy
import for start-up speed, saying so in a comment on the line or in the six above it).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

MAX_LINES = 620
LONG_MARK = "Long because"
STARTUP_MARK = "start-up"


def problems(root: Path) -> list[str]:
    out: list[str] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        text = path.read_text()
        lines = text.splitlines()
        tree = ast.parse(text, str(path))
        doc = ast.get_docstring(tree) or ""
        if not doc and (path.name != "__init__.py" or text.strip()):
            out.append(f"{rel}: no module docstring saying what it owns")
        if len(lines) > MAX_LINES and LONG_MARK not in doc:
            out.append(f"{rel}: {len(lines)} lines (> {MAX_LINES}) and no '{LONG_MARK} ...' in its docstring")
        in_cli = rel.parts[:2] == ("phalanx", "cli")
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom):
                    names = [node.module or ""]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                else:
                    continue
                if not any(n == "phalanx" or n.startswith("phalanx.") for n in names):
                    continue
                near = " ".join(lines[max(0, node.lineno - 7):node.lineno])
                if in_cli and STARTUP_MARK in near:
                    continue
                out.append(f"{rel}:{node.lineno}: function-level import of {names[0]}"
                           + (f" (defer for speed only, with a '{STARTUP_MARK}' comment)" if in_cli else
                              " (import at the top; a cycle means a layer is wrong)"))
    return out


def main() -> int:
    found = problems(Path(__file__).resolve().parent.parent / "src" / "phalanx")
    for p in found:
        print(p)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
