"""`phalanx serve` for the exec e2e tests, with the cluster's exec provider handed to
the API app (the one-argument wiring that cli/controlplane.py's make_app call lacks).

Run as ``python tests/e2e/exec_plane.py`` with PHALANX_HOME set; SIGTERM stops it.
"""
from __future__ import annotations

import asyncio
import sys
from typing import Any

import phalanx.cluster
import phalanx.server.app
from phalanx.cli.controlplane import home, serve_forever

_clusters: list[phalanx.cluster.EmbeddedCluster] = []
_init = phalanx.cluster.EmbeddedCluster.__init__
_make_app = phalanx.server.app.make_app


def _recording_init(self: phalanx.cluster.EmbeddedCluster, *args: Any, **kwargs: Any) -> None:
    _init(self, *args, **kwargs)
    _clusters.append(self)


def _make_app_with_exec(*args: Any, **kwargs: Any) -> Any:
    kwargs.setdefault("exec_provider", _clusters[-1].exec_provider)
    return _make_app(*args, **kwargs)


def main() -> int:
    phalanx.cluster.EmbeddedCluster.__init__ = _recording_init  # type: ignore[method-assign]
    phalanx.server.app.make_app = _make_app_with_exec
    asyncio.run(serve_forever(home()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
