"""Suite-wide pytest options: `--no-skips` turns every skip into a failure, and the groups the suite's
workers share it by.

`make test` (and so `.ci/run`) passes `--no-skips`: a test skipped because a library or
system package is missing would otherwise hide a missing install step. It also runs the suite on two
workers (pytest-xdist, `--dist loadfile`): a file's tests stay together (its module fixtures are made
once), and so do all of tests/envtest's (one Kubernetes control plane, a session fixture)."""
from __future__ import annotations

import pytest
from xdist.scheduler import LoadFileScheduling

ENVTEST_IDS = "tests/envtest"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--no-skips", action="store_true", default=False,
                     help="fail every test that skips (CI: nothing may be missing)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    outcome = yield
    report = outcome.get_result()
    if not item.config.getoption("--no-skips") or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = f"skipped under --no-skips (make test): {reason}"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> LoadFileScheduling | None:
    """`--dist loadfile`, but with all of tests/envtest as one file."""
    return _LoadFiles(config, log) if config.getvalue("dist") == "loadfile" else None


class _LoadFiles(LoadFileScheduling):
    def _split_scope(self, nodeid: str) -> str:
        scope = super()._split_scope(nodeid)
        return ENVTEST_IDS if scope.startswith(ENVTEST_IDS + "/") else scope
