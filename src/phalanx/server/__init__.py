"""The HTTP API server: Kubernetes paths over any ``Client`` (docs/ARCHITECTURE.md, layer server)."""
from phalanx.server.app import make_app, serve

__all__ = ["make_app", "serve"]
