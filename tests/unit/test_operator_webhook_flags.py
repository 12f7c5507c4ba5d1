"""`phalanx operator`'s webhook flags (cli.clustermode): settings, the operator's namespace,
and the webhook server run beside the controller."""
from __future__ import annotations

import pytest

from phalanx.cli import clustermode
from phalanx.cli.clustermode import operator_namespace, webhook_settings


def test_webhook_settings_from_flags():
    s = webhook_settings(" 0.0.0.0 ", 9443, "/certs", True, "svc", "sec", namespace="ns")
    assert (s.host, s.port, s.cert_dir, s.rotate) == ("0.0.0.0", 9443, "/certs", True)
    assert s.certs is not None and (s.certs.namespace, s.certs.service_name, s.certs.secret_name) == ("ns", "svc", "sec")
    assert s.certs.dns_names[0] == "svc.ns.svc"
    off = webhook_settings("127.0.0.1", 0, "/certs", False, "svc", "sec", namespace="ns")
    assert off.rotate is False and off.certs is None
    for args, flag in ((("h", 1, "/c", True, "Bad", "sec"), "--webhook-service-name"),
                       (("h", 1, "/c", True, "svc", "a.b"), "--webhook-secret-name"),
                       (("", 1, "/c", True, "svc", "sec"), "--webhook-host")):
        with pytest.raises(ValueError) as e:
            webhook_settings(*args, namespace="ns")
        assert flag in str(e.value)


def test_operator_namespace(tmp_path, monkeypatch):
    monkeypatch.delenv("POD_NAMESPACE", raising=False)
    assert operator_namespace(str(tmp_path / "missing")) == "phalanx-system"
    (tmp_path / "ns").write_text("kubeflow\n")
    assert operator_namespace(str(tmp_path / "ns")) == "kubeflow"
    monkeypatch.setenv("POD_NAMESPACE", "mine")
    assert operator_namespace(str(tmp_path / "ns")) == "mine"
    assert clustermode.DEFAULT_OPERATOR_NAMESPACE == "phalanx-system"


