"""Trusted writes: the control plane's own client skips admission's schema decoding, never its
validation rules, and every other client is admitted in full."""
from __future__ import annotations

import asyncio

import pytest

from phalanx.api.admission import StrictDecodingError, admit
from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.objects.errors import Invalid, NotFound
from phalanx.store import Store


def _pod(name: str, **container: object) -> dict:
    c = {"name": "main", "image": "busybox", "command": ["true"], **container}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [c]}}


def _clients() -> tuple[Store, LocalClient, LocalClient]:
    store = Store(None, FakeClock(), admission=admit)
    return store, LocalClient(store), LocalClient(store, trusted=True)


def test_untrusted_client_gets_the_schema_errors() -> None:
    store, public, _ = _clients()
    with pytest.raises(StrictDecodingError, match='unknown field "spec.containers\\[0\\].colour"'):
        asyncio.run(public.create(_pod("p", colour="red")))
    with pytest.raises(NotFound):
        store.get("Pod", "p", "default")


def test_trusted_client_skips_only_the_schema_decoding() -> None:
    store, _, internal = _clients()
    made = asyncio.run(internal.create(_pod("p")))
    assert made["spec"]["restartPolicy"] == "Always"  # defaults still applied
    assert made["spec"]["schedulerName"] == "default-scheduler"
    # The schema is not decoded again (the components never add a field: their objects come from admitted ones).
    assert "colour" in asyncio.run(internal.create(_pod("r", colour="red")))["spec"]["containers"][0]
    # A validation rule (not the schema) still refuses: a bad name, a duplicate container name.
    with pytest.raises(Invalid, match="metadata.name"):
        asyncio.run(internal.create(_pod("Bad_Name")))
    twice = _pod("q")
    twice["spec"]["containers"].append(dict(twice["spec"]["containers"][0]))
    with pytest.raises(Invalid, match="Duplicate value"):
        asyncio.run(internal.create(twice))


def test_trusted_update_keeps_validation_rules() -> None:
    store, public, internal = _clients()
    pod = asyncio.run(public.create(_pod("p")))
    pod["spec"]["containers"][0]["image"] = ""
    with pytest.raises(Invalid, match="spec.containers\\[0\\].image"):
        asyncio.run(internal.update(pod))
    assert store.get("Pod", "p", "default")["spec"]["containers"][0]["image"] == "busybox"


def test_admission_without_the_trusted_flag_is_called_as_before() -> None:
    calls: list[tuple] = []

    def admission(obj: dict, old: dict | None) -> dict:
        calls.append((obj["metadata"]["name"], old is None))
        return obj

    store = Store(None, FakeClock(), admission=admission)
    asyncio.run(LocalClient(store, trusted=True).create(_pod("p")))
    assert calls == [("p", True)]
