"""Where a KubeClient connects: an explicit URL and token, the in-cluster
service account, or a kubeconfig file — resolved in kubectl's order.

Returns lightkube configurations; nothing here opens a connection.
"""
from __future__ import annotations

import os
from pathlib import Path

from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.config.models import Cluster, User
from lightkube.core.exceptions import ConfigError as _LightkubeConfigError

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
DEFAULT_KUBECONFIG = Path("~/.kube/config")


class ConfigError(Exception):
    """No usable connection settings; the message says what was tried."""


def _one(config: SingleConfig | None) -> SingleConfig:
    """What ``KubeConfig.get`` answers without a default: a config, or it raised."""
    if config is None:
        raise _LightkubeConfigError("No current context set and no default provided")
    return config


def in_cluster_available(service_account_dir: Path | None = None) -> bool:
    """Running in a pod with a mounted service account token."""
    sa = service_account_dir or SERVICE_ACCOUNT_DIR
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (sa / "token").is_file()


def from_url(url: str, token: str | None = None, ca_cert: str | Path | None = None,
             namespace: str | None = None, insecure: bool = False) -> SingleConfig:
    """An explicit API server URL, bearer token and CA file."""
    if not url.startswith(("https://", "http://")):
        raise ConfigError(f"server: must be an http(s) URL, got {url!r}")
    cluster = Cluster(server=url, certificate_auth=str(ca_cert) if ca_cert else None, insecure=insecure)
    user = User(token=token) if token else None
    return _one(KubeConfig.from_one(cluster=cluster, user=user, namespace=namespace).get())


def from_service_account(service_account_dir: Path | None = None) -> SingleConfig:
    """The pod's service account (token re-read when it rotates)."""
    sa = service_account_dir or SERVICE_ACCOUNT_DIR
    try:
        return _one(KubeConfig.from_service_account(str(sa)).get())
    except (_LightkubeConfigError, KeyError, OSError) as e:
        raise ConfigError(f"no in-cluster configuration ({sa}): {e}") from None


def from_kubeconfig(path: str | Path, context: str | None = None) -> SingleConfig:
    """A kubeconfig file (its current context, or ``context``)."""
    p = Path(path).expanduser()
    try:
        return _one(KubeConfig.from_file(p).get(context))
    except _LightkubeConfigError as e:
        raise ConfigError(f"kubeconfig {p}: {e}") from None
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
        raise ConfigError(f"kubeconfig {p}: not a usable kubeconfig ({type(e).__name__}: {e})") from None


def resolve(kubeconfig: str | Path | None = None, context: str | None = None, *,
            server: str | None = None, token: str | None = None, ca_cert: str | Path | None = None,
            in_cluster: bool | None = None, fallbacks: tuple[Path, ...] = ()) -> SingleConfig:
    """kubectl's order: ``server`` (+ ``token``/``ca_cert``); ``in_cluster``
    True forces the service account; a ``kubeconfig`` path; then the service
    account when in a pod (unless ``in_cluster`` is False); ``$KUBECONFIG``
    (first file of the list); ``~/.kube/config``; then ``fallbacks`` that exist
    (e.g. ``$PHALANX_HOME/kubeconfig``)."""
    if server:
        return from_url(server, token, ca_cert)
    if in_cluster:
        return from_service_account()
    if kubeconfig:
        return from_kubeconfig(kubeconfig, context)
    if in_cluster is None and in_cluster_available():
        return from_service_account()
    env = os.environ.get("KUBECONFIG")
    tried: list[str] = []
    if env:
        first = next((p for p in env.split(os.pathsep) if p), None)
        if first:
            return from_kubeconfig(first, context)
    candidates = [DEFAULT_KUBECONFIG.expanduser(), *fallbacks]
    for candidate in candidates:
        tried.append(str(candidate))
        if candidate.is_file():
            return from_kubeconfig(candidate, context)
    raise ConfigError("no Kubernetes API configuration: give --kubeconfig PATH (or --server URL --token TOKEN), "
                      f"set $KUBECONFIG, or run in a pod with a service account; tried {', '.join(tried)}")
