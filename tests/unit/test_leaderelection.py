"""Leader election (runtime/leaderelection.py): the pure core on a fake clock, case by case,
then the shell with two candidates over one store on virtual time (client-go's semantics:
leaderelection.go tryAcquireOrRenew/release, resourcelock/leaselock.go)."""
from __future__ import annotations

import asyncio
import heapq
import itertools
import re
from datetime import datetime, timezone

import pytest

from phalanx.api.admission import admit
from phalanx.client.local import LocalClient
from phalanx.objects.clock import FakeClock, format_micro_time, parse_time
from phalanx.objects.errors import ApiError
from phalanx.runtime.leaderelection import (
    ElectionConfig,
    ElectionState,
    LeaderElectionLost,
    LeaderElector,
    LeaseRecord,
    Verdict,
    decide,
    default_namespace,
    expires_in,
    new_identity,
    observe,
    release_record,
    written,
)
from phalanx.store.store import Store
from tests.unit.test_server import api, raw  # noqa: F401 - fixture

pytestmark = pytest.mark.timeout(30)

CFG = ElectionConfig()  # 15 s / 10 s / 2 s
T0 = datetime(2026, 12, 2, 1, 2, 3, 123456, tzinfo=timezone.utc)
STAMP = "2026-12-02T01:02:03.123456Z"


def other(holder: str = "b", seconds: int = 15, transitions: int = 3, renew: str = "2026-12-02T01:00:00.000001Z"):
    return LeaseRecord(holder, seconds, "2026-12-02T00:00:00.000000Z", renew, transitions)


def seen(record: LeaseRecord | None, at: float = 100.0, **kw) -> ElectionState:
    return observe(ElectionState("me", **kw), record, at)


# ---------------------------------------------------------------- the core


def test_no_lease_is_created_holding_it():
    d = decide(seen(None), 100.0, T0, CFG)
    assert d.verdict is Verdict.CREATE
    assert d.record == LeaseRecord("me", 15, STAMP, STAMP, 0)
    assert d.record.to_spec() == {"holderIdentity": "me", "leaseDurationSeconds": 15, "acquireTime": STAMP,
                                  "renewTime": STAMP, "leaseTransitions": 0}


def test_a_held_lease_is_waited_for_until_it_has_not_changed_for_its_duration():
    s = seen(other())
    assert decide(s, 100.0, T0, CFG).verdict is Verdict.WAIT
    assert decide(s, 114.999, T0, CFG).verdict is Verdict.WAIT
    assert "held by b" in decide(s, 114.0, T0, CFG).reason
    d = decide(s, 115.0, T0, CFG)  # observed + leaseDurationSeconds is no longer after now
    assert d.verdict is Verdict.ACQUIRE
    assert d.record == LeaseRecord("me", 15, STAMP, STAMP, 4)  # a transition, a new acquireTime


def test_expiry_is_measured_from_when_the_record_last_changed_on_my_clock():
    s = seen(other())
    s = observe(s, other(), 110.0)          # the same record again: the clock does not restart
    assert s.observed_time == 100.0
    assert decide(s, 115.0, T0, CFG).verdict is Verdict.ACQUIRE
    renewed = other(renew="2026-12-02T01:00:02.000000Z")
    s = observe(s, renewed, 110.0)          # the holder renewed: 15 s from now again
    assert s.observed_time == 110.0 and expires_in(s, 110.0) == 15.0
    assert decide(s, 124.9, T0, CFG).verdict is Verdict.WAIT
    assert decide(s, 125.0, T0, CFG).verdict is Verdict.ACQUIRE


def test_the_records_duration_counts_not_mine():
    s = seen(other(seconds=60))
    assert decide(s, 159.0, T0, CFG).verdict is Verdict.WAIT  # my config says 15 s; the holder's says 60
    assert decide(s, 160.0, T0, CFG).verdict is Verdict.ACQUIRE
    assert decide(s, 160.0, T0, CFG).record.lease_duration_seconds == 15  # I write mine


def test_timestamps_in_the_record_are_never_compared_with_my_clock():
    ancient = other(renew="2000-01-01T00:00:00.000000Z")
    assert decide(seen(ancient), 100.0, T0, CFG).verdict is Verdict.WAIT  # just seen change: valid for 15 s


def test_a_released_lease_is_taken_at_once():
    released = LeaseRecord("", 1, STAMP, STAMP, 5)
    d = decide(seen(released), 100.0, T0, CFG)
    assert d.verdict is Verdict.ACQUIRE and d.record == LeaseRecord("me", 15, STAMP, STAMP, 6)


def test_my_lease_is_renewed_keeping_acquire_time_and_transitions():
    mine = LeaseRecord("me", 15, "2026-12-01T00:00:00.000000Z", "2026-12-01T00:00:01.000000Z", 7)
    d = decide(seen(mine), 100.0, T0, CFG)
    assert d.verdict is Verdict.RENEW
    assert d.record == LeaseRecord("me", 15, "2026-12-01T00:00:00.000000Z", STAMP, 7)
    # Even expired (I was slow, nobody took it): still mine to renew while I am within my deadline.
    assert decide(seen(mine), 200.0, T0, CFG).verdict is Verdict.RENEW
    # A record of mine without acquireTime gets one.
    assert decide(seen(LeaseRecord("me", 15)), 100.0, T0, CFG).record.acquire_time == STAMP


def test_a_leader_that_reads_another_holder_has_lost_at_once():
    s = written(ElectionState("me"), LeaseRecord("me", 15, STAMP, STAMP, 0), 100.0)
    s = observe(s, other("thief"), 101.0)
    d = decide(s, 101.0, T0, CFG)
    assert d.verdict is Verdict.LOST and "held by thief" in d.reason


def test_a_leader_past_its_renew_deadline_has_lost_even_if_the_record_is_still_its():
    s = written(ElectionState("me"), LeaseRecord("me", 15, STAMP, STAMP, 0), 100.0)
    assert decide(s, 109.999, T0, CFG).verdict is Verdict.RENEW
    d = decide(s, 110.0, T0, CFG)
    assert d.verdict is Verdict.LOST and "within 10s" in d.reason
    assert decide(ElectionState("me"), 1e9, T0, CFG).verdict is Verdict.CREATE  # a follower has no deadline


def test_a_leader_whose_lease_was_deleted_or_cleared_takes_it_again():
    s = written(ElectionState("me"), LeaseRecord("me", 15, STAMP, STAMP, 2), 100.0)
    assert decide(observe(s, None, 101.0), 101.0, T0, CFG).verdict is Verdict.CREATE
    cleared = decide(observe(s, LeaseRecord("", 1, STAMP, STAMP, 2), 101.0), 101.0, T0, CFG)
    assert cleared.verdict is Verdict.ACQUIRE and cleared.record.lease_transitions == 3


def test_written_makes_me_leader_from_the_time_decided():
    s = written(seen(None), LeaseRecord("me", 15, STAMP, STAMP, 0), 100.0)
    assert s.leading and s.is_leader and s.renewed_at == 100.0 and s.observed_time == 100.0


def test_release_clears_the_holder_only_when_i_hold_it():
    s = written(ElectionState("me"), LeaseRecord("me", 15, "2026-12-01T00:00:00.000000Z", STAMP, 4), 100.0)
    assert release_record(s, T0) == LeaseRecord("", 1, STAMP, STAMP, 4)
    assert release_record(seen(other()), T0) is None
    assert release_record(seen(None), T0) is None


def test_a_damaged_lease_reads_as_absent_fields_and_is_taken_over_when_it_expires():
    lease = {"spec": {"holderIdentity": 7, "leaseDurationSeconds": "abc", "renewTime": 5, "leaseTransitions": True}}
    assert LeaseRecord.from_lease(lease) == LeaseRecord("", 0, None, None, 0)
    assert LeaseRecord.from_lease({}) == LeaseRecord()
    held_garbage = LeaseRecord.from_lease({"spec": {"holderIdentity": "b", "leaseDurationSeconds": "abc"}})
    assert decide(seen(held_garbage), 100.0, T0, CFG).verdict is Verdict.ACQUIRE  # duration 0: expired


def test_config_refuses_what_client_go_refuses():
    ElectionConfig(2, 1.5, 0.25).check()
    for cfg, msg in ((ElectionConfig(10, 10, 2), "leaseDuration must be greater than renewDeadline"),
                     (ElectionConfig(15, 2.4, 2), "renewDeadline must be greater than retryPeriod*JitterFactor"),
                     (ElectionConfig(0.9, 0.5, 0.1), "leaseDuration must be at least 1s"),
                     (ElectionConfig(15, 10, 0), "retryPeriod must be greater than zero")):
        with pytest.raises(ValueError) as e:
            cfg.check()
        assert msg in str(e.value)
    with pytest.raises(ValueError) as e:
        ElectionConfig(1, 2, 0.5).check(("--lease", "--renew", "--retry"))
    assert str(e.value) == "--lease must be greater than --renew"
    assert ElectionConfig(2.9, 1.5, 0.25).lease_duration_seconds == 2  # whole seconds, truncated


def test_micro_time_and_identity_and_namespace(tmp_path):
    assert format_micro_time(T0) == STAMP and parse_time(STAMP) == T0
    assert re.fullmatch(r"[^_]+_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", new_identity())
    assert new_identity() != new_identity()
    assert default_namespace(tmp_path) == "default"
    (tmp_path / "namespace").write_text("phalanx-system\n")
    assert default_namespace(tmp_path) == "phalanx-system"


# ---------------------------------------------------------------- the shell, on virtual time


class VirtualTime:
    """Sleeps that end when the driver moves the fake clock to them."""

    def __init__(self, clock: FakeClock) -> None:
        self.clock = clock
        self._timers: list = []
        self._n = itertools.count()

    async def sleep(self, seconds: float) -> None:
        fut = asyncio.get_running_loop().create_future()
        heapq.heappush(self._timers, (self.clock.monotonic() + seconds, next(self._n), fut))
        await fut

    async def settle(self) -> None:
        for _ in range(20):
            await asyncio.sleep(0.001)

    async def run_until(self, predicate, limit: float) -> float:
        """Advance timer by timer until ``predicate()``; the virtual seconds it took."""
        start = self.clock.monotonic()
        while True:
            await self.settle()
            if predicate():
                return self.clock.monotonic() - start
            self._timers = [t for t in self._timers if not t[2].done()]
            heapq.heapify(self._timers)
            assert self._timers, "nothing is waiting and the condition does not hold"
            at = self._timers[0][0]
            assert at - start <= limit, f"not within {limit}s of virtual time"
            self.clock.advance(max(0.0, at - self.clock.monotonic()))
            while self._timers and self._timers[0][0] <= self.clock.monotonic():
                _, _, fut = heapq.heappop(self._timers)
                if not fut.done():
                    fut.set_result(None)


class Work:
    """The guarded work: runs until stopped."""

    def __init__(self) -> None:
        self.started = 0
        self.stopped = 0
        self._halt = asyncio.Event()

    async def run(self) -> None:
        self.started += 1
        await self._halt.wait()

    async def stop(self) -> None:
        self.stopped += 1
        self._halt.set()


@pytest.fixture
def world():
    clock = FakeClock(T0)
    store = Store(None, clock, admission=admit)
    vt = VirtualTime(clock)
    return clock, LocalClient(store), vt


def elector(client, clock, vt, identity: str, cfg: ElectionConfig = CFG) -> LeaderElector:
    return LeaderElector(client, "default", "lock", identity, cfg, clock, sleep=vt.sleep, jitter=lambda: 0.5)


async def _lease(client):
    return (await client.get("Lease", "lock", "default"))["spec"]


async def test_two_candidates_one_leads_and_a_clean_stop_hands_over_at_the_next_try(world):
    clock, client, vt = world
    a, b = elector(client, clock, vt, "a"), elector(client, clock, vt, "b")
    wa, wb = Work(), Work()
    ta = asyncio.create_task(a.run_while_leading(wa.run, wa.stop))
    await vt.run_until(lambda: a.is_leader(), 1)
    tb = asyncio.create_task(b.run_while_leading(wb.run, wb.stop))
    await vt.run_until(lambda: False if clock.monotonic() < 1030 else True, 60)  # 30 s: a renews, b waits
    assert (wa.started, wb.started) == (1, 0) and not b.is_leader()
    spec = await _lease(client)
    assert spec["holderIdentity"] == "a" and spec["leaseTransitions"] == 0
    assert parse_time(spec["renewTime"]) > parse_time(spec["acquireTime"])  # renewed, acquireTime kept
    await a.stop()
    await ta
    assert wa.stopped == 1
    released = await _lease(client)
    assert (released["holderIdentity"], released["leaseDurationSeconds"]) == ("", 1)
    took = await vt.run_until(lambda: b.is_leader(), 10)
    assert took <= CFG.retry_period * (1 + 0.5 * 1.2)  # its next try, not a lease duration
    assert wb.started == 1 and (await _lease(client))["leaseTransitions"] == 1
    await b.stop()
    await tb


async def test_a_killed_leader_is_replaced_after_the_lease_duration_not_before(world):
    clock, client, vt = world
    a, b = elector(client, clock, vt, "a"), elector(client, clock, vt, "b")
    wa, wb = Work(), Work()
    ta = asyncio.create_task(a.run_while_leading(wa.run, wa.stop))
    await vt.run_until(lambda: a.is_leader(), 1)
    tb = asyncio.create_task(b.run_while_leading(wb.run, wb.stop))
    await vt.settle()
    ta.cancel()  # killed: no release
    a._loop.cancel()
    await asyncio.gather(ta, a._loop, return_exceptions=True)
    took = await vt.run_until(lambda: b.is_leader(), 60)
    assert CFG.lease_duration - CFG.retry_period <= took <= CFG.lease_duration + 2 * CFG.retry_period * 2.2
    spec = await _lease(client)
    assert spec["holderIdentity"] == "b" and spec["leaseTransitions"] == 1
    await b.stop()
    await tb


async def test_a_leader_that_finds_another_holder_stops_its_work_and_raises_lost(world):
    clock, client, vt = world
    a = elector(client, clock, vt, "a")
    wa = Work()
    ta = asyncio.create_task(a.run_while_leading(wa.run, wa.stop))
    await vt.run_until(lambda: a.is_leader(), 1)
    lease = await client.get("Lease", "lock", "default")
    lease["spec"]["holderIdentity"] = "thief"
    await client.update(lease)
    await vt.run_until(lambda: ta.done(), 5)
    with pytest.raises(LeaderElectionLost) as e:
        await ta
    assert str(e.value) == "leader election lost: the lease is held by thief"
    assert wa.stopped == 1 and not a.is_leader()
    await a.stop()
    assert (await _lease(client))["holderIdentity"] == "thief"  # a lost leader releases nothing


class Failing:
    """A client whose lease calls fail (the API server is gone) once ``broken``."""

    def __init__(self, client) -> None:
        self.client, self.broken, self.calls = client, False, 0

    def __getattr__(self, name):
        real = getattr(self.client, name)

        async def call(*args, **kwargs):
            self.calls += 1
            if self.broken:
                raise ApiError("the server is currently unable to handle the request")
            return await real(*args, **kwargs)
        return call


async def test_a_leader_that_cannot_renew_within_the_deadline_loses(world):
    clock, client, vt = world
    flaky = Failing(client)
    a = LeaderElector(flaky, "default", "lock", "a", CFG, clock, sleep=vt.sleep, jitter=lambda: 0.0)
    wa = Work()
    ta = asyncio.create_task(a.run_while_leading(wa.run, wa.stop))
    await vt.run_until(lambda: a.is_leader(), 1)
    flaky.broken = True
    broke_at = clock.monotonic()
    await vt.run_until(lambda: ta.done(), 30)
    with pytest.raises(LeaderElectionLost, match="not renewed within 10s"):
        await ta
    assert CFG.renew_deadline - CFG.retry_period <= clock.monotonic() - broke_at <= CFG.renew_deadline + 1e-6
    assert wa.stopped == 1


async def test_candidates_racing_for_a_free_lease_end_with_exactly_one_leader(world):
    clock, client, vt = world
    electors = [elector(client, clock, vt, f"c{i}") for i in range(4)]
    works = [Work() for _ in electors]
    tasks = [asyncio.create_task(e.run_while_leading(w.run, w.stop)) for e, w in zip(electors, works)]
    await vt.run_until(lambda: any(e.is_leader() for e in electors), 1)
    await vt.run_until(lambda: clock.monotonic() >= 1040, 60)
    assert sum(e.is_leader() for e in electors) == 1 and sum(w.started for w in works) == 1
    leader = next(e for e in electors if e.is_leader())
    assert (await _lease(client))["holderIdentity"] == leader.identity
    for e in electors:
        await e.stop()
    await asyncio.gather(*tasks)


async def test_stopped_before_leading_returns_and_never_starts_the_work(world):
    clock, client, vt = world
    a, b = elector(client, clock, vt, "a"), elector(client, clock, vt, "b")
    wa, wb = Work(), Work()
    ta = asyncio.create_task(a.run_while_leading(wa.run, wa.stop))
    await vt.run_until(lambda: a.is_leader(), 1)
    tb = asyncio.create_task(b.run_while_leading(wb.run, wb.stop))
    await vt.settle()
    await b.stop()
    await tb
    assert (wb.started, wb.stopped) == (0, 0)
    assert (await _lease(client))["holderIdentity"] == "a"  # b released nothing it did not hold
    await a.stop()
    await ta


# ---------------------------------------------------------------- the command-line flags


def test_leader_election_flags_to_settings_and_their_errors():
    from phalanx.cli.clustermode import leader_election

    flags = ("--id", "--ns", "--lease", "--renew", "--retry")
    assert leader_election(False, "x", None, ("15s", "10s", "2s"), flags) is None
    le = leader_election(True, "1ca428e5.training-operator.kubeflow.org", None, ("2s", "1.5s", "250ms"), flags)
    assert (le.name, le.namespace, le.config) == ("1ca428e5.training-operator.kubeflow.org", None,
                                                  ElectionConfig(2.0, 1.5, 0.25))
    assert leader_election(True, "volcano", "phalanx-system", ("15s", "10s", "2s"), flags).namespace == "phalanx-system"
    for args, msg in (((True, "Bad_Name", None, ("15s", "10s", "2s")), "--id: invalid value 'Bad_Name'"),
                      ((True, "x", "a.b", ("15s", "10s", "2s")), "--ns: invalid value 'a.b'"),
                      ((True, "x", None, ("soon", "10s", "2s")), "--lease: 'soon': not a duration"),
                      ((True, "x", None, ("10s", "10s", "2s")), "--lease must be greater than --renew"),
                      ((True, "x", None, ("15s", "2s", "2s")), "--renew must be greater than --retry*JitterFactor")):
        with pytest.raises(ValueError) as e:
            leader_election(*args, flags)
        assert msg in str(e.value), str(e.value)


# ---------------------------------------------------------------- Leases through the HTTP API


async def test_the_api_server_keeps_micro_times_and_refuses_a_stale_lease_update_with_409(api):  # noqa: F811 - the fixture
    path = "/apis/coordination.k8s.io/v1/namespaces/default/leases"
    spec = {"holderIdentity": "a", "leaseDurationSeconds": 15, "acquireTime": STAMP, "renewTime": STAMP,
            "leaseTransitions": 0}
    status, created = await raw(api, "POST", path, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                                                    "metadata": {"name": "lock"}, "spec": spec})
    assert status == 201 and created["spec"] == spec  # MicroTime strings as given
    stale = {**created, "spec": {**spec, "holderIdentity": "c"}}
    status, renewed = await raw(api, "PUT", path + "/lock", {**created, "spec": {**spec, "holderIdentity": "b"}})
    assert status == 200 and renewed["spec"]["holderIdentity"] == "b"
    status, body = await raw(api, "PUT", path + "/lock", stale)
    assert status == 409 and body["reason"] == "Conflict"
    assert body["message"] == ('Operation cannot be fulfilled on leases.coordination.k8s.io "lock": the object has '
                               'been modified; please apply your changes to the latest version and try again')
    status, got = await raw(api, "GET", path + "/lock")
    assert got["spec"]["holderIdentity"] == "b" and got["spec"]["renewTime"] == STAMP
