"""Leader election between real processes: the API server alone (`phalanx up --no-controllers
--no-scheduler`), two `phalanx scheduler --leader-elect` and two `phalanx operator --leader-elect`
with short durations. One of each acts; SIGKILL the leader and the other takes over after the
lease duration and carries the jobs on, no job acted on twice; SIGTERM hands over at once (the
lease is released); a leader whose lease is taken exits 1 ("leader election lost").

Every process logs its HTTP requests (-vv), so "acted on nothing" is checked on what it sent.
"""
from __future__ import annotations

import contextlib
import copy
import re
import signal
import subprocess
import time

import pytest
import yaml

from phalanx.objects.errors import Conflict
from tests.e2e.test_split_deployment import PHALANX, PT_PODS, SplitPlane, recording, remove_job
from tests.scenarios.conftest import job_state, load_example, scaled, wait_until

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(180)]

OPERATOR_LEASE = "1ca428e5.training-operator.kubeflow.org"
SCHEDULER_LEASE = "volcano"
FAST = {"lease": 2.0, "renew": 1.5, "retry": 0.25}
_IDENTITY = re.compile(r"leader election: lease (\S+) as (\S+); waiting to lead")
_REQUEST = re.compile(r"HTTP Request: (GET|POST|PUT|PATCH|DELETE) https://[^/\s]+(\S+) ")
LEADING = ": leading: lease "


class Candidate:
    """One `phalanx operator|scheduler --leader-elect` process and its log."""

    def __init__(self, plane: SplitPlane, what: str, tag: str, lease: float, renew: float, retry: float,
                 extra: tuple[str, ...] = ()) -> None:
        self.what, self.tag = what, tag
        self.log = plane.home / f"{what}-{tag}.log"
        prefix = "--leader-election" if what == "operator" else "--leader-elect"
        args = [*PHALANX, what, "--kubeconfig", str(plane.kubeconfig), "-vv", "--leader-elect",
                f"{prefix}-lease-duration={lease}s", f"{prefix}-renew-deadline={renew}s",
                f"{prefix}-retry-period={retry}s", *extra]
        if what == "operator":
            args.append("--disable-webhook")  # every replica serves webhooks: the tests count the lease's writes
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(args, env=plane.env, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                         start_new_session=True)
        self.identity = ""

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    async def wait_identity(self) -> str:
        def found():
            assert self.proc.poll() is None, f"{self.tag} exited {self.proc.returncode}:\n{self.text()[-3000:]}"
            m = _IDENTITY.search(self.text())
            return m.group(2) if m else None
        self.identity = await wait_until(found, 30, f"{self.tag} to start its election")
        return self.identity

    def leading(self) -> bool:
        return LEADING in self.text()

    def requests(self, before_leading: bool = False) -> list[tuple[str, str]]:
        text = self.text()
        if before_leading and LEADING in text:
            text = text[:text.index(LEADING)]
        return [(m.group(1), m.group(2)) for m in _REQUEST.finditer(text)]

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)

    def wait(self, timeout: float = 30) -> int:
        return self.proc.wait(timeout=timeout)


@pytest.fixture(scope="module")
def plane(tmp_path_factory):
    home = tmp_path_factory.mktemp("lease") / "home"
    home.mkdir()
    (home / "cluster.yaml").write_text(yaml.safe_dump({
        "nodes": [{"name": "las1", "cpu": 16, "memory": "64Gi"}], "agent": {"backoffBase": 0.2, "backoffCap": 2}}))
    p = SplitPlane(home)
    p.cli("up", "--no-controllers", "--no-scheduler")
    p.candidates = []
    try:
        yield p
    finally:
        for c in p.candidates:
            with contextlib.suppress(Exception):
                c.kill()
                c.wait(10)
        subprocess.run([*PHALANX, "down"], env=p.env, capture_output=True, timeout=60)


def start(plane, what: str, tag: str, timing: dict = FAST, extra: tuple[str, ...] = ()) -> Candidate:
    c = Candidate(plane, what, tag, timing["lease"], timing["renew"], timing["retry"], extra)
    plane.candidates.append(c)
    return c


@pytest.fixture
async def kube(plane):
    c = plane.client()
    try:
        yield c
    finally:
        await c.close()


async def holder(kube, name: str) -> str:
    try:
        lease = await kube.get("Lease", name, "default")
    except Exception:
        return ""
    return lease["spec"].get("holderIdentity") or ""


async def lead_pair(plane, kube, what: str, lease: str, tags: tuple[str, str], timing: dict = FAST,
                    extra: tuple[str, ...] = ()) -> tuple[Candidate, Candidate]:
    """Start the first candidate, wait until it leads, then the second, which must wait."""
    first = start(plane, what, tags[0], timing, extra)
    await first.wait_identity()
    await wait_until(lambda: first.leading(), 20, f"{first.tag} leading")
    second = start(plane, what, tags[1], timing, extra)
    await second.wait_identity()
    await wait_until(lambda: f"new leader of default/{lease}: {first.identity}" in second.text(), 20,
                     f"{second.tag} to see {first.tag} lead")
    assert await holder(kube, lease) == first.identity
    return first, second


def named(doc: dict, name: str) -> dict:
    doc = copy.deepcopy(doc)
    doc["metadata"]["name"] = name
    return doc


def posts(c: Candidate, collection: str) -> list[int]:
    """Status codes of the creates this process sent to ``collection`` (its request log)."""
    return [int(m.group(1)) for m in re.finditer(
        rf'HTTP Request: POST https://[^/\s]+{re.escape(collection)}(?:\?\S*)? "HTTP/1.1 (\d+)', c.text())]


async def _state(kube, name: str, state: str) -> bool:
    try:
        return job_state(await kube.get("PyTorchJob", name, "default")) == state
    except Exception:
        return False


async def _holder_is(kube, lease: str, identity: str) -> bool:
    return await holder(kube, lease) == identity


# ---------------------------------------------------------------- the tests


async def test_sigkill_the_leader_the_other_takes_over_after_the_lease_duration_and_nothing_runs_twice(plane, kube):
    s1, s2 = await lead_pair(plane, kube, "scheduler", SCHEDULER_LEASE, ("sched-a", "sched-b"))
    a, b = await lead_pair(plane, kube, "operator", OPERATOR_LEASE, ("op-a", "op-b"))
    async with recording(kube) as rec:
        try:
            await kube.create(scaled(load_example("pytorchjob.yaml")[0], 6))
            await wait_until(lambda: _state(kube, "pytest", "Running"), 30, "first job Running under op-a")
            assert not b.leading() and await holder(kube, OPERATOR_LEASE) == a.identity
            lease_before = await kube.get("Lease", OPERATOR_LEASE, "default")
            killed = time.monotonic()
            a.kill(signal.SIGKILL)
            a.wait()
            await wait_until(lambda: _holder_is(kube, OPERATOR_LEASE, b.identity), 15, "op-b holding the lease",
                             interval=0.01)
            takeover = time.monotonic() - killed
            print(f"\nSIGKILL takeover: {takeover:.2f}s (lease {FAST['lease']}s, retry {FAST['retry']}s)")
            # Not before the lease expired for op-b, and soon after.
            assert FAST["lease"] - FAST["retry"] - 0.05 <= takeover <= FAST["lease"] + 3.0, takeover
            lease = await kube.get("Lease", OPERATOR_LEASE, "default")
            assert lease["spec"]["leaseTransitions"] == lease_before["spec"]["leaseTransitions"] + 1
            assert lease["spec"]["acquireTime"] != lease_before["spec"]["acquireTime"]
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", lease["spec"]["renewTime"])
            # op-b carries the first job on and runs a second one.
            await kube.create(named(scaled(load_example("pytorchjob.yaml")[0], 1), "second"))
            await wait_until(lambda: _state(kube, "pytest", "Succeeded"), 40, "first job Succeeded under op-b")
            await wait_until(lambda: _state(kube, "second", "Succeeded"), 40, "second job Succeeded under op-b")
        finally:
            for job in ("pytest", "second"):
                await remove_job(kube, "PyTorchJob", job)
    second_pods = ["second-master-0", "second-worker-0", "second-worker-1", "second-worker-2"]
    for n in PT_PODS + second_pods:  # every pod created once, never restarted
        assert len(rec.uids.get(n, [])) == 1 and rec.restarts.get(n, 0) == 0, (n, rec.uids.get(n))
    # op-a made the first job's PodGroup, Services and pods; op-b only the second's: one create
    # each, none refused as existing (a second actor would have sent more, and got 409s).
    for collection, per_job in (("/api/v1/namespaces/default/pods", 4), ("/api/v1/namespaces/default/services", 4),
                                ("/apis/scheduling.volcano.sh/v1beta1/namespaces/default/podgroups", 1)):
        assert posts(a, collection) == [201] * per_job, (collection, posts(a, collection))
        assert posts(b, collection) == [201] * per_job, (collection, posts(b, collection))
    # Before it led, op-b wrote nothing but its Lease, and watched nothing.
    before = b.requests(before_leading=True)
    assert before, "op-b logged no request"
    assert [r for r in before if r[0] != "GET" and "/leases" not in r[1]] == []
    assert [r for r in before if "watch=true" in r[1]] == []
    # The follower scheduler bound nothing and wrote nothing but its Lease.
    assert s1.leading() and not s2.leading()
    assert [r for r in s2.requests() if r[0] != "GET" and "/leases" not in r[1]] == []
    for c in (b, s1, s2):
        c.kill(signal.SIGTERM)
        assert c.wait() == 0, c.text()[-2000:]


async def test_sigterm_releases_the_lease_and_the_other_takes_over_at_its_next_try(plane, kube):
    slow = {"lease": 6.0, "renew": 4.0, "retry": 0.25}  # a takeover by expiry would take 6 s
    sched = start(plane, "scheduler", "sched-t")
    await wait_until(lambda: sched.leading(), 20, "scheduler leading")
    a, b = await lead_pair(plane, kube, "operator", "sigterm-test", ("op-ta", "op-tb"), slow,
                           ("--leader-election-id=sigterm-test",))
    stopped = time.monotonic()
    a.kill(signal.SIGTERM)
    await wait_until(lambda: _holder_is(kube, "sigterm-test", b.identity), 10, "op-tb holding the lease",
                     interval=0.01)
    takeover = time.monotonic() - stopped
    print(f"\nSIGTERM takeover: {takeover:.2f}s (lease {slow['lease']}s, retry {slow['retry']}s)")
    assert a.wait() == 0, a.text()[-2000:]
    assert "released lease default/sigterm-test" in a.text()
    assert takeover < slow["lease"] / 2, takeover
    lease = await kube.get("Lease", "sigterm-test", "default")
    assert lease["spec"]["leaseTransitions"] == 1 and lease["spec"]["leaseDurationSeconds"] == 6
    # op-tb acts: a job runs to the end under it.
    try:
        await kube.create(scaled(load_example("pytorchjob.yaml")[0], 1))
        await wait_until(lambda: _state(kube, "pytest", "Succeeded"), 40, "job Succeeded under op-tb")
    finally:
        await remove_job(kube, "PyTorchJob", "pytest")
    assert posts(a, "/api/v1/namespaces/default/pods") == []
    assert posts(b, "/api/v1/namespaces/default/pods") == [201] * 4

    # A leader whose lease another takes exits 1: "leader election lost".
    async def take() -> bool:
        taken = await kube.get("Lease", "sigterm-test", "default")
        taken["spec"].update({"holderIdentity": "somebody-else", "leaseDurationSeconds": 60})
        try:
            await kube.update(taken)
        except Conflict:  # the leader renewed in between: read again
            return False
        return True

    await wait_until(take, 10, "the lease taken by somebody-else", interval=0.01)
    assert b.wait(15) == 1, b.text()[-2000:]
    assert "error: leader election lost: the lease is held by somebody-else" in b.text()
    assert await holder(kube, "sigterm-test") == "somebody-else"  # a lost leader releases nothing
    sched.kill(signal.SIGTERM)
    assert sched.wait() == 0


async def test_sigkill_the_leading_scheduler_the_other_schedules_the_next_job(plane, kube):
    s1, s2 = await lead_pair(plane, kube, "scheduler", SCHEDULER_LEASE, ("sched-ka", "sched-kb"))
    op = start(plane, "operator", "op-k", extra=("--leader-election-id=sched-test",))
    await wait_until(lambda: op.leading(), 20, "operator leading")
    killed = time.monotonic()
    s1.kill(signal.SIGKILL)
    s1.wait()
    await wait_until(lambda: _holder_is(kube, SCHEDULER_LEASE, s2.identity), 15, "sched-kb holding the lease",
                     interval=0.01)
    print(f"\nscheduler SIGKILL takeover: {time.monotonic() - killed:.2f}s")
    assert [r for r in s2.requests() if r[0] == "POST" and "/binding" in r[1]] == []
    try:
        await kube.create(scaled(load_example("pytorchjob.yaml")[0], 1))
        await wait_until(lambda: _state(kube, "pytest", "Succeeded"), 40, "job Succeeded, scheduled by sched-kb")
    finally:
        await remove_job(kube, "PyTorchJob", "pytest")
    binds = [r for r in s2.requests() if r[0] == "POST" and "/binding" in r[1]]
    assert len(binds) == 4, binds
    for c in (op, s2):
        c.kill(signal.SIGTERM)
        assert c.wait() == 0, c.text()[-2000:]
