"""Leader election over a coordination.k8s.io/v1 Lease, as client-go's leaderelection with a LeaseLock.

A pure core (``observe``, ``decide``, ``release_record``) says what to do with the lease as read; the
``LeaderElector`` shell reads, creates and updates it and runs the guarded work only while it leads.

The rules (client-go's): a candidate takes a lease over when its holder is empty (released) or when
the record has not changed for ``leaseDurationSeconds`` as measured on the candidate's own monotonic
clock since it last saw it change (timestamps in the record are never compared across machines); a
take-over adds one to ``leaseTransitions`` and sets ``acquireTime``; the holder renews every retry
period, keeping ``acquireTime``. Every write carries the resourceVersion read, so of two candidates
one wins and the other gets a Conflict and reads again. A leader that has not renewed within the
renew deadline, or that reads another holder, has lost: its work is stopped and
``LeaderElectionLost`` raised (the process exits non-zero, as controller-runtime's manager does). On
a clean stop the work is stopped first, then the lease released (holder cleared, duration 1 s:
controller-runtime's LeaderElectionReleaseOnCancel), so another candidate takes over at its next try.
"""
from __future__ import annotations

import asyncio
import logging
import random
import socket
import uuid
from dataclasses import dataclass, replace
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Any, Awaitable, Callable

from phalanx.client.interface import Client, Obj
from phalanx.client.kubeconfig import SERVICE_ACCOUNT_DIR
from phalanx.objects.clock import Clock, format_micro_time
from phalanx.objects.errors import AlreadyExists, ApiError, Conflict, NotFound
from phalanx.runtime.events import EventRecorder

log = logging.getLogger(__name__)

LEASE_API_VERSION = "coordination.k8s.io/v1"
JITTER_FACTOR = 1.2  # client-go: the acquire loop waits retryPeriod * (1 + rand * 1.2)
# controller-runtime's (and client-go's core clients') defaults, seconds.
DEFAULT_LEASE_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0
FALLBACK_NAMESPACE = "default"


class LeaderElectionLost(RuntimeError):
    """The leader could not renew its lease in time, or another holds it: stop acting."""

    def __init__(self, detail: str = "") -> None:
        super().__init__("leader election lost" + (f": {detail}" if detail else ""))


def new_identity() -> str:
    """``<hostname>_<uuid4>``, as controller-runtime and Volcano name a candidate (two
    processes on one host never share one)."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


def default_namespace(service_account_dir: Path = SERVICE_ACCOUNT_DIR) -> str:
    """The pod's namespace (its service account's namespace file) in a cluster, else ``default``."""
    try:
        ns = (service_account_dir / "namespace").read_text().strip()
    except OSError:
        return FALLBACK_NAMESPACE
    return ns or FALLBACK_NAMESPACE


@dataclass(frozen=True)
class ElectionConfig:
    """Durations in seconds; ``check`` refuses what client-go's NewLeaderElector refuses."""

    lease_duration: float = DEFAULT_LEASE_DURATION
    renew_deadline: float = DEFAULT_RENEW_DEADLINE
    retry_period: float = DEFAULT_RETRY_PERIOD
    release_on_cancel: bool = True

    def check(self, flags: tuple[str, str, str] = ("leaseDuration", "renewDeadline", "retryPeriod")) -> None:
        """Raise ValueError naming the setting (``flags``: how the caller spells them) and the rule."""
        lease, renew, retry = flags
        if self.lease_duration <= self.renew_deadline:
            raise ValueError(f"{lease} must be greater than {renew}")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError(f"{renew} must be greater than {retry}*JitterFactor ({JITTER_FACTOR})")
        if self.lease_duration < 1:
            raise ValueError(f"{lease} must be at least 1s (a Lease holds leaseDurationSeconds, whole seconds)")
        if self.retry_period <= 0:
            raise ValueError(f"{retry} must be greater than zero")

    @property
    def lease_duration_seconds(self) -> int:
        return int(self.lease_duration)  # client-go: int(LeaseDuration / time.Second)


def _int(v: Any) -> int:
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _str(v: Any) -> str | None:
    return v if isinstance(v, str) else None


@dataclass(frozen=True)
class LeaseRecord:
    """A LeaseSpec's election fields. A field of the wrong type reads as absent, so a damaged
    lease expires and is taken over (rewritten whole) instead of stopping every candidate."""

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    lease_transitions: int = 0

    @classmethod
    def from_lease(cls, lease: Obj) -> "LeaseRecord":
        spec = lease.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        return cls(_str(spec.get("holderIdentity")) or "", _int(spec.get("leaseDurationSeconds")),
                   _str(spec.get("acquireTime")), _str(spec.get("renewTime")), _int(spec.get("leaseTransitions")))

    def to_spec(self) -> dict[str, Any]:
        return {"holderIdentity": self.holder_identity, "leaseDurationSeconds": self.lease_duration_seconds,
                "acquireTime": self.acquire_time, "renewTime": self.renew_time,
                "leaseTransitions": self.lease_transitions}


# ---------------------------------------------------------------- the pure core


@dataclass(frozen=True)
class ElectionState:
    """What one candidate knows. Times are its own monotonic seconds."""

    identity: str
    observed: LeaseRecord | None = None   # the record last read or written; None: no Lease
    observed_time: float | None = None    # when ``observed`` last changed (None: never read)
    leading: bool = False
    renewed_at: float | None = None       # my last successful write while leading

    @property
    def holder(self) -> str:
        return self.observed.holder_identity if self.observed is not None else ""

    @property
    def is_leader(self) -> bool:
        return self.holder == self.identity


class Verdict(str, Enum):
    CREATE = "create"    # no Lease: create it, holding it
    ACQUIRE = "acquire"  # released or expired: take it over
    RENEW = "renew"      # mine: renew it
    WAIT = "wait"        # another holds a valid lease
    LOST = "lost"        # I led, and either missed the renew deadline or another holds it


@dataclass(frozen=True)
class Decision:
    verdict: Verdict
    record: LeaseRecord | None = None  # what to write (CREATE, ACQUIRE, RENEW)
    reason: str = ""                   # why (WAIT, LOST)


def observe(state: ElectionState, record: LeaseRecord | None, now: float) -> ElectionState:
    """The record as just read: the expiry clock restarts whenever it differs from the last one seen."""
    if state.observed_time is None or record != state.observed:
        return replace(state, observed=record, observed_time=now)
    return state


def expires_in(state: ElectionState, now: float) -> float:
    """Seconds until the observed lease expires for this candidate (≤ 0: expired or none)."""
    if state.observed is None or state.observed_time is None:
        return 0.0
    return state.observed_time + state.observed.lease_duration_seconds - now


def deadline_passed(state: ElectionState, now: float, config: ElectionConfig) -> bool:
    return state.leading and state.renewed_at is not None and now - state.renewed_at >= config.renew_deadline


def decide(state: ElectionState, now: float, wall: datetime, config: ElectionConfig) -> Decision:
    """What to do after ``observe``: client-go's tryAcquireOrRenew, plus a leader that reads
    another holder stops at once (instead of at its renew deadline)."""
    if deadline_passed(state, now, config):
        return Decision(Verdict.LOST, reason=f"the lease was not renewed within {config.renew_deadline:g}s")
    me, stamp, seconds = state.identity, format_micro_time(wall), config.lease_duration_seconds
    record = state.observed
    if record is None:
        return Decision(Verdict.CREATE, LeaseRecord(me, seconds, stamp, stamp, 0))
    if record.holder_identity == me:
        return Decision(Verdict.RENEW, LeaseRecord(me, seconds, record.acquire_time or stamp, stamp,
                                                   record.lease_transitions))
    if state.leading and record.holder_identity:
        return Decision(Verdict.LOST, reason=f"the lease is held by {record.holder_identity}")
    if record.holder_identity and expires_in(state, now) > 0:
        return Decision(Verdict.WAIT, reason=f"the lease is held by {record.holder_identity} and has not yet "
                                             f"expired ({expires_in(state, now):.2f}s left)")
    return Decision(Verdict.ACQUIRE, LeaseRecord(me, seconds, stamp, stamp, record.lease_transitions + 1))


def written(state: ElectionState, record: LeaseRecord, now: float) -> ElectionState:
    """After a successful create/update of ``record`` (decided at ``now``): I lead."""
    return replace(state, observed=record, observed_time=now, leading=True, renewed_at=now)


def release_record(state: ElectionState, wall: datetime) -> LeaseRecord | None:
    """client-go's release: holder cleared, duration 1 s, transitions kept; None unless I hold it."""
    if state.observed is None or not state.is_leader:
        return None
    stamp = format_micro_time(wall)
    return LeaseRecord("", 1, stamp, stamp, state.observed.lease_transitions)


# ---------------------------------------------------------------- the shell


class LeaderElector:
    """One candidate for the Lease ``namespace/name``; see the module docstring."""

    def __init__(self, client: Client, namespace: str, name: str, identity: str | None = None,
                 config: ElectionConfig | None = None, clock: Clock | None = None, *,
                 recorder: EventRecorder | None = None,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
                 jitter: Callable[[], float] = random.random) -> None:
        self.client = client
        self.namespace, self.name = namespace, name
        self.config = config or ElectionConfig()
        self.config.check()
        self.clock = clock or Clock()
        self.state = ElectionState(identity or new_identity())
        self.recorder = recorder
        self._sleep, self._jitter = sleep, jitter
        self._lease: Obj | None = None  # the Lease as last read or written (its resourceVersion)
        self._reported = ""
        self.leading = asyncio.Event()
        self.lost = asyncio.Event()
        self.lost_reason = ""
        self._stopping = asyncio.Event()
        self._loop: asyncio.Task[None] | None = None
        self._work: asyncio.Future[Any] | None = None
        self._stop_work: Callable[[], Awaitable[Any]] | None = None

    @property
    def identity(self) -> str:
        return self.state.identity

    @property
    def description(self) -> str:
        return f"{self.namespace}/{self.name}"

    def is_leader(self) -> bool:
        return self.state.leading and not self.lost.is_set()

    # ---- one try

    async def try_acquire_or_renew(self) -> bool:
        """One round: True when I hold the lease afterwards. A leader first updates the lease it
        last wrote (no read); a Conflict there, or on any write, is answered by reading again."""
        now = self.clock.monotonic()
        if self.state.leading and self._lease is not None and not deadline_passed(self.state, now, self.config):
            d = decide(self.state, now, self.clock.now(), self.config)
            if d.verdict is Verdict.RENEW and await self._write(d, now, quiet=True) == "ok":
                return True
        for _ in range(2):
            try:
                lease: Obj | None = await self.client.get("Lease", self.name, self.namespace)
            except NotFound:
                lease = None
            except ApiError as e:
                log.warning("error retrieving resource lock %s: %s", self.description, e.message)
                return False
            now = self.clock.monotonic()
            self._lease = lease
            self.state = observe(self.state, LeaseRecord.from_lease(lease) if lease is not None else None, now)
            self._report_leader()
            d = decide(self.state, now, self.clock.now(), self.config)
            if d.verdict is Verdict.WAIT:
                log.debug("%s: %s", self.description, d.reason)
                return False
            if d.verdict is Verdict.LOST:
                self._lose(d.reason)
                return False
            outcome = await self._write(d, now)
            if outcome != "conflict":
                return outcome == "ok"  # an error is logged; the next period tries again
        return False

    async def _write(self, d: Decision, now: float, quiet: bool = False) -> str:
        """Create or update the lease with ``d.record``: "ok", "conflict" (read it again) or "error"."""
        assert d.record is not None
        try:
            if d.verdict is Verdict.CREATE:
                obj = {"apiVersion": LEASE_API_VERSION, "kind": "Lease",
                       "metadata": {"name": self.name, "namespace": self.namespace}, "spec": d.record.to_spec()}
                self._lease = await self.client.create(obj)
            else:
                base = dict(self._lease or {})
                base.update({"apiVersion": LEASE_API_VERSION, "kind": "Lease", "spec": d.record.to_spec()})
                self._lease = await self.client.update(base)
        except (Conflict, AlreadyExists) as e:
            (log.debug if quiet else log.info)("%s: %s; reading it again", self.description, e.message)
            return "conflict"
        except ApiError as e:
            log.warning("failed to update lock %s: %s", self.description, e.message)
            return "error"
        self.state = written(self.state, d.record, now)
        self._report_leader()
        return "ok"

    def _report_leader(self) -> None:
        holder = self.state.holder
        if holder != self._reported:
            self._reported = holder
            if holder:
                log.info("new leader of %s: %s", self.description, holder)

    def _lose(self, reason: str) -> None:
        if not self.lost.is_set():
            self.lost_reason = reason
            log.error("leader election lost: %s: %s", self.description, reason)
            self.lost.set()

    # ---- the loop

    async def _pause(self, seconds: float) -> None:
        """Sleep, waking at once on stop."""
        if self._stopping.is_set():
            return
        nap = asyncio.ensure_future(self._sleep(seconds))
        stop = asyncio.ensure_future(self._stopping.wait())
        try:
            await asyncio.wait({nap, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (nap, stop):
                t.cancel()
            await asyncio.gather(nap, stop, return_exceptions=True)

    async def run(self) -> None:
        """Try every retry period (jittered) until leading, then renew every retry period
        until stopped or lost (``lost`` set)."""
        log.info("attempting to acquire leader lease %s...", self.description)
        while not self._stopping.is_set():
            if await self.try_acquire_or_renew():
                break
            await self._pause(self.config.retry_period * (1 + self._jitter() * JITTER_FACTOR))
        if self._stopping.is_set():
            return
        log.info("successfully acquired lease %s", self.description)
        self.leading.set()
        await self._event("became leader")
        while not self._stopping.is_set() and not self.lost.is_set():
            await self._pause(self.config.retry_period)
            if self._stopping.is_set():
                break
            remaining = self.config.renew_deadline - (self.clock.monotonic() - (self.state.renewed_at or 0.0))
            ok = False
            if remaining > 0:
                try:
                    ok = await asyncio.wait_for(self.try_acquire_or_renew(), remaining)
                except asyncio.TimeoutError:
                    log.warning("renewing lease %s: no answer within the renew deadline", self.description)
            if not ok and (self.lost.is_set() or deadline_passed(self.state, self.clock.monotonic(), self.config)):
                self._lose(self.lost_reason or f"the lease was not renewed within {self.config.renew_deadline:g}s")
        await self._event("stopped leading")

    async def _event(self, what: str) -> None:
        if self.recorder is not None and self._lease is not None:
            await self.recorder.record(self._lease, "Normal", "LeaderElection", f"{self.identity} {what}")

    async def release(self) -> bool:
        """Give the lease up if I hold it (another candidate takes it at its next try)."""
        record = release_record(self.state, self.clock.now())
        if record is None or self._lease is None:
            return True
        base = dict(self._lease)
        base["spec"] = record.to_spec()
        try:
            self._lease = await self.client.update(base)
        except ApiError as e:
            log.error("failed to release lock %s: %s", self.description, e.message)
            return False
        self.state = replace(self.state, observed=record, observed_time=self.clock.monotonic(), leading=False)
        log.info("released lease %s", self.description)
        return True

    # ---- guarded work

    async def run_while_leading(self, start: Callable[[], Awaitable[Any]], stop: Callable[[], Awaitable[Any]],
                                on_leading: Callable[[], Any] | None = None) -> None:
        """Wait to lead, then run ``start()`` while leading. Returns when stopped (``stop()``
        of this elector) or when the work returns; raises ``LeaderElectionLost`` (after
        ``stop`` of the work) when leadership is lost."""
        self._stop_work = stop
        self._loop = asyncio.create_task(self.run())
        leading = asyncio.ensure_future(self.leading.wait())
        await asyncio.wait({leading, self._loop}, return_when=asyncio.FIRST_COMPLETED)
        if not self.leading.is_set():
            leading.cancel()
            await self._loop  # stopped before leading (or the loop failed: raise it)
            return
        if on_leading is not None:
            on_leading()
        work = self._work = asyncio.ensure_future(start())
        lost = asyncio.ensure_future(self.lost.wait())
        await asyncio.wait({work, lost}, return_when=asyncio.FIRST_COMPLETED)
        if self.lost.is_set():
            await self._halt_work()
            raise LeaderElectionLost(self.lost_reason)
        lost.cancel()
        await work

    async def _halt_work(self) -> None:
        work, self._work = self._work, None
        if work is None:
            return
        if not work.done() and self._stop_work is not None:
            await self._stop_work()
        try:
            await asyncio.wait_for(asyncio.shield(work), max(self.config.renew_deadline, 5.0))
        except asyncio.TimeoutError:
            work.cancel()
        except Exception:  # reported by run_while_leading, which awaits it too
            pass

    async def stop(self) -> None:
        """Stop: the work first (nothing the lease guards runs once it is released), then the
        loop, then release the lease (``release_on_cancel``) if still held."""
        self._stopping.set()
        await self._halt_work()
        if self._loop is not None:
            await asyncio.gather(self._loop, return_exceptions=True)
        if self.config.release_on_cancel and self.is_leader():
            await self.release()
