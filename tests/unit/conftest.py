"""Fixtures several unit-test modules share: ``store_client`` (a Store behind a LocalClient, fake clock)."""
from tests.unit.test_job_controller import store_client  # noqa: F401 - fixture
