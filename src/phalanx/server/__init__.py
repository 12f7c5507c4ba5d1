"""The HTTP API server: Kubernetes paths over any ``Client`` (DESIGN.md "server/")."""
from phalanx.server.app import make_app, serve

__all__ = ["make_app", "serve"]
