"""Suite-wide pytest options: `--no-skips` turns every skip into a failure.

`make test` (and so `.ci/run`) passes it: a test skipped because a library or
system package is missing would otherwise hide a missing install step."""
from __future__ import annotations

import pytest


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
