"""Group commit: many concurrent writes share one transaction (one fsync); a writer
is answered and watchers see an event only once the write is on disk."""
from __future__ import annotations

import asyncio
import sqlite3

import pytest

from phalanx.api.admission import admit
from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock
from phalanx.objects.errors import ApiError
from phalanx.store.sqlite import SqliteBackend
from phalanx.store.store import Store


def queue(name: str) -> dict:
    return {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": name},
            "spec": {"weight": 1}}


def make(tmp_path, **kw) -> Store:
    return Store(tmp_path / "state.db", FakeClock(), admission=admit, group_commit=True, **kw)


def stored_names(tmp_path) -> set[str]:
    db = sqlite3.connect(str(tmp_path / "state.db"))
    try:
        return {r[0] for r in db.execute("SELECT name FROM objects WHERE kind = 'Queue'")}
    finally:
        db.close()


async def test_concurrent_writes_share_transactions_and_are_durable_when_answered(tmp_path, monkeypatch):
    batches: list[int] = []
    real = SqliteBackend.write_batch

    def spy(self, ops):
        batches.append(len(ops))
        return real(self, ops)

    monkeypatch.setattr(SqliteBackend, "write_batch", spy)
    store = make(tmp_path)
    c = LocalClient(store)
    await asyncio.gather(*(c.create(queue(f"q{i}")) for i in range(50)))
    # Every create was answered: every queue is on disk, read by another connection.
    assert stored_names(tmp_path) == {f"q{i}" for i in range(50)}
    assert sum(batches) == 50 and len(batches) < 50, batches
    store.close()


async def test_watch_events_wait_for_the_commit(tmp_path):
    store = make(tmp_path)
    w = store.watch("Queue", None, store.current_rv())
    store.create(queue("a"))  # staged: in memory at once, not yet on disk
    assert store.get("Queue", "a")["metadata"]["name"] == "a"
    assert w.pending() == 0 and stored_names(tmp_path) == set()
    await store.flush()
    assert w.pending() == 1 and stored_names(tmp_path) == {"a"}
    store.close()


async def test_a_watch_started_after_a_staged_write_does_not_get_it_again(tmp_path):
    store = make(tmp_path)
    before = store.current_rv()
    store.create(queue("a"))
    listed = store.watch("Queue")  # synthetic ADDED from memory already carries "a"
    since_now = store.watch("Queue", None, store.current_rv())
    since_before = store.watch("Queue", None, before)
    assert listed.pending() == 1
    await store.flush()
    assert (listed.pending(), since_now.pending(), since_before.pending()) == (1, 0, 1)
    store.close()


async def test_a_failed_commit_fails_the_writers_and_is_retried(tmp_path, monkeypatch):
    real = SqliteBackend.write_batch
    calls = {"n": 0}

    def flaky(self, ops):
        calls["n"] += 1
        if calls["n"] == 1:
            raise sqlite3.OperationalError("disk I/O error")
        return real(self, ops)

    monkeypatch.setattr(SqliteBackend, "write_batch", flaky)
    store = make(tmp_path)
    c = LocalClient(store)
    with pytest.raises(ApiError, match="storage write failed: disk I/O error"):
        await c.create(queue("a"))
    await c.create(queue("b"))  # the retry commits both
    assert stored_names(tmp_path) == {"a", "b"}
    store.close()


async def test_close_commits_what_is_staged(tmp_path):
    store = make(tmp_path)
    store.create(queue("a"))
    store.close()
    assert stored_names(tmp_path) == {"a"}
    again = make(tmp_path)
    assert again.get("Queue", "a")["metadata"]["name"] == "a"
    again.close()


def test_without_a_running_loop_each_write_commits_at_once(tmp_path):
    store = make(tmp_path)
    w = store.watch("Queue", None, store.current_rv())
    store.create(queue("a"))
    assert stored_names(tmp_path) == {"a"} and w.pending() == 1
    store.close()
