"""tools/lint_layout.py: the layout rules `make lint` checks beside ruff, mypy and import-linter."""
from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("lint_layout", Path(__file__).parents[2] / "tools" / "lint_layout.py")
assert _spec and _spec.loader
lint_layout = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lint_layout)


def tree(tmp_path: Path, files: dict[str, str]) -> Path:
    root = tmp_path / "phalanx"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_a_clean_tree_has_no_problems(tmp_path):
    root = tree(tmp_path, {"__init__.py": "", "store/__init__.py": '"""The store."""\n',
                           "store/a.py": '"""Owns a."""\nfrom phalanx.objects import meta\n\n\ndef f():\n    return meta\n',
                           "cli/b.py": '"""Owns b."""\n\n\ndef g():\n    # deferred for start-up speed\n'
                                       '    from phalanx.server import app\n    return app\n'})
    assert lint_layout.problems(root) == []


def test_missing_docstring_long_file_and_lazy_import_are_each_reported(tmp_path):
    body = "x = 1\n" * (lint_layout.MAX_LINES + 1)
    root = tree(tmp_path, {"store/a.py": "import os\n",
                           "store/long.py": '"""Owns long."""\n' + body,
                           "store/ok_long.py": '"""Owns ok_long.\n\nLong because it is generated."""\n' + body,
                           "node/c.py": '"""Owns c."""\n\n\nasync def h():\n    from phalanx.controller import gc\n'
                                        '    return gc\n',
                           "cli/d.py": '"""Owns d."""\n\n\ndef g():\n    from phalanx.server import app\n    return app\n'})
    found = lint_layout.problems(root)
    assert any(p.startswith("phalanx/store/a.py: no module docstring") for p in found)
    assert any(p.startswith("phalanx/store/long.py:") and "lines" in p for p in found)
    assert not any("ok_long" in p for p in found)
    assert any(p.startswith("phalanx/node/c.py:5: function-level import of phalanx.controller") for p in found)
    assert any(p.startswith("phalanx/cli/d.py:5:") and "start-up" in p for p in found)
    assert len(found) == 4
