"""Fixtures the end-to-end tests share: ``cluster`` (an embedded cluster, the scenarios' fixture)
and ``env`` (a CLI home and environment, from the control-plane tests)."""
from tests.e2e.test_cli_controlplane import env  # noqa: F401 - fixture
from tests.scenarios.conftest import cluster  # noqa: F401 - fixture
