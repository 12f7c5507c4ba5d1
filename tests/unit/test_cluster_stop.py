"""Stopping the embedded cluster: each stopped component finishes writing what it queued before the store closes."""
from __future__ import annotations

import asyncio

from phalanx.cluster import EmbeddedCluster
from phalanx.config import AgentSettings, ClusterConfig, NodeConfig, OperatorSettings
from phalanx.objects.clock import Clock
from phalanx.store import Store


async def test_the_schedulers_queued_events_are_written_before_the_store_closes(tmp_path):
    cfg = ClusterConfig(nodes=[NodeConfig("las1", 16, 64 * 1024**3)], agent=AgentSettings(),
                        operator=OperatorSettings())
    cluster = EmbeddedCluster(tmp_path / "home", cfg, persist=True)
    await cluster.start()
    scheduler = cluster.scheduler
    assert scheduler is not None
    flush = scheduler.flush_events
    seen: list[str] = []

    async def slow_flush(stop: bool = False) -> None:
        """The scheduler's last step on its way out, taking a while (a backlog of Events to write)."""
        await asyncio.sleep(0.3)
        for i in range(20):
            await cluster.internal.create({
                "apiVersion": "v1", "kind": "Event", "metadata": {"name": f"late.{i:016x}", "namespace": "default"},
                "involvedObject": {"kind": "Pod", "namespace": "default", "name": "p"}, "reason": "Scheduled",
                "message": f"late {i}", "type": "Normal", "source": {"component": "volcano"}})
        await flush(stop)
        seen.append("flushed")

    scheduler.flush_events = slow_flush  # type: ignore[method-assign]
    await cluster.stop()
    assert seen == ["flushed"]  # ran to its end, not cancelled by the stop
    reopened = Store(tmp_path / "home" / "state.db", Clock())
    try:
        late = [e for e in reopened.list("Event", "default")[0] if e["metadata"]["name"].startswith("late.")]
    finally:
        reopened.close()
    assert len(late) == 20  # written before the store closed, so on disk
